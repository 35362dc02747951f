"""The analytics, run once through ``pwcap analyze`` with real Spark on the decoded sample
captures, compared with what the broker journal and the client recorded (truth files)."""

from __future__ import annotations

import json
from collections import Counter, defaultdict
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from pwcap.cli import analyze as cli_analyze
from pwcap.jobs import latency, permits, redelivery
from pwcap.jobs.common import read_table, spark_type, write_tables
from pwcap.tables.analytics import ANALYTICS
from tests.test_pulsar_samples import AS_THE_CLIENT_SAW, SAMPLES, WITH_TRUTH

TABLES = list(ANALYTICS)


def truth(name: str) -> dict:
    return json.loads((SAMPLES / f"{name}.truth.json").read_text())


# Kafka 0.7 scenarios recorded as they are (not derived by cutting bytes out).
KAFKA_RECORDINGS = sorted(
    p.name.removesuffix(".truth.json")
    for p in SAMPLES.glob("kafka07_*.truth.json")
    if "derived_from" not in json.loads(p.read_text())
)
REDELIVERY_SCENARIOS = [
    name
    for name in AS_THE_CLIENT_SAW
    if any(len(counts) > 1 for counts in truth(name)["delivery_counts"].values())
]


def journal(name: str) -> list[dict]:
    path = SAMPLES / f"{name}.broker.jsonl"
    return [json.loads(line) for line in path.read_text().splitlines() if line]


def rows_of(analyzed: dict, table: str, name: str) -> list[dict]:
    return [r for r in analyzed["rows"][table] if r["capture"] == f"{name}.pcap"]


def expected_request_pairs(frames: dict[str, dict[str, int]]) -> Counter:
    """Requests the capture holds, by command: each one answered once in a clean capture."""
    c2b, b2c = frames["c2b"], frames["b2c"]
    expected = Counter({c: n for c, n in c2b.items() if c in latency.PULSAR_CLIENT_REQUESTS})
    expected["PING"] = c2b.get("PING", 0) + b2c.get("PING", 0)
    expected["ACK"] = b2c.get("ACK_RESPONSE", 0)
    return +expected


def test_time_columns_are_written_without_a_dictionary(analyzed):
    """Microsecond times are nearly all distinct: a dictionary for them is wasted work."""
    checked = 0
    for table, schema in analyzed["schemas"].items():
        times = {f.name for f in schema.fields if f.dataType.typeName() == "timestamp"}
        for path in (analyzed["path"] / table).glob("*.parquet"):
            meta = pq.ParquetFile(path).metadata
            for group in range(meta.num_row_groups):
                for index in range(meta.num_columns):
                    column = meta.row_group(group).column(index)
                    dictionary = {"PLAIN_DICTIONARY", "RLE_DICTIONARY"} & set(column.encodings)
                    if column.path_in_schema in times:
                        assert not dictionary, (table, column.path_in_schema)
                        checked += 1
    assert checked > 0


@pytest.mark.parametrize("name", WITH_TRUTH)
def test_every_request_and_send_is_paired_once_with_positive_latency(analyzed, name):
    pairs = [
        r
        for r in rows_of(analyzed, "latency_pairs", name)
        if r["kind"] not in (latency.PUBLISH_DELIVERY, latency.DELIVERY_ACK)
    ]
    frames = truth(name)["frames"]
    assert Counter(r["kind"] for r in pairs) == expected_request_pairs(frames)
    # A problem scenario's broker refuses requests (ERROR, or a response carrying an error
    # code, as its journal says) or leaves sends unanswered.
    refused = frames["b2c"].get("ERROR", 0) + frames["b2c"].get("SEND_ERROR", 0)
    refused += sum(
        r["dir"] == "b2c" and "error" in r and r["cmd"] not in ("ERROR", "SEND_ERROR")
        for r in journal(name)
    )
    answered_sends = frames["b2c"].get("SEND_RECEIPT", 0) + frames["b2c"].get("SEND_ERROR", 0)
    unanswered = frames["c2b"].get("SEND", 0) - answered_sends
    outcomes = Counter(r["outcome"].split(":")[0] for r in pairs)
    assert outcomes == +Counter(
        success=len(pairs) - refused - unanswered, error=refused, unanswered=unanswered
    )
    assert all(r["latency_us"] > 0 for r in pairs if r["outcome"] != "unanswered")


