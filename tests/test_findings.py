"""The findings (``jobs/findings.py``), from one ``pwcap analyze`` of every sample capture:
each problem scenario's finding appears with the entities and numbers its own record
shows (the broker's journal, the client's record), and a capture without a problem gives
none. Scenarios: ``tests/corpus/scenarios.py``."""

from __future__ import annotations

import json
import random
from collections import Counter
from itertools import pairwise

import pytest

from pwcap.tables.analytics import FINDING_KINDS, THRESHOLDS
from pwcap.tables.printable import printable
from tests.conftest import SAMPLES, sample_captures

# The samples recorded to show a problem, and the kinds of finding each must give; every
# other sample is clean, and must give no finding at all.
PROBLEMS = {
    "pulsar_slow_consumer": {"permit_starvation"},
    "pulsar_redelivery_nack": {"redelivery"},
    "pulsar_redelivery_ack_timeout": {"redelivery"},
    "pulsar_problem_refused_producer": {"error"},
    "pulsar_problem_unload": {"topic_unload", "redelivery", "ack_lost_on_reconnect"},
    "pulsar_problem_unreceipted": {"send_unreceipted"},
    "pulsar_problem_connect_storm": {"connect_storm"},
    # The C++ client opens a new connection for each lookup it retries.
    "pulsar_problem_lookup_storm": {"error", "lookup_storm", "connect_storm"},
    "pulsar_problem_nack_storm": {"redelivery", "redelivery_storm"},
    "pulsar_problem_ack_hole": {"ack_hole"},
    "pulsar_problem_stalled_broker": {"zero_window", "chunk_stall"},
    # The broker stalls each connection after its first SEND, the survivor's too.
    "pulsar_problem_crashed_producer": {"chunk_incomplete", "zero_window", "slow_broker"},
    "kafka07_errors": {"error"},
    "pulsar_problem_lossy_link": {"retransmission_burst"},
    "pulsar_problem_slow_broker": {"slow_broker"},
    "pulsar_problem_slow_network": {"slow_network"},
    "pulsar_problem_send_error": {"send_error"},
    "pulsar_problem_slow_receipt": {"slow_receipt", "slow_broker"},
    # The real broker's scenarios that make a problem on purpose.
    "realpulsar_go_slow_consumer": {"permit_starvation"},
    "realpulsar_java_slow_consumer": {"permit_starvation"},
    "realpulsar_go_redelivery": {"redelivery"},
    "realpulsar_java_redelivery": {"redelivery"},
    "realpulsar_python_redelivery": {"redelivery"},
    # Negative acks, and a consumer closing with members unacknowledged.
    "realpulsar_go_batch_index_ack": {"redelivery"},
    "realpulsar_java_batch_index_ack": {"redelivery"},
    # An aborted transaction's messages come back; the broker starts its transaction
    # coordinator as the clients ask for it, seconds to answer.
    "realpulsar_go_transaction": {"redelivery", "slow_broker"},
    "realpulsar_java_transaction": {"redelivery", "slow_broker"},
    "realpulsar_java_unload": {"topic_unload"},
    # Captured on a loaded machine: the broker took over a second to answer SENDs (its
    # admin API up to 0.78 s a stats round), which the capture shows as it is.
    "realpulsar_python_ack_hole": {"ack_hole", "slow_broker"},
    "realpulsar_python_epoch": {"redelivery"},
    "realpulsar_java_epoch": {"redelivery"},
    "realpulsar_python_key_shared_stall": {"key_shared_stall", "permit_starvation"},
}
CLEAN = sorted(p.name for p in sample_captures() if p.name.split(".")[0] not in PROBLEMS)


def journal(name: str) -> list[dict]:
    path = SAMPLES / f"{name}.broker.jsonl"
    return [json.loads(line) for line in path.read_text().splitlines() if line]


def truth(name: str) -> dict:
    return json.loads((SAMPLES / f"{name}.truth.json").read_text())


def found(analyzed: dict, name: str, kind: str | None = None) -> list[dict]:
    rows = [r for r in analyzed["rows"]["findings"] if r["capture"].split(".")[0] == name]
    return [r for r in rows if kind is None or r["kind"] == kind]


