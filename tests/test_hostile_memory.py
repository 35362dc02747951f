"""Inputs shaped to make pwcap hold memory: each decode's peak stays under the budget.

Each capture here is small or cheap to make and asks for far more memory than the budget:
rows by the million from one record, decompressed payloads of 64 MiB, tens of thousands of
connections, hundreds of megabytes of bytes waiting behind holes. Each is decoded by the
``pwcap`` program in a child process whose own peak RSS is measured.
"""

from __future__ import annotations

import struct
import subprocess
import sys
from collections import Counter
from pathlib import Path

import pyarrow.dataset as ds
import pyarrow.parquet as pq
import pytest
import zstandard

from tests.kafka07_frames import (
    FETCH,
    GZIP,
    SNAPPY,
    compressed,
    fetch_body,
    message,
    produce_body,
    request,
    response,
)
from tests.pulsar_frames import command, entry_bytes, frame, pb

MEMORY_BUDGET_MB = 400
BATCH_BYTES = 1 << 20
# One member: its metadata's size, then a SingleMessageMetadata of payload_size 0.
EMPTY_MESSAGE = struct.pack(">I", 2) + pb.SingleMessageMetadata(payload_size=0).SerializeToString()

# Runs the command as its own child and prints that child's peak RSS alone (the test
# process's own children include every Spark and decode an earlier test started).
_PEAK_OF = """
import resource, subprocess, sys
done = subprocess.run(sys.argv[1:], capture_output=True, text=True)
sys.stderr.write(done.stderr)
print(resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss / 1024)
sys.exit(done.returncode)
"""


def decode_within_budget(capture: Path, out: Path, *options: str) -> None:
    """``pwcap decode`` in a child of its own: it succeeds, and its peak RSS is in budget."""
    decode = [sys.executable, "-m", "pwcap.cli", "decode", str(capture), "-o", str(out), "-q"]
    done = subprocess.run(
        [sys.executable, "-c", _PEAK_OF, *decode, "--jobs", "1", *options],
        capture_output=True,
        text=True,
        check=False,
    )
    assert done.returncode == 0, done.stderr
    assert float(done.stdout) < MEMORY_BUDGET_MB


def table(out: Path, name: str) -> list[dict]:
    return ds.dataset(out / name).to_table().to_pylist()


def pulsar_send(metadata: pb.MessageMetadata, payload: bytes, messages: int = 1) -> bytes:
    send = command("SEND", producer_id=1, sequence_id=metadata.sequence_id, num_messages=messages)
    return frame(send, entry_bytes(metadata, payload))


def test_a_batch_of_empty_messages_stays_within_the_memory_budget(tmp_path, write_capture):
    """A batch of a million bytes holds 174,762 empty messages, all from one record: their
    rows leave for Arrow as they come (628 MB when they waited for a periodic flush)."""
    count = BATCH_BYTES // len(EMPTY_MESSAGE)
    metadata = pb.MessageMetadata(
        producer_name="p", sequence_id=0, publish_time=1, num_messages_in_batch=count
    )
    send = pulsar_send(metadata, EMPTY_MESSAGE * count, count)
    capture = write_capture(tmp_path / "bomb.pcap", [(6650, [(0, send)])])
    decode_within_budget(capture, tmp_path / "ds")
    assert pq.read_metadata(tmp_path / "ds" / "messages" / "part-00000.parquet").num_rows == count


def test_a_batch_declaring_more_messages_than_its_bytes_hold_is_refused_before_expanding(
    tmp_path, write_capture
):
    """2^31-1 messages declared over ZSTD of 64 MiB of zeros (a 2 KB capture): zeros are
    11 million messages of four bytes each, which the count check turns down at once (the
    decoder wrote 16 million rows over two minutes before)."""
    zeros = 64 << 20
    metadata = pb.MessageMetadata(
        producer_name="p",
        sequence_id=0,
        publish_time=1,
        num_messages_in_batch=2**31 - 1,
        compression=pb.ZSTD,
        uncompressed_size=zeros,
    )
    send = pulsar_send(metadata, zstandard.ZstdCompressor().compress(bytes(zeros)), 2**31 - 1)
    capture = write_capture(tmp_path / "bomb.pcap", [(6650, [(0, send)])])
    decode_within_budget(capture, tmp_path / "ds")
    [entry] = table(tmp_path / "ds", "messages")  # the entry stays one message row
    assert (entry["batch_size"], entry["compression"]) == (2**31 - 1, "ZSTD")
    [anomaly] = table(tmp_path / "ds", "anomalies")
    assert anomaly["kind"] == "bad_batch" and "declares 2147483647 messages" in anomaly["detail"]