@pytest.mark.parametrize("name", KAFKA_RECORDINGS)
def test_kafka_requests_pair_in_order_with_their_responses(analyzed, name):
    """0.7 has no correlation id: a connection answers its requests in order, PRODUCE never."""
    frames = truth(name)["frames"]
    pairs = rows_of(analyzed, "latency_pairs", name)
    answered = Counter(r["kind"] for r in pairs if r["outcome"] != "unanswered")
    unanswered = Counter(r["kind"] for r in pairs if r["outcome"] == "unanswered")
    requests = latency.KAFKA_REQUESTS
    assert answered == +Counter({k: frames["b2c"].get(k, 0) for k in requests})
    assert unanswered == +Counter(
        {k: frames["c2b"].get(k, 0) - frames["b2c"].get(k, 0) for k in requests}
    )
    assert all(r["latency_us"] > 0 for r in pairs if r["outcome"] != "unanswered")


def test_chunks_and_batches_pair_once_per_send_frame_not_per_message(analyzed):
    """Chunks of one message share a sequence id; a batch covers several: neither may
    multiply or merge pairs."""
    for name in ("pulsar_chunked", "pulsar_batching_compression"):
        sends = [r for r in rows_of(analyzed, "latency_pairs", name) if r["kind"] == "SEND"]
        facts = truth(name)
        assert len(sends) == facts["frames"]["c2b"]["SEND"] != len(facts["sent"])


@pytest.mark.parametrize("name", WITH_TRUTH)
def test_publish_to_delivery_pairs_each_received_message_once_per_subscription(analyzed, name):
    pairs = [
        r for r in rows_of(analyzed, "latency_pairs", name) if r["kind"] == latency.PUBLISH_DELIVERY
    ]
    received = {(m["subscription"], tuple(m["message_id"])) for m in truth(name)["received"]}
    assert len(pairs) == len(received)
    assert all(r["latency_us"] > 0 for r in pairs)


def delivery_outcomes(facts: dict) -> Counter:
    """From the journal: each delivery acked before the entry's next delivery, superseded by
    that redelivery, or never acked (the sample clients ack individually)."""
    acks: dict[tuple[int, int], list[int]] = defaultdict(list)
    for ack in facts["acks"]:
        assert ack["ack_type"] == 0, "individual acks only"
        for message_id in ack["message_ids"]:
            acks[tuple(message_id[:2])].append(ack["t_us"])
    times: dict[tuple[int, int], list[int]] = defaultdict(list)
    for delivery in facts["deliveries"]:
        times[tuple(delivery["message_ids"][0][:2])].append(delivery["t_us"])
    outcomes: Counter = Counter()
    for entry, delivered in times.items():
        for start, end in zip(delivered, [*delivered[1:], None], strict=True):
            if any(start <= t and (end is None or t < end) for t in acks[entry]):
                outcomes["success"] += 1
            else:
                outcomes["unanswered" if end is None else "redelivered"] += 1
    return outcomes


@pytest.mark.parametrize("name", WITH_TRUTH)
def test_every_delivery_is_paired_with_the_ack_that_answered_it(analyzed, name):
    pairs = [r for r in rows_of(analyzed, "latency_pairs", name) if r["kind"] == "delivery_ack"]
    assert Counter(r["outcome"] for r in pairs) == delivery_outcomes(truth(name))
    assert all(r["latency_us"] > 0 for r in pairs if r["outcome"] == "success")


def ack_holes(facts: dict) -> set[tuple[int, int]]:
    """Entries whose last receipt by the application was not acknowledged."""
    last: dict[tuple[int, int], str] = {}
    for message in facts["received"]:
        last[tuple(message["message_id"][:2])] = message["action"]
    return {entry for entry, action in last.items() if action != "ack"}