def one(analyzed: dict, name: str, kind: str, **where: object) -> dict:
    rows = [r for r in found(analyzed, name, kind) if all(r[k] == v for k, v in where.items())]
    assert len(rows) == 1, (kind, where, found(analyzed, name))
    return rows[0]


@pytest.mark.parametrize("capture", CLEAN)
def test_a_capture_without_a_problem_gives_no_finding(analyzed, capture):
    rows = [r for r in analyzed["rows"]["findings"] if r["capture"] == capture]
    assert rows == [], [r["explanation"] for r in rows]


@pytest.mark.parametrize("name", sorted(PROBLEMS))
def test_each_problem_scenario_gives_the_findings_of_its_problem_and_no_other(analyzed, name):
    assert {r["kind"] for r in found(analyzed, name)} == PROBLEMS[name]


def test_findings_are_ranked_by_severity_and_explained(analyzed):
    rows = sorted(analyzed["rows"]["findings"], key=lambda r: r["rank"])
    assert [r["rank"] for r in rows] == list(range(1, len(rows) + 1))
    order = ["high", "medium", "low"]
    assert [order.index(r["severity"]) for r in rows] == sorted(
        order.index(r["severity"]) for r in rows
    )
    for row in rows:
        assert row["kind"] in FINDING_KINDS
        assert row["explanation"].endswith(".") and row["evidence"], row
        assert row["start_ts"] <= row["end_ts"], row


def test_analyze_prints_the_top_findings_last(analyzed):
    printed = analyzed["out"].getvalue().rstrip().splitlines()
    findings = sorted(analyzed["rows"]["findings"], key=lambda r: r["rank"])
    start = next(i for i, line in enumerate(printed) if line.startswith("Findings ("))
    listed = printed[start + 1 :]
    assert len(listed) == min(10, len(findings))
    for line, row in zip(listed, findings, strict=False):
        assert line.startswith(f"  {row['rank']}. [{row['severity']}] {row['kind']}")
        assert printable(row["explanation"], None) in line


# -- consumers -------------------------------------------------------------------------------


def _starved_spans(rows: list[dict], consumer: tuple[int, int]) -> list[tuple[int, int]]:
    """The spans the broker kept the consumer at no permits and ended with a FLOW after
    which it delivered at once (10 ms): messages were waiting for it."""
    spans, since, balance = [], None, None
    subscribing = {}
    for i, row in enumerate(rows):
        key = (row["conn"], row.get("consumer_id"))
        if row["cmd"] == "SUBSCRIBE":
            subscribing[(row["conn"], row["request_id"])] = key
        elif row["cmd"] == "SUCCESS" and (row["conn"], row.get("request_id")) in subscribing:
            balance = (
                0 if subscribing.pop((row["conn"], row["request_id"])) == consumer else balance
            )
        elif key != consumer or balance is None:
            continue
        elif row["cmd"] == "MESSAGE":
            balance -= row.get("meta_num_messages", 1)
            since = row["t_us"] if balance <= 0 else since
        elif row["cmd"] == "FLOW":
            balance += row["permits"]
            later = [r["t_us"] for r in rows[i + 1 :] if r["cmd"] == "MESSAGE"]
            if since is not None and later and later[0] - row["t_us"] <= 10_000:
                spans.append((since, row["t_us"]))
            since = None
    return spans


def test_a_slow_consumer_is_starved_of_permits_because_it_acknowledges_slowly(analyzed):
    name = "pulsar_slow_consumer"
    rows = journal(name)
    (subscribe,) = [r for r in rows if r["cmd"] == "SUBSCRIBE"]
    spans = _starved_spans(rows, (subscribe["conn"], subscribe["consumer_id"]))
    first_flow = next(r for r in rows if r["cmd"] == "FLOW")
    finding = one(analyzed, name, "permit_starvation")
    assert finding["count"] == len(spans)
    # Broker and capture see each span's ends a little apart: a millisecond a span at most.
    assert abs(finding["duration_us"] - sum(e - s for s, e in spans)) <= 1_000 * len(spans)
    assert finding["consumer_name"] == truth(name)["received"][0]["consumer_name"]
    assert finding["subscription"] == "slow-sub"
    assert f"receiver queue is {first_flow['permits']} permits" in finding["explanation"]
    # The application sleeps 60 ms per message behind a queue of 4.
    assert finding["cause"] == "slow_acknowledgement"