def test_payloads_of_64_mib_each_keep_their_first_8_mib(tmp_path, write_capture):
    """Thirty SENDs of ZSTD(64 MiB) with ``--payloads`` reached 4.9 GB: a kept payload is
    at most 8 MiB (Parquet needs several times a value's size to write it)."""
    size = 64 << 20
    payload = zstandard.ZstdCompressor().compress(b"p" * size)
    sends = b"".join(
        pulsar_send(
            pb.MessageMetadata(
                producer_name="p",
                sequence_id=index,
                publish_time=1,
                compression=pb.ZSTD,
                uncompressed_size=size,
            ),
            payload,
        )
        for index in range(30)
    )
    capture = write_capture(tmp_path / "bomb.pcap", [(6650, [(0, sends)])])
    decode_within_budget(capture, tmp_path / "ds", "--payloads")
    rows = ds.dataset(tmp_path / "ds" / "messages").to_table(columns=["payload_size", "payload"])
    assert rows.num_rows == 30
    assert set(rows.column("payload_size").to_pylist()) == {size}
    assert {len(kept) for kept in rows.column("payload").to_pylist()} == {8 << 20}


def test_a_kafka_message_set_of_16_mib_of_gzipped_zeros_stays_within_budget(
    tmp_path, write_capture
):
    """Zeros inflate to a message set of empty messages; they reached 2.7 GB of anomaly rows."""
    produce = request(0, produce_body("t", 0, compressed(message(bytes(16 << 20)), GZIP)))
    capture = write_capture(tmp_path / "bomb.pcap", [(9092, [(0, produce)])])
    decode_within_budget(capture, tmp_path / "ds")
    assert len(table(tmp_path / "ds", "frames")) == 1


# 0.7's smallest message: magic 0, an empty payload: its length, magic and CRC, 9 bytes.
EMPTY_KAFKA_MESSAGE = message(b"", magic=0)


def kafka_produces(wrapper: bytes, count: int) -> bytes:
    return request(0, produce_body("t", 0, wrapper)) * count


def messages_of(out: Path) -> int:
    return ds.dataset(out / "messages").count_rows()


@pytest.mark.parametrize(
    ("codec", "framed"),
    [
        (GZIP, False),
        pytest.param(SNAPPY, False, marks=pytest.mark.slow),
        pytest.param(SNAPPY, True, marks=pytest.mark.slow),
    ],
    ids=["gzip", "snappy-block", "snappy-xerial"],
)
def test_a_kafka_wrapper_of_millions_of_empty_messages_stays_within_budget(
    tmp_path, write_capture, codec, framed
):
    """A wrapper of 2.5 million 9-byte messages (22 MB expanded, 22 KB of gzip): each
    message waited for its frame's end as objects of 230 bytes (two frames of 6.7 million
    reached 3.0 GB). They leave for Arrow as they come, and every one is a row."""
    count = 2_500_000
    wrapper = compressed(EMPTY_KAFKA_MESSAGE * count, codec, framed)
    capture = write_capture(tmp_path / "bomb.pcap", [(9092, [(0, kafka_produces(wrapper, 1))])])
    decode_within_budget(capture, tmp_path / "ds")
    assert messages_of(tmp_path / "ds") == count
    assert table(tmp_path / "ds", "anomalies") == []


