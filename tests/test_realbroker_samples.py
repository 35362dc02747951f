"""The decoder on captures of the real Apache Pulsar broker with the real Java and Go clients
(tests/realbroker/), checked against what the clients recorded, against the frames the
capture carries read independently (dpkt and the protobuf schema), and the analytics
against the broker's own statistics sampled from its admin API during the capture.
"""

from __future__ import annotations

import json
from collections import Counter, defaultdict
from functools import cache
from pathlib import Path

import pytest
from pwcap.capture import read_streams
from pwcap.decode.api import DecodeOptions
from pwcap.decode.pulsar.commands import (
    ACK_RESPONSE,
    CONNECTED,
    PONG,
    RECEIPT,
    RESPONSE,
    SEMANTICS,
)

from tests.pulsar_frames import DecodingStreams
from tests.test_pulsar_samples import (
    _application_messages,
    message_fields,
    truth_fields,
)

SAMPLES = Path(__file__).resolve().parent.parent / "sample_pcaps"
NAMES = sorted(p.name.removesuffix(".truth.json") for p in SAMPLES.glob("realpulsar_*.truth.json"))
ANSWERS = {RESPONSE, RECEIPT, ACK_RESPONSE, PONG, CONNECTED}
DEAD_LETTER_ORIGIN = "ORIGIN_MESSAGE_ID"


def truth_of(name: str) -> dict:
    return json.loads((SAMPLES / f"{name}.truth.json").read_text())


def stats_of(name: str) -> list[dict]:
    lines = (SAMPLES / truth_of(name)["stats"]).read_text().splitlines()
    return [json.loads(line) for line in lines]


@cache
def decoded(name: str) -> DecodingStreams:
    truth = truth_of(name)
    streams = DecodingStreams(DecodeOptions(capture=truth["capture"]["file"]))
    read_streams(SAMPLES / truth["capture"]["file"], streams, {truth["capture"]["port"]})
    return streams


def scenario_prefix(truth: dict) -> str:
    """The scenario's topics (the broker's own, such as its system topics, are not)."""
    client, _, scenario = truth["scenario"].removeprefix("realpulsar_").partition("_")
    return f"persistent://public/default/{client}-{scenario.replace('_', '-')}-"


def test_every_scenario_the_issue_asks_for_is_captured_with_both_clients() -> None:
    java = {n.removeprefix("realpulsar_java_") for n in NAMES if n.startswith("realpulsar_java")}
    go = {n.removeprefix("realpulsar_go_") for n in NAMES if n.startswith("realpulsar_go")}
    assert java >= {
        "key_shared",
        "redelivery",
        "batch_index_ack",
        "delayed",
        "chunked",
        "transaction",
        "pattern",
        "schema",
        "unload",
        "slow_consumer",
        "entry_metadata",
    }
    assert go >= {"key_shared", "redelivery", "batch_index_ack", "chunked", "transaction"}


def test_the_real_broker_samples_fit_their_budget_and_name_their_versions() -> None:
    files = [p for p in SAMPLES.iterdir() if p.name.startswith("realpulsar_")]
    assert sum(p.stat().st_size for p in files) < 20_000_000
    versions = json.loads((SAMPLES / "realpulsar_versions.json").read_text())
    assert versions["pulsar_broker"].startswith("4.")
    assert {"java_client", "go_client", "java_version", "go_version"} <= set(versions)
    for name in NAMES:
        truth = truth_of(name)
        assert truth["broker_version"] == versions["pulsar_broker"]
        client = truth["client"]
        assert versions[f"{client['client']}_client"].endswith(client["client_version"])


@pytest.mark.parametrize("name", NAMES)
def test_frames_by_direction_and_command_equal_the_capture(name: str) -> None:
    truth, streams = truth_of(name), decoded(name)
    counted: dict[str, Counter] = defaultdict(Counter)
    for row in streams.sink.frames:
        counted[row["direction"]][row["command"]] += 1
    assert {d: dict(c) for d, c in counted.items()} == truth["frames"]
    assert streams.sink.anomalies == []


@pytest.mark.parametrize("name", NAMES)
def test_each_connection_carries_the_captured_frames(name: str) -> None:
    truth, streams = truth_of(name), decoded(name)
    ours = []
    for decoder in streams.decoders:
        fields = decoder.connection_fields()
        ours.append((fields["frames_c2b"], fields["frames_b2c"]))
        assert fields["client_version"]
        assert fields["server_version"].startswith("Pulsar Server")
    theirs = [(c.get("frames_c2b", 0), c.get("frames_b2c", 0)) for c in truth["connections"]]
    assert sorted(ours) == sorted(theirs)


@pytest.mark.parametrize("name", NAMES)
def test_every_checksum_verifies(name: str) -> None:
    sink = decoded(name).sink
    payload = [r for r in sink.frames if r["command"] in ("SEND", "MESSAGE")]
    assert payload
    assert all(r["checksum_ok"] is True for r in payload)
    assert all(m["checksum_ok"] is True for m in sink.messages)


