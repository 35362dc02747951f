"""The decoder on real captures (the real pulsar-client against the test broker),
checked against the broker's journal of every frame and the client's truth file.

The captures are clean loopback recordings (handshake seen, nothing lost).
"""

from __future__ import annotations

import json
from collections import Counter, defaultdict
from collections.abc import Iterable
from pathlib import Path

import pyarrow as pa
import pytest

from pwcap.capture import read_streams
from pwcap.decode.api import DecodeOptions
from pwcap.tables.schema import arrow_schema
from tests.pulsar_frames import DecodingStreams, RecordingSink

SAMPLES = Path(__file__).resolve().parent.parent / "sample_pcaps"


def _clean_recordings() -> list[str]:
    """Recorded (not derived) Pulsar samples with whole packets: every frame is complete."""
    names = []
    for journal in sorted(SAMPLES.glob("pulsar_*.broker.jsonl")):
        name = journal.name.removesuffix(".broker.jsonl")
        truth_file = SAMPLES / f"{name}.truth.json"
        if truth_file.exists() and (SAMPLES / f"{name}.pcap").exists():
            capture = json.loads(truth_file.read_text())["capture"]
            if capture["snaplen"] >= 65535:
                names.append(name)
    return names


WITH_TRUTH = _clean_recordings()
# A producer killed in the middle of a chunked message (its client's record is the other
# producer's): its connection ends in the middle of the chunk after the last the broker read.
CRASHED = "pulsar_problem_crashed_producer"
# Problem scenarios whose client record is not what the wire carried, by design: the
# broker closed the consumer, and the client dropped the deliveries its queue held (they
# came again); it never answered sends, and the client failed them (not in `sent`); it
# refused sends, and the client sent them again. Their findings test them against the
# journal instead (tests/test_findings.py).
CLIENT_SAW_LESS = {
    "pulsar_problem_unload",
    "pulsar_problem_unreceipted",
    "pulsar_problem_send_error",
    CRASHED,
}
AS_THE_CLIENT_SAW = [name for name in WITH_TRUTH if name not in CLIENT_SAW_LESS]


def decode_capture(path: Path) -> DecodingStreams:
    """Feed every TCP connection of a capture to its own PulsarDecoder."""
    streams = DecodingStreams(DecodeOptions(capture=path.name))
    read_streams(path, streams, server_ports={6650})
    return streams


@pytest.fixture(scope="module", params=WITH_TRUTH)
def sample(request):
    name = request.param
    truth = json.loads((SAMPLES / f"{name}.truth.json").read_text())
    streams = decode_capture(SAMPLES / f"{name}.pcap")
    journal = [json.loads(line) for line in (SAMPLES / f"{name}.broker.jsonl").open()]
    return truth, streams.sink, streams, journal


# Journal key -> (frames column, conversion of the journal's value to the column's).
JOURNAL_COLUMNS = {
    "cmd": ("command", None),
    "frame_size": ("frame_size", None),
    "request_id": ("request_id", None),
    "producer_id": ("producer_id", None),
    "consumer_id": ("consumer_id", None),
    "sequence_id": ("sequence_id", None),
    "permits": ("permits", None),
    "topic": ("topic", None),
    "subscription": ("subscription", None),
    "consumer_name": ("consumer_name", None),
    "redelivery_count": ("redelivery_count", None),
    "compression": ("compression", None),
    "checksum": ("checksum_ok", lambda text: text == "ok"),
    "meta_num_messages": ("num_messages", None),
    "broker_index": ("broker_index", None),
    "broker_timestamp": ("broker_timestamp", lambda ms: ms * 1000),
    "message_ids": ("ledger_id", lambda ids: ids[0][0] if ids else None),
}


def test_every_frame_matches_its_broker_journal_line(sample):
    _, sink, streams, journal = sample
    # The journal names each connection by its client endpoint, as the capture does.
    ours = defaultdict(list)
    for row in sink.frames:
        ours[(streams.clients[row["conn_id"]], row["direction"])].append(row)
    theirs = defaultdict(list)
    for line in journal:
        theirs[(line["client"], line["dir"])].append(line)
    assert set(ours) == set(theirs)
    for key, lines in theirs.items():
        assert len(ours[key]) == len(lines)
        for row, line in zip(ours[key], lines, strict=True):
            for name, (column, convert) in JOURNAL_COLUMNS.items():
                if name in line:
                    expected = convert(line[name]) if convert else line[name]
                    actual = row.get(column)
                    if name == "redelivery_count":  # unset on the wire means 0
                        actual = actual or 0
                    assert actual == expected, (key, name, line)