@pytest.mark.slow
def test_kafka_wrappers_nested_three_deep_stay_within_budget(tmp_path, write_capture):
    """gzip in snappy in gzip, 2 million empty messages: the nesting is walked one message
    at a time like a single level, and every message is a row with its wrapper's count."""
    inner = compressed(EMPTY_KAFKA_MESSAGE * 200_000, GZIP)
    middle = compressed(inner * 10, SNAPPY, framed=True)
    outer = compressed(middle, GZIP)
    capture = write_capture(tmp_path / "bomb.pcap", [(9092, [(0, kafka_produces(outer, 1))])])
    decode_within_budget(capture, tmp_path / "ds")
    rows = ds.dataset(tmp_path / "ds" / "messages").to_table(columns=["batch_size", "batch_index"])
    assert rows.num_rows == 2_000_000
    assert set(rows.column("batch_size").to_pylist()) == {2_000_000}
    assert rows.column("batch_index").to_pylist()[-1] == 1_999_999


def test_a_kafka_set_expanding_to_zeros_is_a_bounded_list_of_anomalies(tmp_path, write_capture):
    """32 MiB of zeros inflate to a damaged message every 4 bytes, 8 million of them: each
    was an anomaly held as a tuple, then a row. The first 100 of a set are listed, the
    rest counted in one more."""
    wrapper = compressed(bytes(32 << 20), GZIP)
    capture = write_capture(tmp_path / "bomb.pcap", [(9092, [(0, kafka_produces(wrapper, 1))])])
    decode_within_budget(capture, tmp_path / "ds")
    details = [row["detail"] for row in table(tmp_path / "ds", "anomalies")]
    assert len(details) == 101
    assert details[-1] == f"{(32 << 20) // 4 - 100} more damaged messages in this set, not listed"


def test_a_kafka_expansion_past_the_budget_is_an_anomaly_and_the_messages_before_it_stay(
    tmp_path, write_capture
):
    """Two wrappers in one frame, 40 MB expanded each: the second passes the frame's 64 MiB
    budget and is a decompression_failed row; the first's messages are all rows."""
    wrapper = compressed(message(b"m" * 1000) * 40_000, GZIP)
    produce = request(0, produce_body("t", 0, wrapper * 2))
    capture = write_capture(tmp_path / "bomb.pcap", [(9092, [(0, produce)])])
    decode_within_budget(capture, tmp_path / "ds")
    assert messages_of(tmp_path / "ds") == 40_000 + 1  # the second: one row, no payload
    [anomaly] = table(tmp_path / "ds", "anomalies")
    assert anomaly["kind"] == "decompression_failed" and "limit" in anomaly["detail"]


def amplification_frames() -> tuple[bytes, bytes]:
    """A Kafka 0.7 connection's two streams, 16 MB, built for the most expansion per byte:
    high-ratio snappy (both framings) of 1 MiB payloads up to the frame size, gzip of
    millions of empty messages, a snappy block announcing 100 MiB, gzip in snappy in gzip
    past the budget, in a PRODUCE and in a FETCH answer, and gzip'd zeros."""
    big = message(b"s" * (1 << 20))
    empties = compressed(EMPTY_KAFKA_MESSAGE * 2_500_000, GZIP)
    nested = compressed(
        compressed(compressed(message(b"n" * (1 << 20)) * 50, GZIP) * 20, SNAPPY, framed=True),
        GZIP,
    )
    sets = [
        compressed(big * 60, SNAPPY),
        compressed(big * 60, SNAPPY, framed=True),
        compressed(big * 60, SNAPPY),
        compressed(big * 60, SNAPPY, framed=True),
        compressed(big * 100, SNAPPY),  # announces 100 MiB: refused before expanding
        empties * 3,  # 67 MB of 9-byte messages: the third passes the frame's budget
        nested,
        compressed(bytes(32 << 20), GZIP),
    ]
    c2b = b"".join(request(0, produce_body("t", 0, one)) for one in sets)
    c2b += request(FETCH, fetch_body("t", 0, 0, 1 << 20))
    return c2b, response(0, nested)


