"""Per-connection state: names behind ids, request/response pairing, permits, roles."""

from __future__ import annotations

from pwcap.capture.events import ClientBy, Direction
from pwcap.decode.pulsar._pb import pulsar_api_pb2 as pb
from pwcap.decode.pulsar.holdback import MAX_HELD
from tests.pulsar_frames import command, decoder, entry_bytes, frame

C2B, B2C = Direction.C2B, Direction.B2C


class Conversation:
    """Feeds frames in the order given, each direction with its own stream offsets."""

    def __init__(self, client_by: ClientBy = ClientBy.SYN) -> None:
        self.dec, self.sink, self.conn = decoder(client_by)
        self.offsets = [0, 0]
        self.ts = 0

    def __call__(self, direction: Direction, cmd, tail: bytes = b"") -> dict:
        wire = frame(cmd, tail)
        self.ts += 1000
        before = len(self.sink.frames)
        self.dec.on_data(direction, self.ts, self.offsets[direction], wire)
        self.offsets[direction] += len(wire)
        [row] = self.sink.frames[before:]
        return row


def message_entry(num_messages: int = 1) -> bytes:
    md = pb.MessageMetadata(producer_name="p", sequence_id=0, publish_time=1)
    if num_messages > 1:
        md.num_messages_in_batch = num_messages
        payload = b"".join(
            len(s).to_bytes(4, "big") + s
            for s in [pb.SingleMessageMetadata(payload_size=0).SerializeToString()] * num_messages
        )
    else:
        payload = b"x"
    return entry_bytes(md, payload)


def test_responses_pair_by_request_id_even_when_ids_are_sparse():
    talk = Conversation()
    talk(C2B, command("LOOKUP", topic="t1", request_id=17))
    talk(C2B, command("PARTITIONED_METADATA", topic="t2", request_id=5))
    meta = talk(B2C, command("PARTITIONED_METADATA_RESPONSE", request_id=5, partitions=3))
    lookup = talk(B2C, command("LOOKUP_RESPONSE", request_id=17))
    assert (meta["answers"], meta["request_ts"], meta["topic"]) == (
        "PARTITIONED_METADATA",
        2000,
        "t2",
    )
    assert (lookup["answers"], lookup["request_ts"], lookup["topic"]) == ("LOOKUP", 1000, "t1")
    assert talk.sink.anomalies == []


def test_requests_sharing_an_id_are_told_apart_by_the_response_type():
    # As the C++ client does: lookups count client-wide, producers and consumers per
    # connection, so one connection can have LOOKUP 1 and PRODUCER 1 outstanding at once.
    talk = Conversation()
    talk(C2B, command("LOOKUP", topic="lookup-t", request_id=1))
    talk(C2B, command("PRODUCER", topic="producer-t", producer_id=0, request_id=1))
    talk(C2B, command("PARTITIONED_METADATA", topic="meta-t", request_id=2))
    talk(
        C2B,
        command(
            "SUBSCRIBE", topic="sub-t", subscription="s", subType=0, consumer_id=0, request_id=2
        ),
    )
    producer = talk(B2C, command("PRODUCER_SUCCESS", request_id=1, producer_name="p"))
    lookup = talk(B2C, command("LOOKUP_RESPONSE", request_id=1))
    refused = talk(B2C, command("ERROR", request_id=2, error=pb.AuthorizationError, message="no"))
    meta = talk(B2C, command("PARTITIONED_METADATA_RESPONSE", request_id=2, partitions=0))
    answered = [(r["answers"], r["topic"]) for r in (producer, lookup, refused, meta)]
    assert answered == [
        ("PRODUCER", "producer-t"),
        ("LOOKUP", "lookup-t"),
        ("SUBSCRIBE", "sub-t"),
        ("PARTITIONED_METADATA", "meta-t"),
    ]
    talk.dec.on_close(talk.ts)
    assert talk.sink.anomalies == []


def test_a_producer_waiting_for_access_gets_two_producer_success():
    talk = Conversation()
    talk(C2B, command("PRODUCER", topic="t", producer_id=3, request_id=5))
    waiting = talk(
        B2C, command("PRODUCER_SUCCESS", request_id=5, producer_name="p", producer_ready=False)
    )
    ready = talk(B2C, command("PRODUCER_SUCCESS", request_id=5, producer_name="p"))
    assert [(r["answers"], r["request_ts"]) for r in (waiting, ready)] == [("PRODUCER", 1000)] * 2
    talk.dec.on_close(talk.ts)
    assert talk.sink.anomalies == []


def test_a_request_is_answered_once():
    talk = Conversation()
    talk(C2B, command("LOOKUP", topic="t", request_id=1))
    talk(B2C, command("LOOKUP_RESPONSE", request_id=1))
    again = talk(B2C, command("LOOKUP_RESPONSE", request_id=1))
    assert again["answers"] is None
    talk.dec.on_close(talk.ts)
    assert talk.sink.kinds() == ["unmatched_response"]


