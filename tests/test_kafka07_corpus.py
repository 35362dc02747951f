"""The Kafka 0.7 sample corpus stays honest: captures, journals, truth and clients agree."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from fuzz.pcapfile import read_pcap
from tests.corpus import derive
from tests.corpus.streams import reassemble
from tests.kafka07.messages import read_message_set
from tests.kafka07.protocol import parse_request
from tests.kafka07.scenarios import DERIVED_FROM, SCENARIOS
from tests.kafka07.truth import build_truth, pair_responses
from tests.kafka07.wire_frames import journal_streams, split_frames

SAMPLES = Path(__file__).resolve().parents[1] / "sample_pcaps"
CAPTURED = [scenario.name for scenario in SCENARIOS]
DERIVED = sorted(
    p.name.removesuffix(".truth.json") for p in SAMPLES.glob("kafka07_derived_*.truth.json")
)
MAX_CAPTURE_BYTES = 200 * 1024


def truth_of(name: str) -> dict:
    return json.loads((SAMPLES / f"{name}.truth.json").read_text())


def journal_of(name: str) -> list[dict]:
    path = SAMPLES / f"{name}.broker.jsonl"
    return [json.loads(line) for line in path.read_text().splitlines() if line]


def test_every_scenario_and_both_derived_variants_are_in_the_corpus() -> None:
    assert DERIVED == ["kafka07_derived_lost", "kafka07_derived_midstream"]
    for name in CAPTURED:
        assert (SAMPLES / f"{name}.pcap").exists(), name


@pytest.mark.parametrize("name", CAPTURED + DERIVED)
def test_captures_read_as_small_clean_captures(name: str) -> None:
    truth = truth_of(name)
    path = SAMPLES / truth["capture"]["file"]
    assert path.stat().st_size < MAX_CAPTURE_BYTES
    assert len(read_pcap(path).records) == truth["capture"]["packets"]
    assert truth["capture"]["dropped_by_kernel"] == 0


@pytest.mark.parametrize("name", CAPTURED)
def test_truth_is_what_the_journal_says(name: str) -> None:
    truth = truth_of(name)
    rebuilt = build_truth(
        name,
        truth["description"],
        truth["client"],
        journal_of(name),
        truth["client_events"],
        truth["capture"],
    )
    assert rebuilt == truth


@pytest.mark.parametrize("name", CAPTURED)
def test_capture_carries_exactly_the_journal_frames(name: str) -> None:
    """Reassembled, each stream holds the journal's requests / responses, byte for byte."""
    streams = reassemble(SAMPLES / f"{name}.pcap")
    expected = journal_streams(journal_of(name))
    assert set(streams) == set(expected)
    for key, rows in expected.items():
        frames = split_frames(streams[key])
        assert sum(frame.size for frame in frames) == len(streams[key])
        assert [frame.size for frame in frames] == [row["size"] for row in rows]
        if rows[0]["dir"] == "c2b":
            assert [parse_request(frame.body).name for frame in frames] == [r["type"] for r in rows]


@pytest.mark.parametrize("name", CAPTURED)
def test_fetched_messages_in_the_capture_are_the_ones_the_journal_lists(name: str) -> None:
    streams = reassemble(SAMPLES / f"{name}.pcap")
    journal = journal_of(name)
    by_row = {}
    for key, rows in journal_streams(journal).items():
        by_row.update(
            {id(row): frame for row, frame in zip(rows, split_frames(streams[key]), strict=True)}
        )
    for request, _, response in pair_responses(journal):
        if response is None or request["type"] not in ("FETCH", "MULTIFETCH"):
            continue
        body = by_row[id(response)].body[2:]  # after the response's own error code
        if request["type"] == "MULTIFETCH":
            sets = [frame.body[2:] for frame in split_frames(body)]
        else:
            sets = [body]
        for asked, answered, data in zip(request["parts"], response["parts"], sets, strict=True):
            walked = read_message_set(data, asked["offset"])
            assert [m.as_json() for m in walked.messages] == answered["messages"]
            assert walked.truncated_tail == answered["truncated_tail"]


@pytest.mark.parametrize("name", CAPTURED)
def test_the_client_sent_what_the_broker_stored(name: str) -> None:
    """In order per place when the client chose the partition; as a multiset when its
    application API did (``write`` events carry no partition)."""
    truth = truth_of(name)
    events = truth["client_events"]
    produced = truth["produced"]
    sent = [
        (event["topic"], event["partition"], message["sha256"])
        for event in events
        if event["event"] == "produce"
        for message in event["messages"]
    ]
    written = sorted((e["topic"], e["sha256"]) for e in events if e["event"] == "write")
    if written:
        assert written == sorted((m["topic"], m["sha256"]) for m in produced)
    else:
        assert sent == [(m["topic"], m["partition"], m["sha256"]) for m in produced]


