"""pwcap.capture rebuilds every sample capture's TCP streams faithfully.

Real captures are checked against two independent witnesses: the broker's journal (the
size of every frame it read and wrote, per connection and direction, in order) and a
dpkt-based reassembly of the same file (``tests/corpus/streams.py``). Derived captures are
checked against the streams of the capture they were derived from, using the manifest
that says which bytes were removed, repeated or never captured.
"""

from __future__ import annotations

import json
import struct
from collections import Counter, defaultdict
from functools import cache
from pathlib import Path

import dpkt
import pytest

from fuzz.pcapfile import Capture, read_pcap, tcp_segment, write_pcap
from fuzz.stream_sink import RecordingSink
from pwcap.capture import ClientBy, Direction, read_streams
from tests.conftest import SAMPLES, sample_captures
from tests.corpus.streams import read_packets, reassemble
from tests.corpus.truth import clean_recording


def _journal_path(capture: Path) -> Path:
    return capture.with_name(capture.stem + ".broker.jsonl")


def _truth(capture: Path) -> dict:
    return json.loads(capture.with_name(capture.stem + ".truth.json").read_text())


# TLS samples carry the journal's frames encrypted: tests/test_tls_samples.py checks them.
TLS = [p for p in sample_captures() if "tls" in _truth(p)]
REAL = [
    p
    for p in sample_captures()
    if _journal_path(p).exists()
    and "snaplen" not in p.name
    and p not in TLS
    and clean_recording(_truth(p))
]
# Captures in which a client was killed while it wrote (tests/corpus/scenarios.py
# ``kills_a_client``): the journal holds answers the wire never carried to it.
KILLED = [
    p for p in sample_captures() if _journal_path(p).exists() and not clean_recording(_truth(p))
]
# Captures of the real Pulsar broker (tests/realbroker): it keeps no journal, so their
# witnesses are dpkt's reassembly and the frames per connection the truth read with it.
REAL_BROKER = [p for p in sample_captures() if p.name.startswith("realpulsar_")]
DERIVED = [p for p in sample_captures() if "derived_from" in _truth(p) and p not in TLS]
SNAPLEN = [p for p in sample_captures() if "snaplen" in p.name]
OVERLAY = [p for p in sample_captures() if p.name.startswith("overlay_")]  # test_overlay_samples


@cache
def streams_of(capture: Path) -> RecordingSink:
    """The capture read once through pwcap.capture (the sink checks offsets as it records)."""
    sink = RecordingSink()
    read_streams(capture, sink)
    return sink


def journal(capture: Path) -> list[dict]:
    return [json.loads(line) for line in _journal_path(capture).read_text().splitlines()]


def journal_frames(capture: Path) -> dict[tuple[str, str], list[int]]:
    """Frame sizes (4-byte length prefix included) per (sender, receiver), in order."""
    frames: dict[tuple[str, str], list[int]] = {}
    for row in journal(capture):
        if row["dir"] not in ("c2b", "b2c"):
            continue  # Kafka 0.7 journals also note when the broker closed a connection
        client, broker = row["client"], row["broker"]
        sender = (client, broker) if row["dir"] == "c2b" else (broker, client)
        size = row["frame_size"] if "frame_size" in row else row["size"]  # Pulsar / Kafka 0.7
        frames.setdefault(sender, []).append(size)
    return frames


def frame_sizes(stream: bytes) -> list[int]:
    """Walk a stream of frames that each start with a 4-byte big-endian length of the rest
    (Pulsar's totalSize, Kafka 0.7's request and response size)."""
    sizes = []
    offset = 0
    while offset < len(stream):
        (rest,) = struct.unpack_from(">I", stream, offset)
        sizes.append(4 + rest)
        offset += 4 + rest
    assert offset == len(stream), "the last frame runs past the end of the stream"
    return sizes


def _ids(paths: list[Path]) -> list[str]:
    return [p.name for p in paths]