def test_slow_consumer_starvation_matches_the_brokers_zero_permit_record(analyzed):
    facts = truth("pulsar_slow_consumer")
    first_flow = min(f["t_us"] for f in facts["flows"])
    # The broker also counts subscription -> first FLOW; the job does not call it starvation.
    broker = [z for z in facts["zero_permit_intervals"] if z["end_us"] != first_flow]
    spans = rows_of(analyzed, "starvation_intervals", "pulsar_slow_consumer")
    assert len(spans) == len(broker)
    total, broker_total = sum(s["duration_us"] for s in spans), sum(z["length_us"] for z in broker)
    assert abs(total - broker_total) <= 0.03 * broker_total
    assert {s["ended_by"] for s in spans} == {"flow"}
    # Messages waited behind the queue of 4 until the backlog ran out: the broker answered
    # every FLOW but the last at once.
    delivered = [d["t_us"] for d in facts["deliveries"]]
    waiting = [
        z for z in broker if any(0 < t - z["end_us"] <= permits.PROMPT_US for t in delivered)
    ]
    assert sum(s["backlog_waiting"] for s in spans) == len(waiting) == len(broker) - 1


def test_slow_consumer_summary_infers_its_queue_size_and_refills(analyzed):
    facts = truth("pulsar_slow_consumer")
    (summary,) = rows_of(analyzed, "permit_summary", "pulsar_slow_consumer")
    flows = [f["permits"] for f in sorted(facts["flows"], key=lambda f: f["t_us"])]
    assert summary["receiver_queue_size"] == flows[0]
    assert summary["refill_permits"] == Counter(flows[1:]).most_common(1)[0][0]
    assert summary["permits_granted"] == sum(flows)
    assert summary["messages_delivered"] == sum(d["meta_num_messages"] for d in facts["deliveries"])
    assert summary["starved_fraction"] > 0.5
    assert "slow-sub" in printed_section(analyzed, "Most-starved consumers")


@pytest.mark.parametrize("name", WITH_TRUTH)
def test_permit_summary_counts_every_grant_and_delivery(analyzed, name):
    facts = truth(name)
    summaries = rows_of(analyzed, "permit_summary", name)
    assert sum(s["permits_granted"] for s in summaries) == sum(f["permits"] for f in facts["flows"])
    delivered = sum(d["meta_num_messages"] for d in facts["deliveries"])
    assert sum(s["messages_delivered"] for s in summaries) == delivered
    assert all(s["deliveries_beyond_permits"] == 0 for s in summaries)


def expected_trigger(facts: dict, entry: tuple[int, int]) -> str:
    """What the wire shows before a redelivery, from the journal's REDELIVER requests."""
    for request in facts["redeliver_requests"]:
        if entry in {tuple(i[:2]) for i in request.get("message_ids", [])}:
            return "redeliver_ids"
    if any("message_ids" not in request for request in facts["redeliver_requests"]):
        return "redeliver_all"
    assert facts["frames"]["c2b"].get("SEEK"), "scenario with no visible trigger"
    return "seek"


@pytest.mark.parametrize("name", REDELIVERY_SCENARIOS)
def test_redelivered_messages_and_counts_match_the_record(analyzed, name):
    facts = truth(name)
    rows = rows_of(analyzed, "redeliveries", name)
    ours: dict[tuple[int, int], list[dict]] = defaultdict(list)
    for r in sorted(rows, key=lambda r: r["delivery_number"]):
        ours[(r["ledger_id"], r["entry_id"])].append(r)
    journal = {
        tuple(map(int, key.split(":"))): counts
        for key, counts in facts["delivery_counts"].items()
        if len(counts) > 1
    }
    client = Counter(tuple(m["message_id"][:2]) for m in facts["received"])
    assert set(ours) == set(journal)
    for entry, deliveries in ours.items():
        assert [d["redelivery_count"] for d in deliveries] == journal[entry]
        assert len(deliveries) == client[entry] == deliveries[0]["deliveries"]
        assert deliveries[0]["trigger"] is None
        assert {d["trigger"] for d in deliveries[1:]} == {expected_trigger(facts, entry)}
        assert all(d["since_first_delivery_us"] > 0 for d in deliveries[1:])


