"""The sample corpus stays honest: captures, truth files and broker journals agree.

Nothing here regenerates captures; see test_corpus_regenerate.py for the end-to-end run.
"""

from __future__ import annotations

import json
from collections import Counter, defaultdict
from pathlib import Path

import pytest

from fuzz.pcapfile import read_pcap
from tests.corpus import derive
from tests.corpus.streams import (
    captured_commands,
    journal_commands,
    open_capture,
    read_packets,
    reassemble,
)
from tests.corpus.truth import clean_recording, read_journal

SAMPLES = Path(__file__).resolve().parents[1] / "sample_pcaps"
TRUTHS = {
    p.name.removesuffix(".truth.json"): p for p in sorted(SAMPLES.glob("pulsar_*.truth.json"))
}
LIVE = [n for n in TRUTHS if "derived" not in n]
DERIVED = [n for n in TRUTHS if "derived" in n]
# Live captures whose packets carry every byte (snaplen truncation cuts payloads), no
# client killed in the middle of a frame.
COMPLETE = [
    n for n in LIVE if "snaplen" not in n and clean_recording(json.loads(TRUTHS[n].read_text()))
]


def truth_of(name: str) -> dict:
    return json.loads(TRUTHS[name].read_text())


def journal_of(name: str) -> list[dict]:
    return read_journal(SAMPLES / f"{truth_of(name).get('derived_from', name)}.broker.jsonl")


def capture_path(name: str) -> Path:
    return SAMPLES / truth_of(name)["capture"]["file"]


def test_the_corpus_has_every_required_scenario() -> None:
    wanted = {
        "pulsar_plain",
        "pulsar_batching_compression",
        "pulsar_slow_consumer",
        "pulsar_redelivery_nack",
        "pulsar_redelivery_ack_timeout",
        "pulsar_shared_two_consumers",
        "pulsar_chunked",
        "pulsar_entry_metadata",
        "pulsar_seek_unsubscribe",
        "pulsar_derived_lost",
        "pulsar_derived_reordered",
        "pulsar_derived_duplicated",
        "pulsar_derived_midstream",
        "pulsar_derived_pcapng",
        "pulsar_linux_sll",
        "pulsar_snaplen96",
    }
    assert wanted <= set(TRUTHS)
    assert any(name.startswith("pulsar_partitioned") for name in TRUTHS)


def test_the_corpus_fits_its_size_budget() -> None:
    files = [p for p in SAMPLES.iterdir() if p.is_file()]
    assert all(p.stat().st_size < 1_000_000 for p in files if p.suffix in {".pcap", ".pcapng"})
    assert sum(p.stat().st_size for p in files) < 10_000_000


@pytest.mark.parametrize("name", list(TRUTHS))
def test_capture_reads_as_a_capture_with_the_recorded_packet_count(name: str) -> None:
    truth = truth_of(name)
    assert sum(1 for _ in open_capture(capture_path(name))) == truth["capture"]["packets"]
    assert truth["capture"]["dropped_by_kernel"] == 0


@pytest.mark.parametrize("name", LIVE)
def test_truth_frame_counts_agree_with_the_journal(name: str) -> None:
    journal = journal_of(name)
    counted: dict[str, Counter[str]] = {"c2b": Counter(), "b2c": Counter()}
    for row in journal:
        counted[row["dir"]][row["cmd"]] += 1
    truth = truth_of(name)
    assert truth["frames"] == {d: dict(c) for d, c in counted.items()}
    assert truth["frames_total"] == len(journal)


@pytest.mark.parametrize("name", COMPLETE)
def test_capture_carries_exactly_the_journal_frames(name: str) -> None:
    """Reassembled from the packets, each stream holds the journal's frames in order."""
    assert captured_commands(capture_path(name)) == journal_commands(journal_of(name))


@pytest.mark.parametrize("name", LIVE)
def test_every_sent_message_crossed_the_wire_once(name: str) -> None:
    sends: dict[str, set[int]] = defaultdict(set)
    for row in journal_of(name):
        if row["cmd"] == "SEND":
            first = row["meta_sequence_id"]
            sends[row["meta_producer_name"]].update(range(first, first + row["meta_num_messages"]))
    truth = truth_of(name)
    assert truth["sent"]
    for message in truth["sent"]:
        assert message["sequence_id"] in sends[message["producer_name"]]


@pytest.mark.parametrize("name", LIVE)
def test_every_received_message_was_dispatched_with_its_redelivery_count(name: str) -> None:
    dispatched = set()
    for row in journal_of(name):
        if row["cmd"] == "MESSAGE":
            ledger, entry = row["message_ids"][0][:2]
            dispatched.add((ledger, entry, row.get("redelivery_count", 0)))
    for message in truth_of(name)["received"]:
        ledger, entry = message["message_id"][:2]
        assert (ledger, entry, message["redelivery_count"]) in dispatched