def test_every_sample_is_checked_once() -> None:
    checked = REAL + KILLED + REAL_BROKER + DERIVED + SNAPLEN + TLS + OVERLAY
    assert sorted(checked) == sample_captures()
    kinds = {_truth(p)["manifest"]["kind"] for p in DERIVED}
    assert kinds == {"lost", "duplicated", "reordered", "midstream", "pcapng"}


# -- real captures ------------------------------------------------------------------------


@pytest.mark.parametrize("capture", REAL, ids=_ids(REAL))
def test_real_capture_streams_match_dpkt_and_the_broker_journal(capture: Path) -> None:
    sink = streams_of(capture)
    journal = journal_frames(capture)
    witness = reassemble(capture)
    delivered = sink.directed_streams()

    assert set(delivered) == set(witness)
    assert {sender for sender, sizes in journal.items() if sum(sizes)} == set(delivered)
    for sender, stream in delivered.items():
        assert not stream.gaps, f"{sender}: gaps in a clean capture"
        assert stream.data == witness[sender], f"{sender}: bytes differ from dpkt's"
        assert frame_sizes(stream.data) == journal[sender], f"{sender}: frames differ"


@pytest.mark.parametrize("capture", REAL_BROKER, ids=_ids(REAL_BROKER))
def test_real_broker_capture_streams_match_dpkt_and_the_frames_counted(capture: Path) -> None:
    delivered = streams_of(capture).directed_streams()
    witness = reassemble(capture)
    counted = {}
    for row in _truth(capture)["connections"]:
        counted[(row["client"], row["broker"])] = row.get("frames_c2b", 0)
        counted[(row["broker"], row["client"])] = row.get("frames_b2c", 0)

    assert set(delivered) == set(witness)
    for sender, stream in delivered.items():
        assert not stream.gaps, f"{sender}: gaps in a clean capture"
        assert stream.data == witness[sender], f"{sender}: bytes differ from dpkt's"
        assert len(frame_sizes(stream.data)) == counted[sender], f"{sender}: frames differ"


@pytest.mark.parametrize("capture", REAL, ids=_ids(REAL))
def test_real_capture_connections_are_the_journals(capture: Path) -> None:
    sink = streams_of(capture)
    pairs = {(row["client"], row["broker"]) for row in journal(capture)}

    assert set(sink.by_endpoints()) == pairs
    for recorded in sink.connections.values():
        assert recorded.close_reason == "fin"
        assert recorded.conn.client_by is ClientBy.SYN
        assert recorded.conn.gaps == 0


@pytest.mark.parametrize("capture", KILLED, ids=_ids(KILLED))
def test_a_killed_clients_connection_ends_reset_with_dpkts_bytes(capture: Path) -> None:
    sink = streams_of(capture)
    witness = reassemble(capture)
    delivered = sink.directed_streams()

    assert set(delivered) == set(witness)
    for sender, stream in delivered.items():
        assert not stream.gaps, f"{sender}: gaps in a capture that lost nothing"
        assert stream.data == witness[sender], f"{sender}: bytes differ from dpkt's"
    assert set(sink.by_endpoints()) == {(row["client"], row["broker"]) for row in journal(capture)}
    ends = Counter(recorded.close_reason for recorded in sink.connections.values())
    assert ends == {"fin": len(sink.connections) - 1, "rst": 1}


def _first_carriers(capture: Path) -> dict[tuple[str, str], list[tuple[int, int]]]:
    """Per direction, in stream order, each run of bytes with the time of the first packet
    that carried it: a retransmission carries only the bytes no packet carried before."""
    isn: dict[tuple[str, str], int] = {}
    runs: dict[tuple[str, str], list[list[int]]] = defaultdict(list)
    covered: dict[tuple[str, str], bytearray] = defaultdict(bytearray)
    for packet in read_packets(capture):
        key = (packet.src, packet.dst)
        if packet.flags & dpkt.tcp.TH_SYN:
            isn[key] = packet.seq
            continue
        if not packet.payload or key not in isn:
            continue
        start = (packet.seq - isn[key] - 1) % 2**32
        seen = covered[key]
        seen.extend(bytes(max(0, start + len(packet.payload) - len(seen))))
        ts = round(packet.ts * 1_000_000)
        run: list[int] | None = None  # [first byte, bytes, time]
        for at in range(start, start + len(packet.payload)):
            if seen[at]:
                run = None
                continue
            seen[at] = 1
            if run is None:
                run = [at, 0, ts]
                runs[key].append(run)
            run[1] += 1
    return {key: [(run[2], run[1]) for run in sorted(found)] for key, found in runs.items()}