def redelivered_messages(facts: dict) -> int:
    """Messages delivered again: every delivery of an entry after its first, times its size."""
    seen: set[tuple[int, int]] = set()
    again = 0
    for delivery in facts["deliveries"]:
        entry = tuple(delivery["message_ids"][0][:2])
        if entry in seen:
            again += delivery["meta_num_messages"]
        seen.add(entry)
    return again


def printed_section(analyzed: dict, title: str) -> str:
    return analyzed["out"].getvalue().split(f"{title}:\n")[1].split(":\n")[0]


@pytest.mark.parametrize("name", WITH_TRUTH)
def test_redelivery_summary_counts_redeliveries_and_requests(analyzed, name):
    facts = truth(name)
    summary = rows_of(analyzed, "redelivery_summary", name)
    assert sum(s["redeliveries"] for s in summary) == redelivered_messages(facts)
    with_ids = sum(1 for r in facts["redeliver_requests"] if "message_ids" in r)
    assert sum(s["redeliver_with_ids"] for s in summary) == with_ids
    assert sum(s["redeliver_all"] for s in summary) == len(facts["redeliver_requests"]) - with_ids


def test_the_most_redelivered_subscriptions_are_printed_with_their_counts(analyzed):
    """The summary lists the subscriptions with the most redeliveries over every capture
    (a sample's own may rank below the top ones as samples are added)."""
    totals: Counter = Counter()
    for row in analyzed["rows"]["redelivery_summary"]:
        totals[f"{row['topic']} / {row['subscription']}"] += row["redeliveries"]
    section = printed_section(analyzed, "Most-redelivered subscriptions").splitlines()
    printed = [line for line in section if " redeliveries of " in line]
    listed = dict(line.strip().rsplit(": ", 1) for line in printed)
    ranked = sorted((n for n in totals.values() if n > 0), reverse=True)[: cli_analyze.TOP]
    assert [int(text.split()[0]) for text in listed.values()] == ranked
    assert all(totals[name] == int(text.split()[0]) for name, text in listed.items())


@pytest.mark.parametrize("name", WITH_TRUTH)
def test_unacked_entries_are_those_the_application_never_acked(analyzed, name):
    holes = {(r["ledger_id"], r["entry_id"]) for r in rows_of(analyzed, "unacked", name)}
    assert holes == ack_holes(truth(name))


def test_a_capture_without_redelivery_or_starvation_gives_empty_typed_tables(
    spark, sample_dataset, analyzed, tmp_path
):
    """Run on plain alone: empty tables, with the schema a full run writes."""
    capture = read_table(spark, [str(sample_dataset)], "frames").where(
        "capture = 'pulsar_plain.pcap'"
    )
    messages = read_table(spark, [str(sample_dataset)], "messages").where(
        "capture = 'pulsar_plain.pcap'"
    )
    tables = {**permits.tables(capture), **redelivery.tables(capture, messages, "1 minutes")}
    empty = ["starvation_intervals", "redeliveries", "unacked"]
    written = write_tables({name: tables[name] for name in empty}, str(tmp_path))
    for name, path in written.items():
        back = spark.read.parquet(path)
        assert back.count() == 0
        assert back.schema == analyzed["schemas"][name]
    # timestamps as Parquet's microsecond type (what DuckDB and pyarrow read natively)
    folder = Path(written["starvation_intervals"].removeprefix("file:"))
    start = pq.read_schema(next(folder.glob("*.parquet")))
    assert start.field("start_ts").type == pa.timestamp("us", tz="UTC")


def test_every_analytics_table_has_the_columns_and_types_its_contract_documents(analyzed):
    """tables/analytics.py is what docs/schema.md tells users: the written tables match it."""
    assert sorted(analyzed["schemas"]) == sorted(ANALYTICS)
    for name, columns in ANALYTICS.items():
        written = [(f.name, f.dataType) for f in analyzed["schemas"][name].fields]
        assert written == [(c.name, spark_type(c.type)) for c in columns], name