def test_a_16_mb_capture_built_to_expand_kafka_message_sets_stays_within_budget(
    tmp_path, write_capture
):
    """The issue's bomb: 16 MB of gzip and snappy sets, nested, that expand to gigabytes
    (the decode held every expanded message until its frame ended: 1.2 GB). Each frame
    expands to its budget at most, every cut is an anomaly row, and decoding goes on to
    the last frame."""
    c2b, b2c = amplification_frames()
    capture = write_capture(tmp_path / "bomb.pcap", [(9092, [(0, c2b), (1, b2c)])])
    assert capture.stat().st_size > 16_000_000
    decode_within_budget(capture, tmp_path / "ds")
    anomalies = Counter(row["kind"] for row in table(tmp_path / "ds", "anomalies"))
    # The 100 MiB block; the third wrapper of empties; in each nested set (a PRODUCE, a
    # FETCH answer) 20 wrappers of 50 MiB, of which the first fits the frame's 64 MiB.
    assert anomalies["decompression_failed"] == 1 + 1 + 2 * 19
    assert anomalies["bad_message"] == 101  # the zeros: 100 listed, one for the rest
    frames = ds.dataset(tmp_path / "ds" / "frames").to_table(columns=["command"])
    assert frames.column("command").to_pylist().count("PRODUCE") == 8


# -- many connections ---------------------------------------------------------------------

_PCAP_HEADER = struct.pack("<IHHiIII", 0xA1B2C3D4, 2, 4, 0, 0, 262144, 1)
_ETHERNET = bytes.fromhex("020000000002020000000001") + b"\x08\x00"