def _redeliveries(name: str) -> int:
    return sum(len(counts) - 1 for counts in truth(name)["delivery_counts"].values())


@pytest.mark.parametrize(
    ("name", "cause"),
    [
        ("pulsar_redelivery_nack", "negative_ack"),
        ("pulsar_redelivery_ack_timeout", "ack_timeout"),
        ("pulsar_problem_nack_storm", "negative_ack"),
    ],
)
def test_redeliveries_are_counted_by_the_cause_the_client_asked_with(analyzed, name, cause):
    finding = one(analyzed, name, "redelivery")
    assert finding["cause"] == cause
    assert finding["count"] == _redeliveries(name)
    asked = {r["action"] for r in truth(name)["received"] if r["redelivery_count"] == 0}
    assert ("nack" in asked) == (cause == "negative_ack")


def test_a_redelivery_storm_is_the_window_of_most_redeliveries(analyzed):
    name = "pulsar_problem_nack_storm"
    storm = one(analyzed, name, "redelivery_storm")
    deliveries = [r for r in journal(name) if r["cmd"] == "MESSAGE"]
    assert storm["count"] == _redeliveries(name) >= THRESHOLDS["storm_redeliveries"]
    assert f"{storm['count']} redeliveries" in storm["explanation"]
    assert len(deliveries) == storm["count"] + len(truth(name)["sent"])


def test_a_storm_is_the_most_events_within_any_window_ending_at_one(spark):
    """Events at the window's two edges, several at one instant, keys apart; the count
    is the brute-force one: for each event, those at most one window before it."""
    from pwcap.jobs.problems.base import storms

    span = int(THRESHOLDS["storm_window_s"] * 1_000_000)
    rng = random.Random(36)
    times = {
        "edges": [0, span, span, 2 * span + 1, 2 * span + 1, 2 * span + 1],
        "dense": sorted(rng.randrange(0, 5 * span) for _ in range(400)),
        "lone": [7],
    }
    rows = [(key, us) for key, stamps in times.items() for us in stamps]
    events = spark.createDataFrame(rows, "key string, us long").selectExpr(
        "key", "timestamp_micros(us) AS ts"
    )
    got = {r.key: (r.worst, r["count"]) for r in storms(events, ["key"], 1).collect()}
    expected = {
        key: (max(sum(t - span <= u <= t for u in stamps) for t in stamps), len(stamps))
        for key, stamps in times.items()
    }
    assert got == expected
    assert expected["edges"] == (3, 6)


def test_an_unload_closes_clients_and_loses_the_ack_in_flight(analyzed):
    name = "pulsar_problem_unload"
    rows = journal(name)
    closes = [r for r in rows if r["cmd"] in ("CLOSE_PRODUCER", "CLOSE_CONSUMER")]
    by_broker = [r for r in closes if r["dir"] == "b2c"]
    unload = one(analyzed, name, "topic_unload")
    assert unload["count"] == len(by_broker) == 2
    assert unload["topic"] == "persistent://public/default/unload"
    assert f"{len(by_broker)} came back" in unload["explanation"]
    # The ACK that arrived as the topic closed named an entry delivered again after.
    when = by_broker[0]["t_us"]
    acked = {tuple(r["message_ids"][0][:2]) for r in rows if r["cmd"] == "ACK" and r["t_us"] < when}
    again = [
        tuple(r["message_ids"][0][:2])
        for r in rows
        if r["cmd"] == "MESSAGE" and r["t_us"] > when and r.get("redelivery_count", 0) > 0
    ]
    lost = one(analyzed, name, "ack_lost_on_reconnect")
    assert lost["count"] == len(acked & set(again)) == 1
    reconnect = one(analyzed, name, "redelivery", cause="reconnect")
    assert reconnect["count"] == len(again)