@pytest.mark.parametrize("capture", REAL, ids=_ids(REAL))
def test_real_capture_bytes_carry_the_timestamp_of_the_packet_that_carried_them(
    capture: Path,
) -> None:
    carried = _first_carriers(capture)
    delivered = streams_of(capture).directed_streams()

    assert set(delivered) == set(carried)
    for sender, stream in delivered.items():
        assert [(ts, size) for _, size, ts in stream.timestamps] == carried[sender]


REARRANGED = {
    "every_record_twice": lambda n: [i for i in range(n) for _ in range(2)],
    "neighbours_swapped": lambda n: [j for i in range(0, n, 2) for j in (i + 1, i) if j < n],
}


@pytest.mark.parametrize("how", list(REARRANGED))
@pytest.mark.parametrize("capture", REAL, ids=_ids(REAL))
def test_real_capture_with_records_repeated_or_swapped_gives_the_same_streams(
    tmp_path: Path, capture: Path, how: str
) -> None:
    """Our own derived variants of every recording: each record captured twice, or each
    pair of neighbouring records in reverse order (SYN-ACK before SYN, FIN before the last
    data), as a multi-queue NIC or a merged capture shows them."""
    original = read_pcap(capture)
    order = REARRANGED[how](len(original.records))
    path = tmp_path / capture.name
    write_pcap(
        path, Capture(original.linktype, original.snaplen, [original.records[i] for i in order])
    )
    sink = RecordingSink()
    read_streams(path, sink)

    expected = {sender: s.data for sender, s in streams_of(capture).directed_streams().items()}
    assert {sender: s.data for sender, s in sink.directed_streams().items()} == expected
    assert not any(s.gaps for s in sink.directed_streams().values())
    assert {r.close_reason for r in sink.connections.values()} == {"fin"}


# -- derived captures ---------------------------------------------------------------------


def _original(capture: Path) -> RecordingSink:
    return streams_of(SAMPLES / f"{_truth(capture)['derived_from']}.pcap")


def _of_kind(kind: str) -> list[Path]:
    return [p for p in DERIVED if _truth(p)["manifest"]["kind"] == kind]


def missing_ranges(capture: Path) -> dict[tuple[str, str, Direction], list[tuple[int, int]]]:
    """The manifest's removed byte ranges (offset, length) per (client, server, direction)."""
    ranges: dict[tuple[str, str, Direction], list[tuple[int, int]]] = {}
    for entry in _truth(capture)["manifest"]["missing"]:
        direction = Direction.C2B if entry["direction"] == "c2b" else Direction.B2C
        key = (entry["client"], entry["server"], direction)
        ranges.setdefault(key, []).append((entry["offset"], entry["length"]))
    return {key: sorted(spans) for key, spans in ranges.items()}


LOST = _of_kind("lost")


@pytest.mark.parametrize("capture", LOST, ids=_ids(LOST))
def test_lost_segments_become_gaps_exactly_where_bytes_were_removed(capture: Path) -> None:
    missing = missing_ranges(capture)
    original = _original(capture).by_endpoints()
    derived = streams_of(capture).by_endpoints()

    assert set(derived) == set(original)
    for (client, server), recorded in derived.items():
        for direction in Direction:
            stream = recorded.stream(direction)
            whole = original[client, server].stream(direction).data
            expected = missing.get((client, server, direction), [])
            assert [(gap.offset, gap.size) for gap in stream.gaps] == expected
            holed = bytearray(whole)
            for offset, size in expected:
                holed[offset : offset + size] = b"\xff" * size
            assert stream.filled(0xFF) == bytes(holed)
        assert recorded.close_reason == "fin"