def test_unmatched_waits_for_proof_that_the_request_was_not_lost():
    talk = Conversation()
    talk(C2B, command("FLOW", consumer_id=1, messagePermits=1))
    talk(B2C, command("SEND_RECEIPT", producer_id=1, sequence_id=4))
    assert talk.sink.anomalies == []
    # The client's stream turns out to have lost bytes: the SEND was in them.
    talk.dec.on_gap(C2B, talk.ts, talk.offsets[C2B], 200)
    talk.dec.on_close(talk.ts)
    assert talk.sink.anomalies == []


def test_unmatched_is_reported_once_later_client_bytes_arrive_without_a_gap():
    talk = Conversation()
    talk(B2C, command("SEND_RECEIPT", producer_id=1, sequence_id=4))
    talk(C2B, command("FLOW", consumer_id=1, messagePermits=1))
    assert talk.sink.kinds() == ["unmatched_response"]


def test_unmatched_responses_are_not_flagged_without_the_start_of_the_connection():
    talk = Conversation(ClientBy.PORT)
    talk(B2C, command("SUCCESS", request_id=3))
    talk(B2C, command("PONG"))
    assert talk.sink.anomalies == []


def test_producer_names_flow_from_producer_success_to_sends_and_receipts():
    talk = Conversation()
    talk(C2B, command("PRODUCER", topic="persistent://t/n/x", producer_id=2, request_id=8))
    success = talk(B2C, command("PRODUCER_SUCCESS", request_id=8, producer_name="standalone-0-3"))
    assert (success["producer_id"], success["answers"]) == (2, "PRODUCER")
    send = talk(
        C2B,
        command("SEND", producer_id=2, sequence_id=0, num_messages=1),
        message_entry(),
    )
    assert send["topic"] == "persistent://t/n/x"
    assert send["producer_name"] == "standalone-0-3"
    assert talk.sink.messages[0]["topic"] == "persistent://t/n/x"
    receipt = talk(B2C, command("SEND_RECEIPT", producer_id=2, sequence_id=0))
    assert (receipt["answers"], receipt["request_ts"]) == ("SEND", send["ts"])
    assert receipt["producer_name"] == "standalone-0-3"


def test_batch_send_receipt_and_send_error():
    talk = Conversation()
    talk(C2B, command("SEND", producer_id=1, sequence_id=10, highest_sequence_id=14))
    talk(C2B, command("SEND", producer_id=1, sequence_id=15))
    error = talk(
        B2C,
        command(
            "SEND_ERROR", producer_id=1, sequence_id=15, error=pb.PersistenceError, message="x"
        ),
    )
    receipt = talk(
        B2C, command("SEND_RECEIPT", producer_id=1, sequence_id=10, highest_sequence_id=14)
    )
    assert (error["answers"], error["request_ts"], error["error_code"]) == (
        "SEND",
        2000,
        "PersistenceError",
    )
    assert (receipt["answers"], receipt["request_ts"]) == ("SEND", 1000)


def test_ack_response_pairs_by_consumer_and_request_id():
    talk = Conversation()
    talk(C2B, command("ACK", consumer_id=1, ack_type=0, request_id=30))
    talk(C2B, command("ACK", consumer_id=2, ack_type=0, request_id=30))
    second = talk(B2C, command("ACK_RESPONSE", consumer_id=2, request_id=30))
    first = talk(B2C, command("ACK_RESPONSE", consumer_id=1, request_id=30))
    assert (second["request_ts"], first["request_ts"]) == (2000, 1000)


def test_ping_pong_in_order_both_ways():
    talk = Conversation()
    talk(C2B, command("PING"))
    talk(B2C, command("PING"))
    talk(C2B, command("PING"))
    broker_pong = talk(B2C, command("PONG"))
    client_pong = talk(C2B, command("PONG"))
    broker_pong2 = talk(B2C, command("PONG"))
    assert broker_pong["request_ts"] == 1000
    assert client_pong["request_ts"] == 2000
    assert broker_pong2["request_ts"] == 3000
    assert talk.sink.anomalies == []