def test_an_ack_hole_names_the_entry_the_consumer_never_acknowledged(analyzed):
    name = "pulsar_problem_ack_hole"
    (skipped,) = [r for r in truth(name)["received"] if r["action"] == "none"]
    hole = one(analyzed, name, "ack_hole")
    ledger, entry = skipped["message_id"][:2]
    assert hole["count"] == 1
    assert f"the oldest {ledger}:{entry}" in hole["explanation"]
    assert hole["subscription"] == "hole-sub"


# -- producers and connections ---------------------------------------------------------------


def test_sends_never_receipted_are_those_the_client_timed_out(analyzed):
    name = "pulsar_problem_unreceipted"
    finding = one(analyzed, name, "send_unreceipted")
    assert finding["count"] == len(truth(name)["send_failures"]) == 5
    assert finding["producer_name"] == "unreceipted-producer"
    assert "before the producer closed" in finding["explanation"]


def test_sends_the_broker_refused_are_send_errors_by_code(analyzed):
    name = "pulsar_problem_send_error"
    finding = one(analyzed, name, "send_error")
    assert finding["cause"] == "PersistenceError"
    assert finding["count"] == sum(r["cmd"] == "SEND_ERROR" for r in journal(name)) == 2
    assert finding["producer_name"] == "senderror-producer"


def test_a_receipt_later_than_the_default_send_timeout_is_a_slow_receipt(analyzed):
    name = "pulsar_problem_slow_receipt"
    rows = journal(name)
    (send,) = [r for r in rows if r["cmd"] == "SEND"]
    (receipt,) = [r for r in rows if r["cmd"] == "SEND_RECEIPT"]
    finding = one(analyzed, name, "slow_receipt")
    assert finding["count"] == 1
    shown = float(finding["explanation"].split("(the longest ")[1].split(" s)")[0])
    assert abs(shown - (receipt["t_us"] - send["t_us"]) / 1e6) < 0.01
    # The broker took the time itself: a slow broker, the network apart.
    assert one(analyzed, name, "slow_broker")["cause"] == "SEND"


def test_refused_requests_are_errors_by_kind(analyzed):
    name = "pulsar_problem_refused_producer"
    rows = journal(name)
    errors = one(analyzed, name, "error")
    assert errors["cause"] == "ServiceNotReady"
    assert errors["count"] == sum(r["cmd"] == "ERROR" for r in rows) == 4
    assert errors["client"] == "127.0.0.1"
    # Each of its five lookups was followed by a PRODUCER: no lookup storm (PROBLEMS).


def test_lookups_the_broker_refuses_are_retried_in_a_lookup_storm(analyzed):
    """Seven LOOKUPs answered ServiceNotReady, retried until the eighth is answered and
    the producer attaches: the lookups beyond those one attach explains led nowhere."""
    name = "pulsar_problem_lookup_storm"
    rows = journal(name)
    lookups = [r for r in rows if r["cmd"] == "LOOKUP"]
    refused = sum(r["cmd"] == "LOOKUP_RESPONSE" and "error" in r for r in rows)
    attached = sum(r["cmd"] == "PRODUCER_SUCCESS" for r in rows)
    assert (len(lookups), refused, attached) == (8, 7, 1)
    assert not any(r["cmd"] == "SUBSCRIBE" for r in rows)
    assert lookups[-1]["t_us"] - lookups[0]["t_us"] < THRESHOLDS["storm_window_s"] * 1e6
    storm = one(analyzed, name, "lookup_storm")
    assert (storm["client"], storm["topic"]) == ("127.0.0.1", truth(name)["sent"][0]["topic"])
    assert storm["count"] == len(lookups)
    beyond = len(lookups) - THRESHOLDS["lookups_per_attach"] * attached
    assert f"({refused} answered with an error) and attached {attached} " in storm["explanation"]
    assert f": {beyond:g} lookups within" in storm["explanation"]
    assert one(analyzed, name, "error", cause="ServiceNotReady")["count"] == refused