@pytest.mark.parametrize("name", LIVE)
def test_broker_never_dispatched_beyond_granted_permits(name: str) -> None:
    balance: Counter[tuple[int, int]] = Counter()
    for row in journal_of(name):
        key = (row["conn"], row.get("consumer_id", -1))
        if row["cmd"] == "FLOW":
            balance[key] += row["permits"]
        elif row["cmd"] == "MESSAGE":
            balance[key] -= row.get("meta_num_messages", 1)
            assert balance[key] >= 0, row


@pytest.mark.parametrize("name", LIVE)
def test_no_delivery_happens_inside_a_zero_permit_interval(name: str) -> None:
    intervals = truth_of(name)["zero_permit_intervals"]
    for row in journal_of(name):
        if row["cmd"] != "MESSAGE":
            continue
        for interval in intervals:
            if (interval["conn"], interval["consumer_id"]) != (row["conn"], row["consumer_id"]):
                continue
            end = interval["end_us"] if interval["end_us"] is not None else float("inf")
            assert not interval["start_us"] < row["t_us"] < end, (interval, row)


def test_slow_consumer_was_starved_and_redelivery_scenarios_redelivered() -> None:
    slow = truth_of("pulsar_slow_consumer")
    assert len([i for i in slow["zero_permit_intervals"] if i["end_us"] is not None]) >= 5
    assert set(slow["frames"]["b2c"]) >= {"PING"} and "PONG" in slow["frames"]["c2b"]
    for name in ("pulsar_redelivery_nack", "pulsar_redelivery_ack_timeout"):
        truth = truth_of(name)
        assert truth["frames"]["c2b"]["REDELIVER_UNACKNOWLEDGED_MESSAGES"] >= 1
        assert any(m["redelivery_count"] > 0 for m in truth["received"])


@pytest.mark.parametrize("name", DERIVED)
def test_derived_capture_is_exactly_its_manifest_applied_to_the_original(name: str) -> None:
    truth = truth_of(name)
    original = read_pcap(SAMPLES / f"{truth['derived_from']}.pcap")
    order = truth["manifest"]["order"]
    derived_packets = list(read_packets(capture_path(name)))
    original_packets = list(read_packets(SAMPLES / f"{truth['derived_from']}.pcap"))
    assert [(p.src, p.seq, p.flags, p.payload) for p in derived_packets] == [
        (
            original_packets[i].src,
            original_packets[i].seq,
            original_packets[i].flags,
            original_packets[i].payload,
        )
        for i in order
    ]
    times = [p.ts for p in derived_packets]
    assert times == sorted(times)
    assert len(order) == truth["capture"]["packets"]
    assert len(original.records) >= max(order) + 1


def test_lost_segments_are_the_recorded_byte_ranges() -> None:
    truth = truth_of("pulsar_derived_lost")
    original = list(read_packets(SAMPLES / "pulsar_plain.pcap"))
    kept = set(truth["manifest"]["order"])
    missing = truth["manifest"]["missing"]
    assert len(missing) == 3
    assert {m["direction"] for m in missing} >= {"c2b", "b2c"}
    for gap in missing:
        assert gap["packet"] not in kept
        packet = original[gap["packet"]]
        assert len(packet.payload) == gap["length"] > 0
        sender = gap["client"] if gap["direction"] == "c2b" else gap["server"]
        assert packet.src == sender
    # Everything not listed as missing is still there.
    assert len(kept) + len(missing) == len(original)


def test_reordered_and_duplicated_changes_are_what_the_manifest_says() -> None:
    reordered = truth_of("pulsar_derived_reordered")["manifest"]
    assert sorted(reordered["order"]) == list(range(len(reordered["order"])))
    for first, second in reordered["swapped"]:
        assert reordered["order"].index(second) == reordered["order"].index(first) - 1
    duplicated = truth_of("pulsar_derived_duplicated")["manifest"]
    repeats = Counter(duplicated["order"])
    assert sorted(i for i, n in repeats.items() if n == 2) == sorted(
        d["packet"] for d in duplicated["duplicates"]
    )


def test_midstream_capture_starts_without_a_handshake() -> None:
    packets = list(read_packets(capture_path("pulsar_derived_midstream")))
    plain = list(read_packets(SAMPLES / "pulsar_plain.pcap"))
    first_conn = {plain[0].src, plain[0].dst}
    starts = [p for p in packets if {p.src, p.dst} == first_conn]
    assert starts and not any(p.flags & 0x02 for p in starts)
    assert packets[0].payload


def test_derive_data_packets_places_bytes_as_the_reassembler_does() -> None:
    """The manifest's stream offsets use the same origin as a reassembled stream."""
    capture = read_pcap(SAMPLES / "pulsar_plain.pcap")
    streams = reassemble(SAMPLES / "pulsar_plain.pcap")
    raw = list(read_packets(SAMPLES / "pulsar_plain.pcap"))
    for packet in derive.data_packets(capture):
        sender = packet.client if packet.direction == "c2b" else packet.server
        receiver = packet.server if packet.direction == "c2b" else packet.client
        stream = streams[(sender, receiver)]
        assert stream[packet.offset : packet.offset + packet.length] == raw[packet.index].payload
