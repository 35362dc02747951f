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

import mmh3
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
from tests.corpus.streams import reassemble, sends
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
    python = {n.removeprefix("realpulsar_python_") for n in NAMES if "_python_" in n}
    assert python >= {"redelivery", "slow_consumer"}


def test_the_real_broker_samples_fit_their_budget_and_name_their_versions() -> None:
    files = [p for p in SAMPLES.iterdir() if p.name.startswith("realpulsar_")]
    assert sum(p.stat().st_size for p in files) < 20_000_000
    versions = json.loads((SAMPLES / "realpulsar_versions.json").read_text())
    assert versions["pulsar_broker"].startswith("4.")
    expected = {"java_client", "go_client", "python_client", "java_version", "go_version"}
    assert expected <= set(versions)
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
    dead-letter policy's limit, copied to the dead-letter topic, and messages still in a
    consumer's receiver queue when the application stopped receiving from it (the last of
    its deliveries: the queue hands them out in order)."""
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

    def dead_lettered_copy(key: tuple) -> bool:
        return key[0][:2] in dead_lettered and key[4] > 0

    kept = wire - record
    queued: dict[tuple, list[tuple]] = defaultdict(list)  # per consumer, in wire order
    for m in messages:
        queued[(m["conn_id"], m["consumer_id"])].append(wire_key(m))
    for keys in queued.values():  # each consumer's last deliveries, never received
        for key in reversed(keys):
            if dead_lettered_copy(key):
                continue
            if not kept[key]:
                break
            kept[key] -= 1
    assert all(dead_lettered_copy(key) for key in +kept), +kept


@pytest.mark.parametrize("client, delivered", [("java", False), ("go", True)])
def test_an_aborted_transactions_messages_reach_the_consumer_from_the_go_producer_only(
    client: str, delivered: bool
) -> None:
    """The broker drops an aborted transaction's messages when it dispatches them, by the
    transaction id in their MessageMetadata (AbstractBaseDispatcher.filterEntriesForConsumer).
    The Java client writes the id there and in CommandSend; the Go client (v0.19.0) only in
    CommandSend (pulsar-client-go issue 1498), so once the abort moves the topic's max read
    position past them the broker delivers the Go producer's aborted messages as plain ones,
    and the Go application, receiving until the output is quiet for 2 s, gets them.
    """
    name = f"realpulsar_{client}_transaction"
    truth, sink = truth_of(name), decoded(name).sink
    aborted = {tuple(m["message_id"][:2]) for m in truth["sent"] if m.get("outcome") == "abort"}
    assert len(aborted) == 3
    in_txn = [
        f for f in sink.frames if f["command"] == "SEND" and f["txnid_least_bits"] is not None
    ]
    assert len(in_txn) == 6  # both clients name the transaction in the command
    # The same SENDs read without pwcap: only the Java client names it in the metadata too.
    sent = [
        s for data in reassemble(SAMPLES / truth["capture"]["file"]).values() for s in sends(data)
    ]
    named = [
        (c.txnid_least_bits, m.HasField("txnid_least_bits"))
        for c, m in sent
        if c.HasField("txnid_least_bits")
    ]
    assert len(named) == 6
    assert {in_metadata for _, in_metadata in named} == {not delivered}
    wire = {(m["ledger_id"], m["entry_id"]) for m in sink.messages if m["command"] == "MESSAGE"}
    assert (aborted & wire) == (aborted if delivered else set())
    received = {tuple(m["message_id"][:2]) for m in truth["received"]}
    assert (aborted & received) == (aborted if delivered else set())


def sticky_hash(key: str) -> int:
    """The hash the broker's sticky selector routes a key by: Murmur3 32 of the key's bytes
    (``Murmur3_32Hash``), made positive, modulo the 65536 of the hash range."""
    return (mmh3.hash(key.encode(), 0, signed=False) & 0x7FFFFFFF) % 65536


def test_sticky_consumers_get_the_keys_of_the_ranges_their_client_declared() -> None:
    """``realpulsar_java_key_shared_sticky``: each SUBSCRIBE carries the STICKY hash ranges
    the client declared (its record's ``consumer_joined`` events), and the broker gave each
    consumer only keys that hash into its ranges: the high half's keys waited for a
    consumer of the high half to join, and, after the low half's consumer left, the low
    half's keys waited for the next one."""
    name = "realpulsar_java_key_shared_sticky"
    truth, sink = truth_of(name), decoded(name).sink
    declared = {
        e["consumer_name"]: [tuple(r) for r in e["hash_ranges"]]
        for e in truth["events"]
        if e["event"] == "consumer_joined"
    }
    subscribes = [f for f in sink.frames if f["command"] == "SUBSCRIBE"]
    assert {f["key_shared_mode"] for f in subscribes} == {"STICKY"}
    asked = {
        f["consumer_name"]: [(r["start"], r["end"]) for r in f["hash_ranges"]] for f in subscribes
    }
    assert asked == declared
    ranges = {(f["conn_id"], f["consumer_id"]): asked[f["consumer_name"]] for f in subscribes}
    delivered = [m for m in sink.messages if m["command"] == "MESSAGE"]
    assert len(delivered) == len(truth["sent"])
    assert {m["consumer_name"] for m in delivered} == set(declared)
    for m in delivered:
        hashed = sticky_hash(m["key"])
        assert any(lo <= hashed <= hi for lo, hi in ranges[(m["conn_id"], m["consumer_id"])]), m