class _Pcap:
    """Writes TCP segments straight to a pcap file, one record each, 10 µs apart."""

    def __init__(self, path: Path) -> None:
        self.file = path.open("wb")
        self.file.write(_PCAP_HEADER)
        self.ts = 1_700_000_000_000_000

    def segment(
        self, client: int, seq: int, flags: int, payload: bytes = b"", port: int = 6650
    ) -> None:
        """A segment of client ``client`` (10.x.x.x:port) to the server 10.255.0.1:``port``."""
        src = (10 << 24 | client).to_bytes(4, "big")
        ip = struct.pack(
            ">BBHHHBBH4s4s", 0x45, 0, 40 + len(payload), 0, 0, 64, 6, 0, src, bytes([10, 255, 0, 1])
        )
        tcp = struct.pack(
            ">HHIIBBHHH", 1024 + client % 60000, port, seq, 0, 0x50, flags, 65535, 0, 0
        )
        self._record(_ETHERNET + ip + tcp + payload)

    def first_fragment(self, client: int, payload: bytes) -> None:
        """The first fragment of a datagram from client ``client`` to the server, ``payload``
        its first bytes, more fragments to follow (none ever does)."""
        src = (10 << 24 | client).to_bytes(4, "big")
        ip = struct.pack(
            ">BBHHHBBH4s4s", 0x45, 0, 20 + len(payload), client & 0xFFFF, 0x2000, 64, 6, 0,
            src, bytes([10, 255, 0, 1]),
        )  # fmt: skip
        self._record(_ETHERNET + ip + payload)

    def _record(self, packet: bytes) -> None:
        self.ts += 10
        self.file.write(
            struct.pack("<IIII", self.ts // 10**6, self.ts % 10**6, len(packet), len(packet))
        )
        self.file.write(packet)

    def close(self) -> None:
        self.file.close()


@pytest.mark.slow
def test_forty_thousand_idle_connections_evict_the_longest_idle(tmp_path):
    """Every open connection costs its decoder's state: 120,000 idle ones reached 1.4 GB.
    Past the open-connection limit the longest idle close, each with an anomaly."""
    capture = _Pcap(tmp_path / "idle.pcap")
    for client in range(40_000):
        capture.segment(client, 1000, 0x02)  # a SYN, then silence
    capture.close()
    decode_within_budget(tmp_path / "idle.pcap", tmp_path / "ds")
    connections = table(tmp_path / "ds", "connections")
    reasons = Counter(row["close_reason"] for row in connections)
    assert len(connections) == 40_000 and reasons["evicted"] > 20_000
    kinds = Counter(row["kind"] for row in table(tmp_path / "ds", "anomalies"))
    assert kinds == {"evicted": reasons["evicted"]}


@pytest.mark.slow
def test_holes_in_many_connections_hold_no_more_than_the_total_budget(tmp_path):
    """Each of 120 connections misses its first segment and sends 4 MB behind it: 480 MB
    would wait for retransmissions (500 such connections reached 2.1 GB). The connections
    holding most give their holes up as gaps, and every byte behind them is decoded."""
    capture = _Pcap(tmp_path / "holes.pcap")
    piece, offsets = 60_000, range(60_000, 4_000_000, 60_000)  # the piece at 0 never comes
    for client in range(120):
        capture.segment(client, 1000, 0x02)
        for at in offsets:
            capture.segment(client, 1001 + at, 0x18, bytes(piece))
    capture.close()
    decode_within_budget(tmp_path / "holes.pcap", tmp_path / "ds")
    gaps = [row for row in table(tmp_path / "ds", "anomalies") if row["kind"] == "gap"]
    assert len(gaps) == 120 and {row["size"] for row in gaps} == {piece}
    connections = table(tmp_path / "ds", "connections")
    assert all(row["bytes_c2b"] == len(offsets) * piece for row in connections)


@pytest.mark.slow
def test_many_connections_of_unknown_content_hold_no_more_than_the_sniffing_budget(tmp_path):
    """Each of 1,600 connections on a port no protocol owns sends 200 KB that nothing
    recognises: every one waited for more, 600 MB for 1,500 of them. The ones holding
    most now decide as they are (unknown, and their not_decoded row says why)."""
    capture = _Pcap(tmp_path / "unknown.pcap")
    noise = bytes(range(1, 250)) * 5 + bytes(range(1, 204))  # 1,448 bytes, no frame
    for client in range(1600):
        capture.segment(client, 1000, 0x02, port=7777)
        for at in range(0, 200_000, len(noise)):
            capture.segment(client, 1001 + at, 0x18, noise, port=7777)
    capture.close()
    decode_within_budget(tmp_path / "unknown.pcap", tmp_path / "ds")
    details = [row["detail"] for row in table(tmp_path / "ds", "anomalies")]
    assert len(details) == 1600
    assert sum("recognition stopped early" in detail for detail in details) > 1000


@pytest.mark.slow
def test_incomplete_frames_in_many_connections_hold_no_more_than_their_budget(tmp_path):
    """Each of 60 connections sends 4.9 MB of a 5 MB SEND that never ends: every byte
    waited for the rest of its frame, 470 MB. The streams holding most give their frames
    up past the budget shared by every connection of the capture."""
    head = command("SEND", producer_id=1, sequence_id=0, num_messages=1).SerializeToString()
    first = struct.pack(">II", 5_000_000, len(head)) + head
    body = bytes(range(256)) * 5 + bytes(168)  # 1,448 bytes
    capture = _Pcap(tmp_path / "frames.pcap")
    for client in range(60):
        capture.segment(client, 1000, 0x02)
        capture.segment(client, 1001, 0x18, first)
        for at in range(len(first), 4_900_000, len(body)):
            capture.segment(client, 1001 + at, 0x18, body)
    capture.close()
    decode_within_budget(tmp_path / "frames.pcap", tmp_path / "ds")
    details = [row["detail"] for row in table(tmp_path / "ds", "anomalies")]
    assert len(details) == 60  # one truncated_frame each
    assert sum("given up" in detail for detail in details) > 30


@pytest.mark.slow
def test_fragments_of_datagrams_never_completed_hold_no_more_than_their_bound(tmp_path):
    """900,000 hosts each send the first 8 bytes of a datagram and never the rest (52 MB
    of records): every one waiting for its datagram's other fragments reached 970 MB.
    The oldest give their places up; each is an incomplete datagram, counted once."""
    capture = _Pcap(tmp_path / "fragments.pcap")
    for client in range(900_000):
        capture.first_fragment(client, bytes(8))
    capture.close()
    decode_within_budget(tmp_path / "fragments.pcap", tmp_path / "ds")
    (row,) = table(tmp_path / "ds", "anomalies")
    assert row["kind"] == "incomplete_datagram" and row["size"] == 900_000