# Kafka 0.7's error codes, as its ErrorMapping names them.
KAFKA_ERRORS = {1: "OffsetOutOfRange", 2: "InvalidMessage", 3: "WrongPartition"}


def test_kafka_error_codes_are_errors_by_kind(analyzed):
    rows = journal("kafka07_errors")
    coded = Counter(KAFKA_ERRORS[r["error"]] for r in rows if r.get("error"))
    found_codes = {r["cause"]: r["count"] for r in found(analyzed, "kafka07_errors", "error")}
    assert found_codes == dict(coded)


def test_a_client_per_message_is_a_connect_storm(analyzed):
    name = "pulsar_problem_connect_storm"
    storm = one(analyzed, name, "connect_storm")
    assert storm["count"] == len(truth(name)["connections"]) == 8
    assert storm["broker"] == truth(name)["connections"][0]["broker"]
    # Each new client looks the topic up once and attaches its producer: no lookup storm.


# -- TCP and chunks --------------------------------------------------------------------------


def test_a_broker_that_stops_reading_advertises_a_zero_window_and_chunks_stall(analyzed):
    name = "pulsar_problem_stalled_broker"
    zero = one(analyzed, name, "zero_window")
    assert "The broker of connection" in zero["explanation"]
    # The broker stopped reading for 1.5 s: its window stayed shut for at most that long.
    assert THRESHOLDS["zero_window_us"] <= zero["duration_us"] <= 1_500_000
    sends = [r for r in journal(name) if r["cmd"] == "SEND"]
    pauses = Counter()
    for before, after in pairwise(sends):
        if after["meta_sequence_id"] == before["meta_sequence_id"]:
            pauses[before["meta_sequence_id"]] = max(
                pauses[before["meta_sequence_id"]], after["t_us"] - before["t_us"]
            )
    stalled = [seq for seq, pause in pauses.items() if pause > THRESHOLDS["chunk_stall_us"]]
    stall = one(analyzed, name, "chunk_stall")
    assert stall["count"] == len(stalled) >= 1


def test_a_chunked_message_its_producer_died_in_is_never_completed(analyzed):
    name = "pulsar_problem_crashed_producer"
    chunks = [r for r in journal(name) if "chunk_id" in r]
    (uuid,) = {(r["meta_producer_name"], r["meta_sequence_id"]) for r in chunks}
    assert max(r["chunk_id"] for r in chunks) < chunks[0]["num_chunks"] - 1
    incomplete = one(analyzed, name, "chunk_incomplete")
    assert (incomplete["producer_name"], incomplete["count"]) == (uuid[0], 1)
    seen = f"as few as {len(chunks)} of {chunks[0]['num_chunks']} chunks seen"
    assert seen in incomplete["explanation"]


def test_segments_lost_past_the_capture_point_are_seen_sent_again(analyzed):
    name = "pulsar_problem_lossy_link"
    dropped = truth(name)["loss"]["dropped_data_segments"]
    bursts = {r["explanation"].split(" of connection")[0]: r for r in found(analyzed, name)}
    client = bursts["The client"]
    # Each dropped segment is sent again; Linux may send two lost ones again as one.
    assert dropped * 3 // 4 <= client["count"] <= dropped
    assert "lost between the capture point and the broker" in client["explanation"]


def test_a_slow_broker_is_told_apart_from_a_slow_network(analyzed):
    name = "pulsar_problem_slow_broker"
    rows = journal(name)
    asked = {r["request_id"]: r["t_us"] for r in rows if r["cmd"] == "PRODUCER"}
    took = [r["t_us"] - asked[r["request_id"]] for r in rows if r["cmd"] == "PRODUCER_SUCCESS"]
    finding = one(analyzed, name, "slow_broker")
    assert finding["cause"] == "PRODUCER"
    assert finding["count"] == len(took) == 3
    # The broker's own time, as its journal shows it, is what the finding calls the broker's.
    shown = float(finding["explanation"].split(" took ")[1].split(" s ")[0])
    assert abs(shown - max(took) / 1e6) < 0.01


