"""The decoder on derived captures (packets lost, duplicated, reordered, capture started
mid-connection): every frame whose bytes are all in the capture is decoded at its stream
offset, every loss shows as anomalies, nothing raises.

Expected frames come from the parent recording's broker journal (frame sizes in order give
each frame's stream offsets) and the derivation manifest (which bytes are missing). A small
in-test reader turns the capture into stream events with gaps; pwcap's own reassembly is
tested elsewhere.
"""

from __future__ import annotations

import json
import socket
from collections import defaultdict
from pathlib import Path

import dpkt
import pytest
from pwcap.capture.events import ClientBy, Connection, Direction
from pwcap.decode.api import DecodeOptions
from pwcap.decode.pulsar.decoder import PulsarDecoder

from tests.pulsar_frames import RecordingSink

SAMPLES = Path(__file__).resolve().parent.parent / "sample_pcaps"
BROKER_PORT = 6650


class _Stream:
    """One direction: delivers in order, holds one early segment, declares gaps."""

    def __init__(self, decoder: PulsarDecoder, direction: Direction, base_seq: int) -> None:
        self.decoder = decoder
        self.direction = direction
        self.base = base_seq  # sequence number of stream offset 0
        self.next = base_seq
        self.held: tuple[int, int, bytes] | None = None

    def segment(self, ts: int, seq: int, data: bytes) -> None:
        if seq < self.next:
            return  # duplicate
        if seq > self.next:
            if self.held is None:
                self.held = (ts, seq, data)
                return
            self.flush(ts)
            if seq < self.next:
                return
        self._deliver(ts, seq, data)
        if self.held is not None and self.held[1] == self.next:
            held, self.held = self.held, None
            self._deliver(*held)

    def flush(self, ts: int) -> None:
        """Give up waiting: the bytes before the held segment are lost."""
        if self.held is None:
            return
        held_ts, seq, data = self.held
        self.held = None
        self.decoder.on_gap(self.direction, ts, self.next - self.base, seq - self.next)
        self.next = seq
        self._deliver(held_ts, seq, data)

    def _deliver(self, ts: int, seq: int, data: bytes) -> None:
        self.decoder.on_data(self.direction, ts, seq - self.base, data)
        self.next = seq + len(data)


def decode_lossy(path: Path) -> RecordingSink:
    sink = RecordingSink()
    streams: dict[tuple, _Stream] = {}
    decoders: dict[frozenset, PulsarDecoder] = {}
    syn_seen: dict[tuple, int] = {}
    reader_class = dpkt.pcapng.Reader if path.suffix == ".pcapng" else dpkt.pcap.Reader
    with path.open("rb") as handle:
        for ts, buf in reader_class(handle):
            ip = dpkt.ethernet.Ethernet(buf).data
            if not isinstance(ip, dpkt.ip.IP) or not isinstance(ip.data, dpkt.tcp.TCP):
                continue
            tcp = ip.data
            src = (socket.inet_ntoa(ip.src), tcp.sport)
            dst = (socket.inet_ntoa(ip.dst), tcp.dport)
            micros = round(ts * 1_000_000)
            if tcp.flags & dpkt.tcp.TH_SYN:
                syn_seen[src] = tcp.seq + 1
                continue
            if not tcp.data:
                continue
            key = frozenset((src, dst))
            if key not in decoders:
                client, server = (dst, src) if src[1] == BROKER_PORT else (src, dst)
                client_by = ClientBy.SYN if client in syn_seen else ClientBy.PORT
                conn = Connection(len(decoders) + 1, *client, *server, micros, client_by)
                decoders[key] = PulsarDecoder(conn, sink, DecodeOptions(capture=path.name))
            if src not in streams:
                direction = Direction.B2C if src[1] == BROKER_PORT else Direction.C2B
                streams[src] = _Stream(decoders[key], direction, syn_seen.get(src, tcp.seq))
            streams[src].segment(micros, tcp.seq, tcp.data)
    for stream in streams.values():
        stream.flush(0)
    for decoder in decoders.values():
        decoder.on_close(0)
    return sink


def journal_frames(parent: str) -> dict[str, list[tuple[int, int, str]]]:
    """(start, end, command) of every frame, per direction, from the broker journal."""
    frames: dict[str, list[tuple[int, int, str]]] = defaultdict(list)
    offsets: dict[str, int] = defaultdict(int)
    for line in (SAMPLES / f"{parent}.broker.jsonl").open():
        entry = json.loads(line)
        start = offsets[entry["dir"]]
        offsets[entry["dir"]] = start + entry["frame_size"]
        frames[entry["dir"]].append((start, start + entry["frame_size"], entry["cmd"]))
    return frames


def load(name: str) -> tuple[dict, RecordingSink, dict]:
    truth_file = SAMPLES / f"{name}.truth.json"
    if not truth_file.exists():
        pytest.skip(f"{name} not in the sample corpus")
    truth = json.loads(truth_file.read_text())
    capture = next(SAMPLES.glob(f"{name}.pcap*"))
    return truth, decode_lossy(capture), journal_frames(truth["derived_from"])


def decoded(sink: RecordingSink) -> set[tuple[str, int, str]]:
    return {(r["direction"], r["stream_offset"], r["command"]) for r in sink.frames}


@pytest.mark.parametrize("kind", ["duplicated", "reordered", "pcapng"])
def test_no_loss_means_every_frame(kind):
    _, sink, frames = load(f"pulsar_derived_{kind}")
    expected = {(d, start, cmd) for d, rows in frames.items() for start, _, cmd in rows}
    assert decoded(sink) == expected
    assert sink.anomalies == []


def test_lost_packets_cost_only_the_frames_they_touch():
    truth, sink, frames = load("pulsar_derived_lost")
    missing = truth["manifest"]["missing"]
    assert missing

    def intact(direction: str, start: int, end: int) -> bool:
        return all(
            m["direction"] != direction or end <= m["offset"] or start >= m["offset"] + m["length"]
            for m in missing
        )

    expected = {
        (d, start, cmd)
        for d, rows in frames.items()
        for start, end, cmd in rows
        if intact(d, start, end)
    }
    assert decoded(sink) == expected
    # A loss that cuts a frame is the decoder's to report; a loss of whole frames shows
    # only as the gap itself (reported by the pipeline, not by the protocol decoder).
    boundaries = {(d, offset) for d, rows in frames.items() for row in rows for offset in row[:2]}
    cutting = [
        m
        for m in missing
        if (m["direction"], m["offset"]) not in boundaries
        or (m["direction"], m["offset"] + m["length"]) not in boundaries
    ]
    assert len(sink.anomalies) >= len(cutting)
    # Receipts of lost SENDs are not blamed: their requests were in the gap.
    assert {a["kind"] for a in sink.anomalies} <= {"truncated_frame", "resync"}


def test_capture_starting_mid_connection():
    truth, sink, frames = load("pulsar_derived_midstream")
    first = {
        key.rsplit(":", 1)[1]: offset
        for key, offset in truth["manifest"]["first_captured_offset"].items()
    }
    expected = {
        (d, start - first[d], cmd)
        for d, rows in frames.items()
        for start, _, cmd in rows
        if start >= first[d]
    }
    assert decoded(sink) == expected
    # Requests whose responses fall inside the capture were sent before it: no blame.
    assert "unmatched_response" not in sink.kinds()
    assert set(sink.kinds()) <= {"resync"}
