"""``ack_set``: a redelivered batch's names the members acknowledged before, an ACK's those it
leaves unacknowledged (``unacked_in_batch``), and both are kept as words (``ack_sets``).

With batch-index acknowledgement on, the broker redelivers a partly acknowledged batch
whole, and CommandMessage.ack_set (Java BitSet words: bit i of word i // 64 set for a
batch index still unacknowledged) names the members the client must drop. Those members
are not delivered: they get no message row, the frame's ``acked_in_batch`` counts them,
and the broker spends no permit on them.

An ACK names a batch member with the entry's id and an ack_set whose cleared bits are the
members acknowledged: the ``ack_sets`` column keeps each id's words, by the id's place in
``message_ids``. The frames here are built by hand, so this holds without the real
broker's samples; the last test runs both engines on them.
"""

from __future__ import annotations

import pyarrow.parquet as pq

from pwcap.capture.events import Direction
from pwcap.decode.pulsar._pb import pulsar_api_pb2 as pb
from tests.pulsar_frames import command, entry_bytes, frame
from tests.test_engines import run_pwcap
from tests.test_pulsar_state import Conversation

C2B, B2C = Direction.C2B, Direction.B2C
CONSUMER = 1
TABLES = ("frames", "messages", "anomalies")


def batch_entry(size: int) -> bytes:
    """An entry holding a batch of ``size`` empty messages."""
    md = pb.MessageMetadata(
        producer_name="p", sequence_id=0, publish_time=1, num_messages_in_batch=size
    )
    member = pb.SingleMessageMetadata(payload_size=0).SerializeToString()
    return entry_bytes(md, (len(member).to_bytes(4, "big") + member) * size)


def single_entry() -> bytes:
    return entry_bytes(pb.MessageMetadata(producer_name="p", sequence_id=0, publish_time=1), b"x")


def redelivery(entry: int, ack_set: list[int] | None = None) -> pb.BaseCommand:
    fields = {"consumer_id": CONSUMER, "message_id": {"ledgerId": 3, "entryId": entry}}
    if ack_set is not None:
        fields["ack_set"] = ack_set
    return command("MESSAGE", redelivery_count=1, **fields)


def subscribe_frames(permits: int) -> list[tuple[Direction, pb.BaseCommand]]:
    subscribe = command(
        "SUBSCRIBE", topic="t", subscription="s", subType=0, consumer_id=CONSUMER, request_id=1
    )
    flow = command("FLOW", consumer_id=CONSUMER, messagePermits=permits)
    return [(C2B, subscribe), (B2C, command("SUCCESS", request_id=1)), (C2B, flow)]


def subscribed(permits: int) -> Conversation:
    talk = Conversation()
    for direction, cmd in subscribe_frames(permits):
        talk(direction, cmd)
    return talk


def test_the_members_an_ack_set_clears_get_no_message_row():
    talk = subscribed(10)
    # Indexes 0 and 2 acknowledged: bits 1 and 3 set.
    row = talk(B2C, redelivery(5, ack_set=[0b1010]), batch_entry(4))
    assert (row["num_messages"], row["acked_in_batch"]) == (4, 2)
    assert [m["batch_index"] for m in talk.sink.messages] == [1, 3]
    assert {m["batch_size"] for m in talk.sink.messages} == {4}
    assert talk.sink.anomalies == []


def test_indexes_past_the_ack_sets_words_were_acknowledged():
    """A BitSet keeps no trailing zero words: a word missing reads as all cleared. The
    words are signed on the wire (int64): bit 63 is the sign."""
    talk = subscribed(100)
    row = talk(B2C, redelivery(5, ack_set=[-(1 << 63)]), batch_entry(70))
    assert row["acked_in_batch"] == 69
    assert [m["batch_index"] for m in talk.sink.messages] == [63]


def test_a_message_without_an_ack_set_delivers_every_member():
    talk = subscribed(10)
    row = talk(B2C, redelivery(5), batch_entry(3))
    assert row["acked_in_batch"] is None
    assert [m["batch_index"] for m in talk.sink.messages] == [0, 1, 2]


def test_the_acknowledged_members_spend_no_permit():
    talk = subscribed(3)
    talk(B2C, redelivery(5, ack_set=[0b0110]), batch_entry(4))  # two delivered: 1 left
    talk(B2C, redelivery(6), single_entry())  # the last permit
    assert talk.sink.anomalies == []
    talk(B2C, redelivery(7), single_entry())
    assert talk.sink.kinds() == ["protocol_violation"]


def batch_ack(*ack_sets: list[int] | None) -> pb.BaseCommand:
    """An individual ACK of entries 5, 6... with these ack_sets (None: the whole entry)."""
    ids = []
    for entry, words in enumerate(ack_sets, start=5):
        ids.append(pb.MessageIdData(ledgerId=3, entryId=entry, ack_set=words or []))
    return command("ACK", consumer_id=CONSUMER, ack_type=pb.CommandAck.Individual, message_id=ids)