def test_the_stream_consumer_got_every_message_written_once() -> None:
    events = truth_of("kafka07_stream")["client_events"]
    written = sorted(e["sha256"] for e in events if e["event"] == "write")
    delivered = sorted(e["sha256"] for e in events if e["event"] == "data")
    assert delivered == written
    assert not [e for e in events if e["event"] == "error"]


@pytest.mark.parametrize("name", CAPTURED)
def test_the_client_got_the_messages_the_broker_returned(name: str) -> None:
    """Each fetch the client reports matches the next journalled part for that place."""
    truth = truth_of(name)
    parts = list(truth["fetch_parts"])
    for event in (e for e in truth["client_events"] if e["event"] == "fetch"):
        place = (event["topic"], event["partition"], event["offset"])
        index = next(
            i
            for i, part in enumerate(parts)
            if (part["topic"], part["partition"], part["offset"]) == place
        )
        part = parts.pop(index)
        returned = [
            m["sha256"]
            for m in truth["fetched"]
            if (m["conn"], m["request_seq"], m["part"])
            == (part["conn"], part["request_seq"], part["part"])
        ]
        got = [message["sha256"] for message in event["messages"]]
        assert got == (returned if event["error"] is None else []), place
        if part["error"]:
            assert event["error"] is not None


def test_the_scenarios_cover_what_0_7_traffic_holds() -> None:
    truths = [truth_of(name) for name in CAPTURED]
    requests = {t for truth in truths for t in truth["frames"]["c2b"]}
    assert requests == {"PRODUCE", "FETCH", "MULTIFETCH", "MULTIPRODUCE", "OFFSETS"}
    compressions = {c for truth in truths for c in truth["summary"]["fetched_by_compression"]}
    assert compressions == {"NONE", "GZIP", "SNAPPY"}
    errors = {e for truth in truths for e in truth["summary"]["fetch_errors"]}
    assert {"OffsetOutOfRange", "WrongPartition"} <= errors
    assert {m for truth in truths for m in truth["summary"]["fetched_by_magic"]} == {"0", "1"}
    assert sum(truth["summary"]["truncated_tails"] for truth in truths) > 0
    assert {truth["capture"]["port"] for truth in truths} > {9092}
    times = {o["time"] for truth in truths for o in truth["offsets"]}
    assert {-1, -2} <= times


@pytest.mark.parametrize("name", DERIVED)
def test_derived_capture_is_its_source_in_the_recorded_order(name: str) -> None:
    truth = truth_of(name)
    assert truth["derived_from"] == DERIVED_FROM
    original = read_pcap(SAMPLES / f"{DERIVED_FROM}.pcap")
    derived = read_pcap(SAMPLES / truth["capture"]["file"])
    expected = derive.apply_order(original, truth["manifest"]["order"])
    assert [r.data for r in derived.records] == [r.data for r in expected.records]


def test_lost_capture_misses_exactly_the_recorded_bytes() -> None:
    manifest = truth_of("kafka07_derived_lost")["manifest"]
    original = read_pcap(SAMPLES / f"{DERIVED_FROM}.pcap")
    packets = {p.index: p for p in derive.data_packets(original)}
    kept = set(manifest["order"])
    assert len(manifest["missing"]) == 3
    for missing in manifest["missing"]:
        assert missing["packet"] not in kept
        packet = packets[missing["packet"]]
        assert (packet.direction, packet.offset, packet.length) == (
            missing["direction"],
            missing["offset"],
            missing["length"],
        )
    assert len(manifest["damaged_frames"]) >= len(manifest["missing"])


def test_midstream_capture_starts_where_recorded_and_names_the_frames_it_cuts() -> None:
    manifest = truth_of("kafka07_derived_midstream")["manifest"]
    original = read_pcap(SAMPLES / f"{DERIVED_FROM}.pcap")
    first = manifest["order"][0]
    assert manifest["order"] == list(range(first, len(original.records)))
    seen = [p for p in derive.data_packets(original) if p.index >= first]
    for key, offset in manifest["first_captured_offset"].items():
        direction = key.rsplit(":", 1)[1]
        assert min(p.offset for p in seen if p.direction == direction) == offset
    assert {frame["dir"] for frame in manifest["damaged_frames"]} == {"c2b", "b2c"}