def test_a_slow_network_is_told_apart_from_a_slow_broker(analyzed):
    """A link held every packet 60 ms each way, and recorded how long it held each; the
    capture is at the client's end of it. The broker's round trip is the link's two ways,
    and what each SEND took beyond it is the broker's own time (its journal): the finding
    blames the network, and no slow_broker finding blames the broker."""
    name = "pulsar_problem_slow_network"
    link = truth(name)["link"]
    there, back = link["client_to_broker_us"], link["broker_to_client_us"]
    assert min(there + back) >= link["delay_ms"] * 1000
    assert 2 * link["delay_ms"] * 1000 >= THRESHOLDS["slow_rtt_us"]
    assert len(there) + len(back) == truth(name)["capture"]["packets"]  # all crossed it
    (connection,) = truth(name)["connections"]
    finding = one(analyzed, name, "slow_network")
    assert (finding["client"], finding["broker"]) == (connection["client"], connection["broker"])
    assert "to the broker of connection" in finding["explanation"]
    shown_us = 1000 * float(finding["explanation"].split(" and back is ")[1].split(" ms")[0])
    # Shown to a tenth of a millisecond: at least the link's shortest holds both ways, at
    # most the handshake's (the first packet each way) and a millisecond for the broker's
    # kernel and the link waking.
    assert min(there) + min(back) - 50 <= shown_us <= there[0] + back[0] + 1_050
    rows = journal(name)
    sent_at = {r["meta_sequence_id"]: r["t_us"] for r in rows if r["cmd"] == "SEND"}
    own = {
        r["sequence_id"]: r["t_us"] - sent_at[r["sequence_id"]]
        for r in rows
        if r["cmd"] == "SEND_RECEIPT"
    }
    pairs = analyzed["rows"]["latency_pairs"]
    sends = [r for r in pairs if r["kind"] == "SEND" and r["capture"].split(".")[0] == name]
    assert len(sends) == len(own) == len(truth(name)["sent"])
    jitter = max(there) + max(back) - min(there) - min(back)
    for send in sends:
        assert abs(send["network_us"] - shown_us) <= 50
        assert abs(send["remote_us"] - own[send["sequence_id"]]) <= jitter + 1_000
        assert send["remote_us"] < send["network_us"]
    assert not found(analyzed, name, "slow_broker")


# -- where people read them ------------------------------------------------------------------


def test_a_report_of_a_capture_without_findings_says_no_problem_was_found(tmp_path):
    import pyarrow as pa
    import pyarrow.parquet as pq

    from pwcap.report.findings import findings as section
    from pwcap.report.tables import ANALYTICS_TABLES, Source
    from pwcap.tables.analytics import ANALYTICS

    folder = tmp_path / "findings"
    folder.mkdir()
    schema = pa.schema([pa.field(c.name, c.type) for c in ANALYTICS["findings"]])
    pq.write_table(schema.empty_table(), folder / "part-0.parquet")
    html = section(Source(tmp_path, ANALYTICS_TABLES))
    assert "No problem found" in html and "<li" not in html


# -- the same findings however the capture was decoded ---------------------------------------

SPLIT = [
    "pulsar_problem_connect_storm",
    "pulsar_problem_lossy_link",
    "pulsar_problem_slow_network",
    "pulsar_problem_stalled_broker",
    "pulsar_problem_unload",
    "realpulsar_python_ack_hole",
    "realpulsar_python_epoch",
    "realpulsar_python_key_shared_stall",
]


def _findings_of(spark, dataset) -> list[dict]:
    """``jobs/findings.py`` run alone on ``dataset``, its rows without their rank."""
    from pwcap.jobs import findings

    table = findings.build(spark, [str(dataset)], "1 minutes")["findings"]
    rows = [r.asDict() for r in table.drop("rank").collect()]
    return sorted(rows, key=lambda r: (r["capture"], r["kind"], r["explanation"]))