def test_an_acks_ack_sets_are_kept_by_the_ids_place():
    talk = subscribed(10)
    # Entry 5: members 0 and 2 of 4 acknowledged; entry 6 whole; entry 7: a 70-member
    # batch's two words, member 63 (the sign bit) and 64 still owed.
    row = talk(C2B, batch_ack([0b1010], None, [-(1 << 63), 1]))
    assert row["num_message_ids"] == 3
    assert row["ack_sets"] == [
        {"id": 0, "word": 0, "bits": 0b1010},
        {"id": 2, "word": 0, "bits": -(1 << 63)},
        {"id": 2, "word": 1, "bits": 1},
    ]
    assert [i["entry_id"] for i in row["message_ids"]] == [5, 6, 7]


def test_an_ack_without_an_ack_set_has_none():
    talk = subscribed(10)
    row = talk(C2B, batch_ack(None))
    assert row["ack_sets"] is None


def test_both_engines_decode_an_ack_set_alike(tmp_path, write_capture):
    wire = b"".join(frame(cmd) for _, cmd in subscribe_frames(10))
    message = frame(redelivery(5, ack_set=[0b1010]), batch_entry(4))
    ack = frame(batch_ack([0b1000], None))
    streams = [(0, wire), (1, message), (0, ack)]
    capture = write_capture(tmp_path / "ack_set.pcap", [(6650, streams)])
    tables = {}
    for pure_python in (False, True):
        out = tmp_path / ("interpreted" if pure_python else "compiled")
        done = run_pwcap("decode", str(capture), "-o", str(out), "-q", pure_python=pure_python)
        assert done.returncode == 0, done.stderr
        tables[pure_python] = {t: pq.read_table(out / t).to_pylist() for t in TABLES}
    assert tables[False] == tables[True]
    frames, messages = tables[False]["frames"], tables[False]["messages"]
    [delivered] = [f for f in frames if f["command"] == "MESSAGE"]
    assert (delivered["num_messages"], delivered["acked_in_batch"]) == (4, 2)
    assert [m["batch_index"] for m in messages if m["command"] == "MESSAGE"] == [1, 3]
    [acked] = [f for f in frames if f["command"] == "ACK"]
    assert acked["ack_sets"] == [{"id": 0, "word": 0, "bits": 0b1000}]


# -- an ACK's ack_set: the members a batch-index acknowledgement leaves unacknowledged ------


def ack(*ids: dict) -> pb.BaseCommand:
    listed = [pb.MessageIdData(**fields) for fields in ids]
    return command("ACK", consumer_id=CONSUMER, ack_type=0, message_id=listed)


def test_an_acks_ack_set_lists_the_members_it_leaves_unacknowledged():
    talk = subscribed(10)
    # Entry 5: members 0, 2, 4 acknowledged of 5 (bits 1 and 3 set); entry 6 acked whole.
    row = talk(
        C2B, ack({"ledgerId": 3, "entryId": 5, "ack_set": [0b01010]}, {"ledgerId": 3, "entryId": 6})
    )
    assert [(m["entry_id"], m["batch_index"]) for m in row["unacked_in_batch"]] == [(5, 1), (5, 3)]
    assert [m["entry_id"] for m in row["message_ids"]] == [5, 6]


def test_an_ack_set_past_64_members_and_with_the_sign_bit_lists_each_member():
    talk = subscribed(10)
    row = talk(C2B, ack({"ledgerId": 3, "entryId": 5, "ack_set": [-(1 << 63), 1]}))
    assert [m["batch_index"] for m in row["unacked_in_batch"]] == [63, 64]


def test_a_subscribes_key_shared_meta_and_a_redelivery_requests_epoch_are_columns():
    talk = Conversation()
    subscribe = command(
        "SUBSCRIBE",
        topic="t",
        subscription="s",
        subType=3,  # Key_Shared
        consumer_id=CONSUMER,
        request_id=1,
        consumer_epoch=0,
        keySharedMeta={"keySharedMode": 1, "hashRanges": [{"start": 0, "end": 32767}]},
    )
    row = talk(C2B, subscribe)
    assert (row["key_shared_mode"], row["consumer_epoch"]) == ("STICKY", 0)
    assert row["hash_ranges"] == [{"start": 0, "end": 32767}]
    talk(B2C, command("SUCCESS", request_id=1))
    redeliver = command("REDELIVER_UNACKNOWLEDGED_MESSAGES", consumer_id=CONSUMER, consumer_epoch=3)
    assert talk(C2B, redeliver)["consumer_epoch"] == 3


def test_both_engines_decode_an_acks_ack_set_alike(tmp_path, write_capture):
    wire = b"".join(frame(cmd) for _, cmd in subscribe_frames(10))
    wire += frame(ack({"ledgerId": 3, "entryId": 5, "ack_set": [0b01010]}))
    capture = write_capture(tmp_path / "ack.pcap", [(6650, [(0, wire)])])
    tables = {}
    for pure_python in (False, True):
        out = tmp_path / ("interpreted" if pure_python else "compiled")
        done = run_pwcap("decode", str(capture), "-o", str(out), "-q", pure_python=pure_python)
        assert done.returncode == 0, done.stderr
        tables[pure_python] = pq.read_table(out / "frames").to_pylist()
    assert tables[False] == tables[True]
    [acked] = [f for f in tables[False] if f["command"] == "ACK"]
    assert [m["batch_index"] for m in acked["unacked_in_batch"]] == [1, 3]
