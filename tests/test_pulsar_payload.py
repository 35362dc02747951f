"""Payload frames: checksum, broker entry metadata, compression, batches, chunks."""

from __future__ import annotations

import hashlib
import struct

import pytest

from pwcap.capture.events import Direction
from pwcap.decode.api import DecodeOptions, RowSink
from pwcap.decode.pulsar._pb import pulsar_api_pb2 as pb
from pwcap.decode.pulsar.chunks import MAX_PENDING_MESSAGES, ChunkAssembler
from pwcap.decode.pulsar.decoder import PulsarDecoder
from pwcap.tables.columns import ColumnBuffer
from pwcap.tables.schema import arrow_schema
from tests.pulsar_frames import (
    batch,
    command,
    compress,
    connection,
    decoder,
    entry_bytes,
    frame,
)


def sha(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


def send(metadata, payload, sequence_id=0, **entry_options):
    cmd = command("SEND", producer_id=1, sequence_id=sequence_id)
    return frame(cmd, entry_bytes(metadata, payload, **entry_options))


def decode(*wire, direction=Direction.C2B, **options):
    dec, sink, _ = decoder(**options)
    dec.on_data(direction, 1_000, 0, b"".join(wire))
    dec.on_close(2_000)
    return sink


def metadata(sequence_id=0, **fields):
    return pb.MessageMetadata(
        producer_name="prod-a", sequence_id=sequence_id, publish_time=1_700_000, **fields
    )


def test_single_message_with_good_checksum():
    sink = decode(send(metadata(partition_key="k1"), b"hello"))
    [row] = sink.messages
    assert row["checksum_ok"] is True
    assert sink.frames[0]["checksum_ok"] is True
    assert row["payload_sha256"] == sha(b"hello")
    assert row["payload_size"] == 5
    assert row["key"] == "k1"
    assert row["producer_name"] == "prod-a"
    assert row["publish_time"] == 1_700_000_000
    assert row.get("batch_index") is None
    assert row["payload"] is None
    assert sink.anomalies == []


def test_bad_checksum_is_flagged_and_the_message_still_decoded():
    sink = decode(send(metadata(), b"hello", corrupt_checksum=True))
    [row] = sink.messages
    assert row["checksum_ok"] is False
    assert row["payload_sha256"] == sha(b"hello")
    assert sink.kinds() == ["bad_checksum"]


def test_payload_without_checksum_is_accepted():
    sink = decode(send(metadata(), b"old client", checksum=False))
    [row] = sink.messages
    assert row["checksum_ok"] is None
    assert row["payload_sha256"] == sha(b"old client")


def test_payload_bytes_only_when_asked():
    sink = decode(send(metadata(), b"body"), payloads=True)
    assert sink.messages[0]["payload"] == b"body"


def test_broker_entry_metadata_before_the_checksum():
    cmd = command("MESSAGE", consumer_id=3, message_id={"ledgerId": 5, "entryId": 6})
    broker = pb.BrokerEntryMetadata(broker_timestamp=1_700_000_123, index=41)
    sink = decode(
        frame(cmd, entry_bytes(metadata(), b"x", broker_entry=broker)), direction=Direction.B2C
    )
    [row] = sink.messages
    assert row["broker_timestamp"] == 1_700_000_123_000
    assert row["broker_index"] == 41
    assert row["checksum_ok"] is True
    assert (row["ledger_id"], row["entry_id"]) == (5, 6)
    assert sink.frames[0]["broker_index"] == 41


def _varint(value: int) -> bytes:
    out = bytearray()
    while True:
        out.append(value & 0x7F | (0x80 if value > 0x7F else 0))
        value >>= 7
        if not value:
            return bytes(out)


BROKER_ENTRIES = {
    "both": _varint(8) + _varint(1_700_000_123) + _varint(16) + _varint(41),
    "index only, the largest an int64 column holds": _varint(16) + _varint(2**63 - 1),
    "empty": b"",
    "repeated, the last wins": _varint(8) + _varint(5) + _varint(8) + _varint(7),
    "an unknown field skipped": _varint(26) + b"\x02ab" + _varint(16) + _varint(3),
    "an unknown fixed64 skipped": _varint(33) + bytes(8) + _varint(8) + _varint(9),
    "a known field as bytes": _varint(10) + b"\x01x" + _varint(16) + _varint(3),
    "a varint cut short": _varint(8) + b"\x80",
    "a group": _varint(27) + _varint(28),
    "field number 0": b"\x00\x01",
}


@pytest.mark.parametrize("encoded", list(BROKER_ENTRIES.values()), ids=list(BROKER_ENTRIES))
def test_broker_entry_metadata_reads_as_the_generated_class_reads_it(encoded):
    """The wire reader that reads the broker entry metadata agrees with protobuf's on every
    shape: valid, unusual (repeated and unknown fields), and damaged (an anomaly)."""
    try:
        generated = pb.BrokerEntryMetadata.FromString(encoded)
    except Exception:
        generated = None
    cmd = command("MESSAGE", consumer_id=3, message_id={"ledgerId": 5, "entryId": 6})
    entry = b"\x0e\x02" + struct.pack(">I", len(encoded)) + encoded + entry_bytes(metadata(), b"x")
    sink = decode(frame(cmd, entry), direction=Direction.B2C)
    if generated is None:
        assert not sink.messages
        assert [a["kind"] for a in sink.anomalies] == ["bad_protobuf"]
        return
    [row] = sink.messages
    timestamp = generated.broker_timestamp if generated.HasField("broker_timestamp") else None
    assert row["broker_timestamp"] == (None if timestamp is None else timestamp * 1000)
    assert row["broker_index"] == (generated.index if generated.HasField("index") else None)


def batch_of(n):
    members = []
    for i in range(n):
        single = pb.SingleMessageMetadata(partition_key=f"key-{i}", event_time=1000 + i)
        single.properties.add(key="i", value=str(i))
        members.append((single, f"payload-{i}".encode()))
    return members


def test_batch_of_100_becomes_100_rows():
    members = batch_of(100)
    # The entry's metadata carries the first member's sequence id (consumers see no other).
    md = metadata(sequence_id=500, num_messages_in_batch=100)
    sink = decode(send(md, batch(members), sequence_id=500))
    assert len(sink.messages) == 100
    assert [r["batch_index"] for r in sink.messages] == list(range(100))
    assert [r["sequence_id"] for r in sink.messages] == list(range(500, 600))
    assert [r["key"] for r in sink.messages] == [f"key-{i}" for i in range(100)]
    assert sink.messages[7]["properties"] == [("i", "7")]
    assert sink.messages[7]["event_time"] == 1_007_000
    assert [r["payload_sha256"] for r in sink.messages] == [sha(p) for _, p in members]
    assert {r["batch_size"] for r in sink.messages} == {100}
    assert sink.frames[0]["num_messages"] == 100


def test_batch_member_sequence_id_wins_when_set():
    members = [(pb.SingleMessageMetadata(sequence_id=40 + i), b"m") for i in range(3)]
    sink = decode(send(metadata(num_messages_in_batch=3), batch(members), sequence_id=0))
    assert [r["sequence_id"] for r in sink.messages] == [40, 41, 42]


def test_a_batch_member_without_its_required_payload_size_ends_the_batch():
    whole = batch([(pb.SingleMessageMetadata(), b"a")])
    lacking = pb.SingleMessageMetadata(sequence_id=9).SerializePartialToString()
    broken = struct.pack(">I", len(lacking)) + lacking + b"a"
    sink = decode(send(metadata(num_messages_in_batch=3), whole + broken + whole))
    assert [r["batch_index"] for r in sink.messages] == [0]  # the members before it stay
    [anomaly] = sink.anomalies
    assert anomaly["kind"] == "bad_batch" and "payload_size" in anomaly["detail"]


def test_a_batch_count_its_bytes_cannot_hold_is_one_message_row_and_an_anomaly():
    members = batch(batch_of(3))
    sink = decode(send(metadata(num_messages_in_batch=1000), members))
    [entry] = sink.messages  # not expanded: the entry is one row, as its metadata says
    assert (entry["batch_size"], entry.get("batch_index")) == (1000, None)
    [anomaly] = sink.anomalies
    assert (
        anomaly["detail"]
        == f"declares 1000 messages in {len(members)} bytes, room for at most {len(members) // 6}"
    )


def test_each_member_row_has_its_own_fields_only():
    # The members of the common shape are read one after another into one reading, the
    # others by the generated class: a member inherits nothing from the one before.
    first = pb.SingleMessageMetadata(partition_key="k", event_time=5, sequence_id=70)
    first.properties.add(key="a", value="1")
    first.properties.add(key="b", value="2")
    bare = pb.SingleMessageMetadata()
    # partition_key given twice: the wire reader declines, the generated class keeps the last
    twice = (
        pb.SingleMessageMetadata(partition_key="x", payload_size=3).SerializeToString()
        + pb.SingleMessageMetadata(partition_key="y").SerializePartialToString()
    )
    odd = struct.pack(">I", len(twice)) + twice + b"odd"
    members = batch([(first, b"one"), (bare, b"two")]) + odd + batch([(bare, b"four")])
    md = metadata(sequence_id=500, num_messages_in_batch=4, event_time=9, partition_key="e")
    sink = decode(send(md, members))
    rows = [
        (r["batch_index"], r["key"], r["event_time"], r["sequence_id"], r["properties"])
        for r in sink.messages
    ]
    assert rows == [
        (0, "k", 5_000, 70, [("a", "1"), ("b", "2")]),
        (1, None, None, 501, None),
        (2, "y", None, 502, None),
        (3, None, None, 503, None),
    ]
    assert [r["payload_sha256"] for r in sink.messages] == [
        sha(p) for p in (b"one", b"two", b"odd", b"four")
    ]
    assert sink.anomalies == []


def delivered_batch(rows_per_buffer: int) -> list[dict]:
    """The message rows of a batch of 7 delivered with broker entry metadata, built in
    buffers of ``rows_per_buffer`` rows (each handed on when full, as Arrow batches are)."""
    taken: dict[str, list[dict]] = {"frames": [], "messages": [], "anomalies": []}
    buffers: dict[str, ColumnBuffer] = {}
    for table, rows in taken.items():
        buffers[table] = ColumnBuffer(
            arrow_schema(table),
            rows_per_buffer,
            0,
            lambda t=table, r=rows: r.extend(buffers[t].take_rows()),
        )
    conn = connection()
    dec = PulsarDecoder(
        conn, RowSink(*buffers.values()), DecodeOptions(capture="t.pcap"), conn.flip
    )
    md = metadata(sequence_id=10, num_messages_in_batch=7, replicated_from="east", event_time=3)
    cmd = command("MESSAGE", consumer_id=3, message_id={"ledgerId": 5, "entryId": 6})
    broker = pb.BrokerEntryMetadata(broker_timestamp=1_700_000_123, index=41)
    wire = frame(cmd, entry_bytes(md, batch(batch_of(7)), broker_entry=broker))
    dec.on_data(Direction.B2C, 1_000, 0, wire)
    dec.on_close(2_000)
    taken["messages"].extend(buffers["messages"].take_rows())
    return taken["messages"]


@pytest.mark.parametrize("rows_per_buffer", [3, 100])
def test_the_members_of_a_batch_have_their_entry_whatever_the_buffer(rows_per_buffer):
    # The other tests build one row at a time; a dataset's buffers hold many, and may
    # be handed to Arrow in the middle of a batch (3 rows): the rows are the same.
    one_by_one = delivered_batch(1)
    assert delivered_batch(rows_per_buffer) == one_by_one
    assert [r["batch_index"] for r in one_by_one] == list(range(7))
    entry = {
        (r["ledger_id"], r["entry_id"], r["consumer_id"], r["producer_name"], r["batch_size"])
        for r in one_by_one
    }
    assert entry == {(5, 6, 3, "prod-a", 7)}
    broker = {
        (r["publish_time"], r["broker_timestamp"], r["broker_index"], r["replicated_from"])
        for r in one_by_one
    }
    assert broker == {(1_700_000_000, 1_700_000_123_000, 41, "east")}


GOOD_MEMBERS = [(pb.SingleMessageMetadata(partition_key=f"k{i}"), b"payload") for i in range(2)]


@pytest.mark.parametrize(
    ("damage", "declared", "detail"),
    [
        (b"\x00\x00", 3, "batch ends after 2 of 3 messages"),  # its size cut short
        (b"", 3, "batch ends after 2 of 3 messages"),  # fewer members than declared
        (struct.pack(">I", 1000) + b"\x08\x01", 3, "metadata of message 2 overruns the batch"),
        (
            struct.pack(">I", 2)
            + pb.SingleMessageMetadata(payload_size=50).SerializePartialToString()
            + b"abc",
            3,
            "payload of message 2 overruns the batch",
        ),
        (struct.pack(">I", 3) + b"\xff\xff\xff", 3, "undecodable metadata of message 2"),
    ],
)
def test_a_damaged_member_ends_the_batch_after_the_members_before_it(damage, declared, detail):
    sink = decode(send(metadata(num_messages_in_batch=declared), batch(GOOD_MEMBERS) + damage))
    assert [(r["batch_index"], r["key"]) for r in sink.messages] == [(0, "k0"), (1, "k1")]
    [anomaly] = sink.anomalies
    assert anomaly["kind"] == "bad_batch" and anomaly["detail"].startswith(detail)


def test_a_batch_damaged_at_its_first_member_is_the_entry_as_one_row():
    damage = struct.pack(">I", 1000) + b"\x08\x01" * 4
    sink = decode(send(metadata(num_messages_in_batch=1, partition_key="e"), damage))
    [entry] = sink.messages
    assert (entry["batch_index"], entry["key"], entry["payload_size"]) == (None, "e", None)
    assert [a["detail"] for a in sink.anomalies] == ["metadata of message 0 overruns the batch"]


@pytest.mark.parametrize("codec", ["LZ4", "ZLIB", "ZSTD", "SNAPPY"])
def test_compressed_batch(codec):
    members = batch_of(20)
    raw = batch(members)
    md = metadata(
        num_messages_in_batch=20,
        compression=pb.CompressionType.Value(codec),
        uncompressed_size=len(raw),
    )
    sink = decode(send(md, compress(codec, raw)))
    assert sink.anomalies == []
    assert [r["payload_sha256"] for r in sink.messages] == [sha(p) for _, p in members]
    assert {r["compression"] for r in sink.messages} == {codec}


def test_zlib_stream_without_end_marker_is_accepted():
    data = b"a java client never finishes its deflater " * 50
    stream = compress("ZLIB", data)
    assert not stream.endswith(b"\x03\x00")  # no final block
    md = metadata(compression=pb.ZLIB, uncompressed_size=len(data))
    sink = decode(send(md, stream))
    assert sink.messages[0]["payload_sha256"] == sha(data)


def test_decompression_bomb_is_refused():
    data = b"\x00" * 1_000_000
    md = metadata(compression=pb.ZSTD, uncompressed_size=len(data))
    sink = decode(send(md, compress("ZSTD", data)), max_decompressed_size=100_000)
    assert sink.kinds() == ["decompression_failed"]
    assert sink.messages[0].get("payload_sha256") is None


@pytest.mark.parametrize("codec", ["LZ4", "ZLIB", "ZSTD", "SNAPPY"])
def test_an_uncompressed_size_within_the_limit_is_still_not_trusted(codec):
    # 50 MB announced for a few bytes: refused without producing (or allocating) it.
    md = metadata(compression=pb.CompressionType.Value(codec), uncompressed_size=50_000_000)
    sink = decode(send(md, compress(codec, b"tiny")))
    assert sink.kinds() == ["decompression_failed"]


def test_lying_uncompressed_size_is_caught():
    data = b"0123456789" * 100
    md = metadata(compression=pb.ZSTD, uncompressed_size=10)
    sink = decode(send(md, compress("ZSTD", data)))
    assert sink.kinds() == ["decompression_failed"]


def test_corrupt_compressed_payload_then_the_next_frame_decodes():
    md = metadata(compression=pb.LZ4, uncompressed_size=500)
    sink = decode(send(md, b"\xff" * 40), send(metadata(), b"fine", sequence_id=1))
    assert sink.kinds() == ["decompression_failed"]
    assert [f["command"] for f in sink.frames] == ["SEND", "SEND"]
    assert sink.messages[-1]["payload_sha256"] == sha(b"fine")


def chunked(whole: bytes, n: int, codec: str = "NONE"):
    body = compress(codec, whole)
    size = -(-len(body) // n)
    frames = []
    for chunk_id in range(n):
        md = metadata(
            uuid="prod-a-0",
            chunk_id=chunk_id,
            num_chunks_from_msg=n,
            total_chunk_msg_size=len(body),
            compression=pb.CompressionType.Value(codec),
            uncompressed_size=len(whole),
        )
        frames.append(send(md, body[chunk_id * size : (chunk_id + 1) * size]))
    return frames


@pytest.mark.parametrize("codec", ["NONE", "LZ4"])
def test_chunks_are_reassembled_and_digested_on_the_last_chunk(codec):
    whole = bytes(range(256)) * 40
    sink = decode(*chunked(whole, 3, codec))
    assert [r["chunk_id"] for r in sink.messages] == [0, 1, 2]
    assert {r["num_chunks"] for r in sink.messages} == {3}
    assert {r["uuid"] for r in sink.messages} == {"prod-a-0"}
    assert [r.get("chunked_sha256") for r in sink.messages] == [None, None, sha(whole)]


def test_a_missing_chunk_leaves_no_digest_and_is_reported():
    frames = chunked(b"z" * 3000, 3)
    sink = decode(frames[0], frames[2])
    assert [r.get("chunked_sha256") for r in sink.messages] == [None, None]
    assert sink.kinds() == ["chunk_missing"]
    assert sink.anomalies[0]["stream_offset"] == len(frames[0])


def test_chunks_seen_without_their_start_are_reported():
    frames = chunked(b"z" * 3000, 3)
    sink = decode(frames[1], frames[2])
    assert sink.kinds() == ["chunk_missing", "chunk_missing"]


def test_encrypted_entry_is_flagged_not_decrypted():
    md = metadata(num_messages_in_batch=4, compression=pb.LZ4, uncompressed_size=999)
    md.encryption_keys.add(key="k", value=b"wrapped")
    sink = decode(send(md, b"ciphertext"))
    [row] = sink.messages
    assert row["encrypted"] is True
    assert row["batch_size"] == 4
    assert row["payload_sha256"] == sha(b"ciphertext")
    assert sink.anomalies == []


def test_metadata_that_overruns_the_frame_is_an_anomaly():
    cmd = command("SEND", producer_id=1, sequence_id=0)
    sink = decode(frame(cmd, b"\x00\x00\x10\x00garbage"), send(metadata(), b"ok", sequence_id=1))
    assert sink.kinds() == ["bad_payload"]
    assert len(sink.frames) == 2
    assert sink.messages[0]["payload_sha256"] == sha(b"ok")


def test_incomplete_chunked_messages_are_bounded_in_memory():
    assembler = ChunkAssembler(max_bytes=1000)
    reports = []

    def add(key: str, chunk_id: int, data: bytes) -> bytes | None:
        return assembler.add(key, chunk_id, 2, data, lambda *report: reports.append(report))

    assert add("old", 0, b"a" * 600) is None
    assert add("new", 0, b"b" * 600) is None  # over the bound: "old" goes
    assert [kind for kind, _ in reports] == ["chunk_evicted"]
    assert add("old", 1, b"a") is None
    assert add("new", 1, b"b") == b"b" * 601
    assert [kind for kind, _ in reports] == ["chunk_evicted", "chunk_missing"]


def test_incomplete_chunked_messages_are_bounded_in_number_however_small():
    """Empty first chunks under ever new uuids hold no bytes, yet cannot pile up."""
    assembler = ChunkAssembler(max_bytes=1000)
    reports = []
    for uuid in range(MAX_PENDING_MESSAGES + 5):
        assembler.add(uuid, 0, 2, b"", lambda *report: reports.append(report))
    assert [kind for kind, _ in reports] == ["chunk_evicted"] * 5
    assert "incomplete messages" in reports[0][1]
    assert assembler.add(MAX_PENDING_MESSAGES + 4, 1, 2, b"z", print) == b"z"  # the newest stays


def test_the_chunk_memory_bound_is_the_decompression_limit():
    frames = chunked(bytes(range(256)) * 40, 3)
    sink = decode(*frames, max_decompressed_size=2000)
    assert "chunk_evicted" in sink.kinds()
    assert [r.get("chunked_sha256") for r in sink.messages] == [None, None, None]