@pytest.mark.slow
def test_the_findings_are_the_same_decoded_in_shares_or_by_spark_tasks(spark, tmp_path):
    from pwcap.decode.api import DecodeOptions
    from pwcap.decode.driver import decode_captures
    from pwcap.decode.parallel import decode_parallel
    from pwcap.decode.spark.listing import list_captures
    from pwcap.decode.spark.writing import write_dataset

    captures = [SAMPLES / f"{name}.pcap" for name in SPLIT]
    decode_captures(captures, tmp_path / "one")
    decode_parallel(captures, tmp_path / "shares", jobs=2)
    listed, _ = list_captures([str(c) for c in captures])
    split_above = -(-min(c.size for c in listed) // 3)  # every capture read by three tasks
    write_dataset(spark, listed, DecodeOptions(), str(tmp_path / "tasks"), split_above=split_above)
    expected = _findings_of(spark, tmp_path / "one")
    kinds = {
        "connect_storm",
        "retransmission_burst",
        "slow_network",
        "ack_hole",
        "key_shared_stall",
    }
    assert {r["kind"] for r in expected} >= kinds
    assert _findings_of(spark, tmp_path / "shares") == expected
    assert _findings_of(spark, tmp_path / "tasks") == expected


# -- Key_Shared: the key hash as the broker computes it ---------------------------------------


def test_the_key_hash_is_the_one_the_broker_routes_a_sticky_subscription_by(sample_dataset):
    """A STICKY Key_Shared consumer declares its hash ranges in SUBSCRIBE; the broker
    delivers each message to the consumer whose ranges hold its key's hash. The clients'
    records of who received which key check pwcap's hash."""
    import pyarrow.dataset as ds

    from pwcap.jobs.problems.key_shared import sticky_key_hash

    subscribes = ds.dataset(sample_dataset / "frames").to_table(
        filter=(ds.field("command") == "SUBSCRIBE") & (ds.field("key_shared_mode") == "STICKY"),
        columns=["capture", "subscription", "consumer_name", "hash_ranges"],
    )
    ranges = {
        (r["capture"].split(".")[0], r["subscription"], r["consumer_name"]): r["hash_ranges"]
        for r in subscribes.to_pylist()
    }
    checked = set()
    for (name, subscription, consumer), declared in ranges.items():
        for received in truth(name)["received"]:
            if (received["subscription"], received["consumer_name"]) == (subscription, consumer):
                hashed = sticky_key_hash(received["key"].encode())
                assert any(r["start"] <= hashed <= r["end"] for r in declared), received
                checked.add((name, received["key"]))
    # Every key of the sticky samples, each on the side of the range its hash says.
    assert {name for name, _ in checked} == {
        "realpulsar_java_key_shared",
        "realpulsar_java_key_shared_sticky",
        "realpulsar_python_key_shared_stall",
    }
    assert len(checked) == 24


# -- the real broker: Key_Shared stalls, consumer epochs, batch-index ack holes ---------------


def _received(name: str, consumer: str) -> list[dict]:
    return [r for r in truth(name)["received"] if r["consumer_name"] == consumer]


def _stats(name: str) -> list[dict]:
    path = SAMPLES / f"{name}.stats.jsonl"
    return [json.loads(line) for line in path.read_text().splitlines() if line]


def test_a_key_shared_consumer_without_permits_stalls_its_keys_while_another_idles(analyzed):
    """The low half of a STICKY subscription has a five-message queue and an application
    that pauses 1.5 s after every five messages; the high half's consumer drained its keys
    first and has permits and nothing to do. Each stall is one of the application's pauses
    (the client's record); the broker's stats inside agree."""
    name = "realpulsar_python_key_shared_stall"
    low = _received(name, "py-stall-low")
    received = sorted(r["receive_time_us"] for r in low)
    pauses = [b - a for a, b in pairwise(received) if b - a >= THRESHOLDS["key_shared_stall_us"]]
    stall = one(analyzed, name, "key_shared_stall")
    assert (stall["consumer_name"], stall["subscription"]) == ("py-stall-low", "py-stall-sub")
    assert stall["cause"] == "STICKY"
    # After the last pause the broker took 129 ms to deliver (a Key_Shared dispatcher
    # replays what it could not dispatch, backing off); the entry it held was in the
    # topic before the pause began all the same.
    assert stall["count"] == len(pauses) == 3
    slack = 50_000  # a span runs from the last permit spent to the next FLOW
    resumed = max(b for a, b in pairwise(received) if b - a >= min(pauses))
    assert abs(stall["end_ts"].timestamp() * 1e6 - resumed) < slack
    assert stall["count"] * (min(pauses) - slack) <= stall["duration_us"]
    assert stall["duration_us"] <= stall["count"] * (max(pauses) + slack)
    keys = {r["key"] for r in low}
    assert f"for the {len(keys)} keys hashed to it" in stall["explanation"]
    # The same pauses starve the consumer of permits while its messages wait.
    starved = one(analyzed, name, "permit_starvation")
    assert starved["consumer_name"] == "py-stall-low"
    assert starved["count"] == len(pauses)
    assert "1 other consumers (py-stall-high)" in stall["explanation"]
    start, end = (stall[k].timestamp() * 1e6 for k in ("start_ts", "end_ts"))
    within = [
        s["subscriptions"]["py-stall-sub"]
        for s in _stats(name)
        if start < s["t_request_us"] and s["t_response_us"] < end
    ]
    assert within
    for sub in within:
        permits = {c["consumerName"]: c["availablePermits"] for c in sub["consumers"]}
        assert permits["py-stall-low"] == 0 < permits["py-stall-high"]
        assert sub["msgBacklog"] > 0


def test_a_consumer_asking_for_everything_again_is_redelivered_what_it_held(analyzed):
    """A Failover consumer asks for every unacknowledged message again (a request naming
    none): the broker sends the ten it held again. (The C++ client sends no consumer
    epoch, so the cause is told by the request's age alone; the Java client's is below.)"""
    name = "realpulsar_python_epoch"
    deliveries = Counter(tuple(r["message_id"]) for r in truth(name)["received"])
    again = sum(n - 1 for n in deliveries.values())
    finding = one(analyzed, name, "redelivery")
    assert finding["count"] == again == 10
    assert (finding["consumer_name"], finding["subscription"]) == (
        "py-epoch-consumer",
        "py-epoch-sub",
    )


def test_a_java_consumer_asking_for_everything_again_moves_its_epoch(analyzed):
    """The Java client's Failover consumer asks for every unacknowledged message again: it
    moves to a new consumer epoch (its record: the epoch before and after), and the broker
    sends again the ten it held."""
    name = "realpulsar_java_epoch"
    (moved,) = [e for e in truth(name)["events"] if e["event"] == "consumer_epoch"]
    assert moved["after"] > moved["before"]
    deliveries = Counter(tuple(r["message_id"]) for r in truth(name)["received"])
    again = sum(n - 1 for n in deliveries.values())
    finding = one(analyzed, name, "redelivery")
    assert finding["cause"] == "consumer_epoch"
    assert finding["count"] == again == 10
    assert (finding["consumer_name"], finding["subscription"]) == (
        moved["consumer_name"],
        "java-epoch-sub",
    )
    assert f"moved to consumer epoch {moved['after']} (its latest)" in finding["explanation"]


def test_batch_members_never_acknowledged_are_ack_holes_of_their_batches(analyzed):
    """Batch-index acknowledgement of every member but the third of the first two batches:
    the broker keeps those two members unacknowledged (its stats, after the consumer left,
    say the subscription's backlog is those two)."""
    name = "realpulsar_python_ack_hole"
    skipped = [r for r in truth(name)["received"] if r["action"] == "none"]
    entries = sorted({tuple(r["message_id"][:2]) for r in skipped})
    hole = one(analyzed, name, "ack_hole")
    assert hole["subscription"] == "py-hole-sub"
    assert hole["count"] == len(entries) == 2
    held = f"({len(skipped)} messages; {len(entries)} of them batches acknowledged in part)"
    assert held in hole["explanation"]
    assert "the oldest {}:{}".format(*entries[0]) in hole["explanation"]
    assert _stats(name)[-1]["subscriptions"]["py-hole-sub"]["msgBacklog"] == len(skipped)