@pytest.mark.parametrize("name", NAMES)
def test_every_request_is_answered_and_every_answer_paired(name: str) -> None:
    frames = decoded(name).sink.frames
    answers = [r for r in frames if SEMANTICS[r["command"]][1] in ANSWERS]
    assert answers
    assert all(r.get("answers") for r in answers), [r for r in answers if not r.get("answers")]
    answered = Counter((r["conn_id"], r["answers"]) for r in answers)
    asked = Counter(
        (r["conn_id"], r["command"])
        for r in frames
        if r["direction"] == "c2b" and r.get("request_id") is not None
    )
    unanswered = {k: n - answered[k] for k, n in asked.items() if n > answered[k]}
    assert unanswered == {}


def _position(truth: dict, ledger: int, entry: int, index: int | None) -> tuple:
    """(ledger, entry, batch index) with -1 outside a batch.

    The Go client numbers a message outside a batch 0, as the first of a batch of one (its
    key-based batcher sends batches of one): for Go both read as index 0.
    """
    index = -1 if index is None else index
    if truth["client"]["client"] == "go" and index == -1:
        index = 0
    return (ledger, entry, index)


def _dead_letter_copies(truth: dict, sends: list[dict]) -> tuple[list[dict], set[tuple]]:
    """SENDs the client library made itself, copying a message to the dead-letter topic,
    and the positions of the messages they copy (their ORIGIN_MESSAGE_ID property)."""
    copies = [m for m in sends if DEAD_LETTER_ORIGIN in dict(m.get("properties") or [])]
    origins = set()
    for copy in copies:  # "ledger:entry:..." (the rest differs between clients)
        ledger, entry = dict(copy["properties"])[DEAD_LETTER_ORIGIN].split(":")[:2]
        origins.add((int(ledger), int(entry)))
    return copies, origins


@pytest.mark.parametrize("name", NAMES)
def test_sent_messages_equal_the_clients_record(name: str) -> None:
    truth, sink = truth_of(name), decoded(name).sink
    prefix = scenario_prefix(truth)
    sends = [m for m in _application_messages(sink, "SEND") if m["topic"].startswith(prefix)]
    copies, _ = _dead_letter_copies(truth, sends)
    originals = [m for m in sends if m not in copies]
    assert Counter(message_fields(m) for m in originals) == Counter(
        truth_fields(m) for m in truth["sent"]
    )
    ids = {(m["producer_name"], m["sequence_id"]) for m in originals}
    assert ids == {(m["producer_name"], m["sequence_id"]) for m in truth["sent"]}
    # A dead-letter copy carries the original's payload to the dead-letter topic.
    digests = {m["sha256"] for m in truth["sent"]}
    assert all(m["payload_sha256"] in digests for m in copies)


@pytest.mark.parametrize("name", NAMES)
def test_delivered_messages_equal_what_the_clients_received(name: str) -> None:
    """Every delivery the wire shows reached the application with the same id, redelivery
    count and contents, except those the client library kept from it: a message past the
    dead-letter policy's limit, copied to the dead-letter topic, and messages prefetched
    into the receiver queue after the application's last receive on that consumer."""
    truth, sink = truth_of(name), decoded(name).sink
    prefix = scenario_prefix(truth)
    messages = [m for m in _application_messages(sink, "MESSAGE") if m["topic"].startswith(prefix)]
    sends = [m for m in _application_messages(sink, "SEND") if m["topic"].startswith(prefix)]
    _, dead_lettered = _dead_letter_copies(truth, sends)

    def wire_key(m: dict) -> tuple:
        position = _position(truth, m["ledger_id"], m["entry_id"], m.get("batch_index"))
        fields = message_fields(m)
        return (position, m["subscription"], m["consumer_name"], fields, m["redelivery_count"] or 0)

    def record_key(m: dict) -> tuple:
        position = _position(truth, *m["message_id"][:2], m["message_id"][3])
        fields = truth_fields(m)
        return (position, m["subscription"], m["consumer_name"], fields, m["redelivery_count"])

    wire = Counter(wire_key(m) for m in messages)
    record = Counter(record_key(m) for m in truth["received"])
    assert record - wire == Counter()
    last_receive: dict[str, int] = {}
    for m in truth["received"]:
        last_receive[m["consumer_name"]] = max(
            m["receive_time_us"], last_receive.get(m["consumer_name"], 0)
        )
    kept = wire - record
    for m in messages:
        key = wire_key(m)
        if kept[key]:
            dead = key[0][:2] in dead_lettered and key[4] > 0
            prefetched = m["ts"] > last_receive.get(m["consumer_name"], 0)
            assert dead or prefetched, key
            kept[key] -= 1