SAME_BYTES = _of_kind("duplicated") + _of_kind("reordered") + _of_kind("pcapng")


@pytest.mark.parametrize("capture", SAME_BYTES, ids=_ids(SAME_BYTES))
def test_duplicated_reordered_and_pcapng_captures_give_the_original_streams(
    capture: Path,
) -> None:
    original = _original(capture).directed_streams()
    derived = streams_of(capture).directed_streams()

    assert set(derived) == set(original)
    for sender, stream in derived.items():
        assert not stream.gaps
        assert stream.data == original[sender].data
    assert {r.close_reason for r in streams_of(capture).connections.values()} == {"fin"}


MIDSTREAM = _of_kind("midstream")


@pytest.mark.parametrize("capture", MIDSTREAM, ids=_ids(MIDSTREAM))
def test_midstream_capture_gives_the_original_streams_from_the_first_captured_byte(
    capture: Path,
) -> None:
    first = _truth(capture)["manifest"]["first_captured_offset"]
    original = _original(capture).by_endpoints()
    derived = streams_of(capture).by_endpoints()

    assert set(derived) == set(original)  # no handshake, yet the broker's port is the server
    for (client, server), recorded in derived.items():
        assert recorded.conn.client_by is ClientBy.GUESS  # no SYN, no known port: lower port
        for direction in Direction:
            start = first[f"{client}>{server}:{direction.label}"]
            stream = recorded.stream(direction)
            assert not stream.gaps
            assert stream.data == original[client, server].stream(direction).data[start:]


@pytest.mark.parametrize("capture", MIDSTREAM, ids=_ids(MIDSTREAM))
def test_midstream_capture_with_the_server_port_given_names_the_client_by_port(
    capture: Path,
) -> None:
    guessed = streams_of(capture).directed_streams()
    ports = {int(c["broker"].rsplit(":", 1)[1]) for c in _truth(capture)["connections"]}
    sink = RecordingSink()
    read_streams(capture, sink, server_ports=ports)

    assert {r.conn.client_by for r in sink.connections.values()} == {ClientBy.PORT}
    assert {k: v.data for k, v in sink.directed_streams().items()} == {
        k: v.data for k, v in guessed.items()
    }


# -- snaplen ------------------------------------------------------------------------------


def cut_ranges(capture: Path) -> dict[tuple[str, str], list[tuple[int, int]]]:
    """Per (sender, receiver): the stream ranges (offset, size) the snaplen cut off, read
    straight from the records' IP lengths and captured lengths."""
    isn: dict[tuple[str, str], int] = {}
    cuts: dict[tuple[str, str], list[tuple[int, int]]] = {}
    for record in read_pcap(capture).records:
        segment = tcp_segment(record)
        assert segment is not None
        key = (segment.src, segment.dst)
        if segment.syn:
            isn[key] = segment.seq
            continue
        cut = record.orig_len - len(record.data)
        if cut and segment.payload_len:
            end = (segment.seq - isn[key] - 1) % 2**32 + segment.payload_len
            cuts.setdefault(key, []).append((end - cut, cut))
    return cuts


@pytest.mark.parametrize("capture", SNAPLEN, ids=_ids(SNAPLEN))
def test_snaplen_cuts_become_gaps_where_the_packets_were_cut(capture: Path) -> None:
    journal = journal_frames(capture)
    cuts = cut_ranges(capture)
    delivered = streams_of(capture).directed_streams()

    assert cuts, "the sample should contain truncated packets"
    assert set(delivered) == set(journal)
    for sender, stream in delivered.items():
        assert len(stream.data) + stream.gap_bytes == sum(journal[sender])
        assert [(g.offset, g.size) for g in stream.gaps] == sorted(cuts.get(sender, []))
