"""The decoder on derived captures (packets lost, duplicated, reordered, capture started
mid-connection): every frame whose bytes are all in the capture is decoded at its stream
offset, every loss shows as anomalies, nothing raises.

Expected frames come from the parent recording's broker journal (frame sizes in order give
each frame's stream offsets) and the derivation manifest (which bytes are missing).
"""

from __future__ import annotations

import json
from collections import defaultdict
from pathlib import Path

import pytest

from pwcap.capture import read_streams
from pwcap.decode.api import DecodeOptions
from tests.pulsar_frames import DecodingStreams, RecordingSink

SAMPLES = Path(__file__).resolve().parent.parent / "sample_pcaps"
BROKER_PORT = 6650


def decode_lossy(path: Path) -> RecordingSink:
    streams = DecodingStreams(DecodeOptions(capture=path.name))
    read_streams(path, streams, server_ports={6650})
    return streams.sink


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
    # only as the gap itself (reported by the dispatcher, not by the protocol decoder).
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