def test_consumer_names_on_messages_and_acks():
    talk = Conversation()
    talk(
        C2B,
        command(
            "SUBSCRIBE",
            topic="t",
            subscription="s",
            subType=pb.CommandSubscribe.Shared,
            consumer_id=4,
            request_id=1,
            consumer_name="c-4",
        ),
    )
    success = talk(B2C, command("SUCCESS", request_id=1))
    assert (success["consumer_id"], success["subscription"]) == (4, "s")
    talk(C2B, command("FLOW", consumer_id=4, messagePermits=10))
    msg = talk(
        B2C,
        command(
            "MESSAGE", consumer_id=4, redelivery_count=2, message_id={"ledgerId": 1, "entryId": 9}
        ),
        message_entry(),
    )
    assert (msg["subscription"], msg["consumer_name"], msg["sub_type"]) == ("s", "c-4", "Shared")
    [delivered] = talk.sink.messages
    assert (delivered["subscription"], delivered["consumer_name"]) == ("s", "c-4")
    assert (delivered["redelivery_count"], delivered["entry_id"]) == (2, 9)
    ack = talk(C2B, command("ACK", consumer_id=4, ack_type=0))
    assert ack["topic"] == "t"


def subscribed(permits: int) -> Conversation:
    talk = Conversation()
    talk(
        C2B,
        command("SUBSCRIBE", topic="t", subscription="s", subType=0, consumer_id=1, request_id=1),
    )
    talk(C2B, command("FLOW", consumer_id=1, messagePermits=permits))
    return talk


def deliver(talk: Conversation, num_messages: int = 1) -> None:
    mid = {"ledgerId": 1, "entryId": 1}
    talk(B2C, command("MESSAGE", consumer_id=1, message_id=mid), message_entry(num_messages))


def test_message_beyond_permits_is_a_protocol_violation():
    talk = subscribed(2)
    deliver(talk)
    deliver(talk)
    assert talk.sink.anomalies == []
    deliver(talk)
    assert talk.sink.kinds() == ["protocol_violation"]


def test_a_whole_batch_may_overdraw_the_last_permits():
    talk = subscribed(2)
    deliver(talk, num_messages=5)
    assert talk.sink.anomalies == []
    deliver(talk)
    assert talk.sink.kinds() == ["protocol_violation"]
    talk(C2B, command("FLOW", consumer_id=1, messagePermits=10))
    deliver(talk)
    assert talk.sink.kinds() == ["protocol_violation"]  # balance 10-3 > 0: fine again


def test_permits_are_not_judged_after_a_gap():
    talk = subscribed(1)
    talk.dec.on_gap(C2B, talk.ts, talk.offsets[C2B], 50)
    deliver(talk)
    deliver(talk)
    assert "protocol_violation" not in talk.sink.kinds()


def test_reversed_roles_are_fixed_once_from_content():
    talk = Conversation(ClientBy.GUESS)
    # Reassembly guessed the broker as client: its CONNECTED arrives labelled C2B.
    connected = talk(C2B, command("CONNECTED", server_version="b", protocol_version=21))
    assert connected["direction"] == "b2c"
    assert (talk.conn.client_port, talk.conn.server_port) == (6650, 40000)
    # Capture now labels relative to the new roles: the client's bytes come as C2B.
    talk.offsets = [0, connected["frame_size"]]
    flow = talk(C2B, command("FLOW", consumer_id=1, messagePermits=5))
    pong = talk(B2C, command("PONG"))
    assert (flow["direction"], pong["direction"]) == ("c2b", "b2c")
    assert (talk.conn.client_port, talk.conn.server_port) == (6650, 40000)


def test_rows_before_the_roles_are_proven_leave_with_the_proven_directions():
    dec, sink, conn = decoder(ClientBy.GUESS)
    # Reassembly guessed wrong: the broker's bytes are labelled C2B.
    broker = frame(command("PING")) + frame(command("SEND_RECEIPT", producer_id=1, sequence_id=0))
    client = frame(command("PONG"))
    dec.on_data(C2B, 1000, 0, broker[: len(frame(command("PING")))])
    dec.on_data(B2C, 2000, 0, client)
    assert sink.frames == []  # nothing proves the roles yet: held
    dec.on_data(C2B, 3000, len(frame(command("PING"))), broker[len(frame(command("PING"))) :])
    assert [(r["command"], r["direction"]) for r in sink.frames] == [
        ("PING", "b2c"),
        ("PONG", "c2b"),
        ("SEND_RECEIPT", "b2c"),
    ]
    assert (conn.client_port, conn.server_port) == (6650, 40000)


def test_held_rows_go_out_as_guessed_when_nothing_proves_the_roles():
    dec, sink, conn = decoder(ClientBy.GUESS)
    pings = frame(command("PING")) * (MAX_HELD + 1)
    dec.on_data(C2B, 1000, 0, pings)
    assert len(sink.frames) == MAX_HELD + 1
    assert {r["direction"] for r in sink.frames} == {"c2b"}
    dec.on_data(B2C, 2000, 0, frame(command("PONG")))
    dec.on_close(3000)
    assert [r["direction"] for r in sink.frames[-1:]] == ["b2c"]
    assert (conn.client_port, conn.server_port) == (40000, 6650)