def test_frames_by_direction_and_command_equal_the_broker_journal(sample):
    truth, sink, _, _ = sample
    counted: dict[str, Counter] = defaultdict(Counter)
    for row in sink.frames:
        counted[row["direction"]][row["command"]] += 1
    assert {d: dict(c) for d, c in counted.items()} == truth["frames"]
    if truth["scenario"] != CRASHED:
        assert sink.anomalies == []
        return
    (cut,) = sink.anomalies
    journal = (SAMPLES / f"{CRASHED}.broker.jsonl").read_text().splitlines()
    chunks = [row for row in map(json.loads, journal) if "chunk_id" in row]
    short = int(cut["detail"].split(" bytes short")[0].split()[-1])
    assert cut["kind"] == "truncated_frame"
    assert 0 < short < chunks[-1]["frame_size"]  # the next chunk is as long as the others


def test_every_checksum_verifies(sample):
    _, sink, _, _ = sample
    payload_frames = [r for r in sink.frames if r["command"] in ("SEND", "MESSAGE")]
    assert payload_frames
    assert all(r["checksum_ok"] is True for r in payload_frames)
    assert all(m["checksum_ok"] is True for m in sink.messages)


def message_fields(row: dict) -> tuple:
    return (
        row["producer_name"],
        _logical_topic(row["topic"]),
        row.get("key"),
        tuple(sorted(row.get("properties") or [])),
        row.get("chunked_sha256") or row["payload_sha256"],
    )


def _logical_topic(topic: str) -> str:
    """The client names a partitioned topic; the wire carries ``<topic>-partition-<n>``."""
    base, marker, number = topic.rpartition("-partition-")
    return base if marker and number.isdigit() else topic


def _application_messages(sink: RecordingSink, command: str) -> list[dict]:
    """Message rows as the application sees them: a chunked message once, on its last chunk."""
    return [
        m
        for m in sink.messages
        if m["command"] == command
        and (m.get("num_chunks") is None or m["chunk_id"] == m["num_chunks"] - 1)
    ]


def truth_fields(message: dict) -> tuple:
    return (
        message["producer_name"],
        _logical_topic(message["topic"]),
        message["key"],
        tuple(sorted(message["properties"].items())),
        message["sha256"],
    )


def test_sent_messages_equal_the_clients_truth(sample):
    truth, sink, _, _ = sample
    if truth["scenario"] in CLIENT_SAW_LESS:
        pytest.skip("the client's record holds less than the wire, by design")
    messages = _application_messages(sink, "SEND")
    sent = {(m["producer_name"], m["sequence_id"]): message_fields(m) for m in messages}
    expected = {(m["producer_name"], m["sequence_id"]): truth_fields(m) for m in truth["sent"]}
    assert len(messages) == len(truth["sent"])
    assert sent == expected


def test_delivered_messages_equal_what_the_client_received(sample):
    truth, sink, _, _ = sample
    if truth["scenario"] in CLIENT_SAW_LESS:
        pytest.skip("the client's record holds less than the wire, by design")
    assert delivered(_application_messages(sink, "MESSAGE")) == received(truth["received"])


def delivered(messages: Iterable[dict]) -> Counter:
    """Delivered message rows as the clients' truth counts what they received."""
    return Counter(
        (
            _position(m["ledger_id"], m["entry_id"], m.get("batch_index")),
            m["redelivery_count"] or 0,
            m["subscription"],
            m["consumer_name"],
            message_fields(m),
        )
        for m in messages
    )


def received(messages: Iterable[dict]) -> Counter:
    """What the clients' truth says they received, counted as :func:`delivered` counts."""
    return Counter(
        (
            _position(m["message_id"][0], m["message_id"][1], m["message_id"][3]),
            m["redelivery_count"],
            m["subscription"],
            m["consumer_name"],
            truth_fields(m),
        )
        for m in messages
    )


def _position(ledger: int, entry: int, batch_index: int | None) -> tuple[int, int, int]:
    return (ledger, entry, -1 if batch_index is None else batch_index)


def test_connection_fields(sample):
    truth, _, streams, _ = sample
    decoders = streams.decoders
    assert len(decoders) == len(truth["connections"])
    for decoder, expected in zip(decoders, truth["connections"], strict=True):
        fields = decoder.connection_fields()
        assert fields["client_version"].startswith("Pulsar-")
        assert fields["server_version"]
        assert fields["frames_c2b"] + fields["frames_b2c"] == expected["frames"]


@pytest.mark.parametrize("table", ["frames", "messages", "anomalies"])
def test_rows_fit_the_dataset_schema(sample, table):
    _, sink, _, _ = sample
    rows = {"frames": sink.frames, "messages": sink.messages, "anomalies": sink.anomalies}[table]
    schema = arrow_schema(table)
    assert {key for row in rows for key in row} <= set(schema.names)
    assert pa.Table.from_pylist(rows, schema=schema).num_rows == len(rows)


def test_connection_fields_fit_the_dataset_schema(sample):
    _, _, streams, _ = sample
    decoders = streams.decoders
    names = set(arrow_schema("connections").names)
    for decoder in decoders:
        assert set(decoder.connection_fields()) <= names
