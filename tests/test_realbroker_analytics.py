"""The analytics against the real broker's own numbers (slow: Spark over every real-broker
sample).

During each real-broker capture (tests/realbroker/) the generator sampled, every 100 ms,
the broker's admin API (each consumer's ``availablePermits`` and ``unackedMessages``) and
its OpenTelemetry counters (each consumer's acknowledged and redelivered messages), noting
when each request left and its answer came back. pwcap's analytics of the decoded capture
must agree:

- permits: the broker's ``availablePermits`` is a balance pwcap's permit timeline
  (jobs/permits.py) takes inside the sample's window;
- unacknowledged: its ``unackedMessages`` is a count pwcap's deliveries and the members
  their acks acknowledged (jobs/acks.py, batch members by their ack_set) take inside the
  window, on the subscriptions where the broker counts them (Shared and Key_Shared:
  acknowledged one by one);
- redeliveries: per subscription, the messages the broker counted as redelivered at a
  consumer's request equal pwcap's redeliveries triggered by a request (jobs/redelivery.py).

The window is widened by ``IN_FLIGHT_US`` on both sides: a FLOW or ACK is on the wire
before the broker applies it, a MESSAGE after the broker counted it.
"""

from __future__ import annotations

import json
from bisect import bisect_left, bisect_right
from collections import Counter, defaultdict
from pathlib import Path

import pytest
from pyspark.sql import functions as F

from pwcap.decode.driver import decode_captures
from pwcap.jobs import acks, permits, redelivery
from pwcap.jobs.common import message_ids

SAMPLES = Path(__file__).resolve().parent.parent / "sample_pcaps"
NAMES = sorted(p.name.removesuffix(".truth.json") for p in SAMPLES.glob("realpulsar_*.truth.json"))
IN_FLIGHT_US = 20_000
INDIVIDUAL_ACK_MODES = ("Shared", "Key_Shared")  # the broker counts unacked messages only there
REQUESTED = ("redeliver_ids", "redeliver_all")  # redelivery triggers that are a request

# Where the broker is known to disagree (tests/realbroker/README.md says who is right).
# The C++ client's batch-index acks: the broker counts two members twice (its
# unackedMessages ends at -2); pwcap counts each member once.
BROKER_OVERCOUNTS = {"realpulsar_python_redelivery"}
# An ACK the broker had not counted yet when it answered: 31 ms after a batch-index ACK,
# 246 ms after a transactional one (the pending ack is logged first), 35 ms after a sticky
# Key_Shared consumer's and about 1 s after the C++ client's second ACK on a loaded machine
# (in those two its unacked count of the same answer already had the ACK).
BROKER_LATE = {
    "realpulsar_java_batch_index_ack",
    "realpulsar_java_key_shared_sticky",
    "realpulsar_java_transaction",
    "realpulsar_python_ack_hole",
}


def known(names: set[str], reason: str) -> list:
    return [
        pytest.param(n, marks=pytest.mark.xfail(strict=True, reason=reason)) if n in names else n
        for n in NAMES
    ]


UNACKED = known(BROKER_OVERCOUNTS, "the broker counts two members' acks twice")
ACKED = known(BROKER_OVERCOUNTS | BROKER_LATE, "the broker counts twice, or late")

Consumer = tuple[str, str, str, str, str]  # capture, topic, subscription, name, client address
Timeline = list[tuple[int, int]]  # (time, value from then on)


def _micros(ts: object) -> int:
    return int(ts.timestamp() * 1_000_000) if hasattr(ts, "timestamp") else int(ts)


def truth(name: str) -> dict:
    return json.loads((SAMPLES / f"{name}.truth.json").read_text())


def jsonl(name: str, kind: str) -> list[dict]:
    lines = (SAMPLES / truth(name)[kind]).read_text().splitlines()
    return [json.loads(line) for line in lines]


@pytest.fixture(scope="module")
def dataset(spark, tmp_path_factory):
    out = tmp_path_factory.mktemp("realbroker") / "dataset"
    decode_captures([SAMPLES / truth(n)["capture"]["file"] for n in NAMES], out)
    read = {t: spark.read.parquet(str(out / t)) for t in ("frames", "messages", "connections")}
    address = F.concat_ws(":", "client_ip", F.col("client_port").cast("string"))
    read["consumers"] = read["connections"].select("capture", "conn_id", address.alias("address"))
    return read


def _by_consumer(rows, value: str) -> dict[Consumer, Timeline]:
    """A (time, value) timeline per consumer from rows sorted by time."""
    out: dict[Consumer, Timeline] = defaultdict(list)
    for row in rows:
        key = (row.capture, row.topic, row.subscription, row.consumer_name, row.address)
        out[key].append((_micros(row.ts), row[value]))
    return out


@pytest.fixture(scope="module")
def permit_timelines(dataset) -> dict[Consumer, Timeline]:
    """The permit balance after each event of each consumer, from jobs/permits.py."""
    timeline = permits.permit_timeline(dataset["frames"]).join(
        dataset["consumers"], ["capture", "conn_id"]
    )
    rows = timeline.where(F.col("balance").isNotNull()).orderBy("ts", "stream_offset").collect()
    return _by_consumer(rows, "balance")


@pytest.fixture(scope="module")
def deliveries(dataset) -> list:
    """Every delivery (jobs/acks.py ``answered_deliveries``: ``ack_ts`` when an ack answered
    it) with ``count``, the messages it delivered (less the batch members its ack_set says
    were acked before), and the consumer's ``address``."""
    frames = dataset["frames"]
    delivered = F.coalesce("num_messages", F.lit(1)) - F.coalesce("acked_in_batch", F.lit(0))
    counts = frames.where(F.col("command") == "MESSAGE").select(
        "capture", "conn_id", "stream_offset", delivered.alias("count")
    )
    return (
        acks.answered_deliveries(frames)
        .join(counts, ["capture", "conn_id", "stream_offset"])
        .join(dataset["consumers"], ["capture", "conn_id"])
        .collect()
    )


@pytest.fixture(scope="module")
def member_acks(dataset) -> dict[tuple, list[tuple[int, int]]]:
    """Per entry of a subscription, (time, messages) of every individual ack of it: the
    members it acknowledged first (jobs/acks.py ``member_acks``: an ack_set's cleared bits,
    or the whole entry)."""
    out: dict[tuple, list[tuple[int, int]]] = defaultdict(list)
    for row in acks.member_acks(dataset["frames"]).collect():
        key = (row.capture, row.topic, row.subscription, row.ledger_id, row.entry_id)
        out[key].append((_micros(row.ts), row.members))
    return {key: sorted(steps) for key, steps in out.items()}


def acknowledged(delivery, member_acks) -> list[tuple[int, int]]:
    """(time, messages) the acks took off a delivery, until the entry is delivered again:
    each individual ack of its entry the members it acknowledged, a cumulative ack that
    answered it all of them."""
    if delivery.ack_how == "cumulative":
        return [(_micros(delivery.ack_ts), delivery["count"])]
    start = _micros(delivery.ts)
    until = _micros(delivery.next_delivery_ts) if delivery.next_delivery_ts else None
    key = (delivery.capture, delivery.topic, delivery.subscription)
    steps = member_acks.get((*key, delivery.ledger_id, delivery.entry_id), [])
    return [(t, n) for t, n in steps if n and start <= t and (until is None or t < until)]


@pytest.fixture(scope="module")
def unacked_timelines(dataset, deliveries, member_acks) -> dict[Consumer, Timeline]:
    """Each consumer's unacknowledged messages over time: a delivery's messages count from
    the delivery until acks acknowledge them (an ack_set a few members at a time), or
    until the consumer asks for the entry again (REDELIVER_UNACKNOWLEDGED_MESSAGES naming
    it, or naming none) or closes."""
    frames = dataset["frames"]
    consumer = ["capture", "conn_id", "consumer_id"]
    requests = frames.where(F.col("command") == redelivery.REDELIVER)
    named = message_ids(requests.where(F.col("num_message_ids") > 0)).select(
        *consumer, "ledger_id", "entry_id", "ts"
    )
    whole = requests.where(F.coalesce("num_message_ids", F.lit(0)) == 0).select(*consumer, "ts")
    closed = frames.where(
        (F.col("command") == "CLOSE_CONSUMER") & (F.col("direction") == "c2b")
    ).select(*consumer, "ts")
    asked: dict[tuple, list[int]] = defaultdict(list)
    for row in named.collect():
        asked[(row.capture, row.conn_id, row.consumer_id, row.ledger_id, row.entry_id)].append(
            _micros(row.ts)
        )
    ends: dict[tuple, list[int]] = defaultdict(list)
    for row in whole.union(closed).collect():
        ends[(row.capture, row.conn_id, row.consumer_id)].append(_micros(row.ts))
    changes: dict[Consumer, list[tuple[int, int]]] = defaultdict(list)
    for d in deliveries:
        key = (d.capture, d.topic, d.subscription, d.consumer_name, d.address)
        start = _micros(d.ts)
        own = (d.capture, d.conn_id, d.consumer_id)
        leaves = [t for t in asked[(*own, d.ledger_id, d.entry_id)] + ends[own] if t >= start]
        left = d["count"]
        changes[key].append((start, left))
        for t, n in acknowledged(d, member_acks):
            if leaves and t >= min(leaves):
                break
            changes[key].append((t, -min(n, left)))
            left -= min(n, left)
        if leaves and left:
            changes[key].append((min(leaves), -left))
    out: dict[Consumer, Timeline] = {}
    for key, steps in changes.items():
        total, timeline = 0, []
        for ts, step in sorted(steps):
            total += step
            timeline.append((ts, total))
        out[key] = timeline
    return out


@pytest.fixture(scope="module")
def requested_redeliveries(dataset) -> Counter:
    """Redeliveries per (capture, topic, subscription) that a consumer's request triggered."""
    frames, messages = dataset["frames"], dataset["messages"]
    found = redelivery.redeliveries(redelivery.message_deliveries(messages), frames)
    rows = found.where(F.col("trigger").isin(*REQUESTED)).collect()
    return Counter((r.capture, r.topic, r.subscription) for r in rows)


def broker_consumers(name: str):
    """(request time, answer time, topic, subscription, its type, consumer stats) of every
    consumer in every admin API sample."""
    for sample in jsonl(name, "stats"):
        for subscription, stats in sample["subscriptions"].items():
            for consumer in stats["consumers"]:
                yield (
                    sample["t_request_us"],
                    sample["t_response_us"],
                    sample["topic"],
                    subscription,
                    stats["type"],
                    consumer,
                )


def values_within(events: Timeline, lo: int, hi: int) -> set[int]:
    """The values a timeline takes from just before ``lo`` to ``hi`` (0 before the first)."""
    times = [t for t, _ in events]
    start, end = bisect_left(times, lo), bisect_right(times, hi)
    values = {events[i][1] for i in range(start, end)}
    values.add(events[start - 1][1] if start else 0)
    return values


def compare(name: str, timelines: dict[Consumer, Timeline], field: str, modes=None):
    """How many consumer samples were compared, and those outside pwcap's values."""
    capture = truth(name)["capture"]["file"]
    compared, disagreements = 0, []
    for sent, answered, topic, subscription, kind, consumer in broker_consumers(name):
        if modes is not None and kind not in modes:
            continue
        address = consumer["address"].lstrip("/")
        key = (capture, topic, subscription, consumer["consumerName"], address)
        assert key in timelines, f"the broker's consumer {key} is not in pwcap's timelines"
        seen = values_within(timelines[key], sent - IN_FLIGHT_US, answered + IN_FLIGHT_US)
        compared += 1
        if consumer[field] not in seen:
            disagreements.append((key, sent, consumer[field], sorted(seen)))
    return compared, disagreements


@pytest.mark.slow
@pytest.mark.parametrize("name", NAMES)
def test_permit_balance_equals_the_brokers_available_permits_at_every_sample(
    name, permit_timelines
):
    compared, disagreements = compare(name, permit_timelines, "availablePermits")
    assert compared
    assert disagreements == []


@pytest.mark.slow
@pytest.mark.parametrize("name", UNACKED)
def test_unacknowledged_messages_equal_the_brokers_at_every_sample(name, unacked_timelines):
    _, disagreements = compare(name, unacked_timelines, "unackedMessages", INDIVIDUAL_ACK_MODES)
    assert disagreements == []


def broker_redeliveries(name: str) -> Counter:
    """Messages the broker counted as redelivered at a consumer's request, per (capture,
    topic, subscription): each consumer's last count (a count that drops is a new consumer
    with the same id and name, after a reconnect), summed over the subscription's."""
    capture = truth(name)["capture"]["file"]
    last: dict[tuple, list[int]] = defaultdict(list)
    for sample in jsonl(name, "counters"):
        for c in sample["consumers"]:
            lives = last[(c["topic"], c["subscription"], c["consumer_name"], c["consumer_id"])]
            if not lives or c["redelivered"] < lives[-1]:
                lives.append(c["redelivered"])
            lives[-1] = max(lives[-1], c["redelivered"])
    out: Counter = Counter()
    for (topic, subscription, _, _), lives in last.items():
        out[(capture, topic, subscription)] += sum(lives)
    return +out


@pytest.mark.slow
@pytest.mark.parametrize("name", NAMES)
def test_requested_redeliveries_equal_the_brokers_count(name, requested_redeliveries):
    """On the subscriptions where the broker keeps pending acks (Shared, Key_Shared): on an
    Exclusive or Failover one it rewinds the cursor and counts none
    (``Consumer.redeliverUnacknowledgedMessages`` adds to its counter only what it takes
    off its pending acks)."""
    capture = truth(name)["capture"]["file"]
    counted = {
        (capture, topic, subscription)
        for _, _, topic, subscription, kind, _ in broker_consumers(name)
        if kind in INDIVIDUAL_ACK_MODES
    }
    ours = Counter({k: n for k, n in requested_redeliveries.items() if k in counted})
    assert ours == broker_redeliveries(name)


@pytest.fixture(scope="module")
def acked_timelines(deliveries, member_acks) -> dict[tuple, dict[int, Timeline]]:
    """Per (capture, topic, subscription, consumer name, consumer id) and connection: the
    messages acknowledged so far, counted at the acks that acknowledged each delivery's."""
    steps: dict[tuple, dict[int, list[tuple[int, int]]]] = defaultdict(lambda: defaultdict(list))
    for d in deliveries:
        key = (d.capture, d.topic, d.subscription, d.consumer_name, d.consumer_id)
        life = steps[key][d.conn_id]
        life.append((_micros(d.ts), 0))  # the consumer's connection is alive from here
        left = d["count"]
        for t, n in acknowledged(d, member_acks):
            life.append((t, min(n, left)))
            left -= min(n, left)
    out: dict[tuple, dict[int, Timeline]] = {}
    for key, lives in steps.items():
        out[key] = {}
        for conn, changes in lives.items():
            total, timeline = 0, []
            for ts, step in sorted(changes):
                total += step
                timeline.append((ts, total))
            out[key][conn] = timeline
    return out


@pytest.mark.slow
@pytest.mark.parametrize("name", ACKED)
def test_acknowledged_messages_equal_the_brokers_count_at_every_sample(name, acked_timelines):
    """The broker counts the messages an ack takes off the acking consumer's pending acks,
    so only on subscriptions that keep them (Shared, Key_Shared: in Pulsar 4.2.4 an ack on
    an Exclusive or Failover subscription counts 0), and per connection (a consumer that
    reconnects starts again from 0): the sample is compared with the latest connection of
    that consumer which had received something by the sample's answer."""
    capture = truth(name)["capture"]["file"]
    kinds = {
        (sample["topic"], subscription): stats["type"]
        for sample in jsonl(name, "stats")
        for subscription, stats in sample["subscriptions"].items()
    }
    compared, disagreements = 0, []
    for sample in jsonl(name, "counters"):
        lo, hi = sample["t_request_us"] - IN_FLIGHT_US, sample["t_response_us"] + IN_FLIGHT_US
        for c in sample["consumers"]:
            if kinds.get((c["topic"], c["subscription"])) not in INDIVIDUAL_ACK_MODES:
                continue
            key = (capture, c["topic"], c["subscription"], c["consumer_name"], c["consumer_id"])
            started = [t for t in acked_timelines.get(key, {}).values() if t[0][0] <= hi]
            if not started:  # nothing delivered yet: nothing acknowledged
                assert c["acks"] == 0, (key, sample["t_request_us"])
                continue
            life = max(started, key=lambda t: t[0][0])
            compared += 1
            seen = values_within(life, lo, hi)
            if c["acks"] not in seen:
                disagreements.append((key, sample["t_request_us"], c["acks"], sorted(seen)))
    assert disagreements == []


BATCH_INDEX_ACKED = (  # samples whose consumers acknowledge batch members with ack_sets
    "realpulsar_go_batch_index_ack",
    "realpulsar_java_batch_index_ack",
    "realpulsar_python_ack_hole",
    "realpulsar_python_redelivery",
)
ACK_SENT_WITHIN_US = 1_000_000  # the clients group acks for 100 ms before sending them


def recorded_answers(name: str) -> dict[tuple, list[int | None]]:
    """From the client's record, per (capture, topic, subscription, consumer name,
    ledger, entry): each delivery of the entry to that consumer in turn (the members it
    received, until one comes again or with another redelivery count), and when the
    application acknowledged the last of them before the entry came again (None: one
    never was)."""
    record = truth(name)
    capture = record["capture"]["file"]
    runs: dict[tuple, list[tuple[int, set[int], int]]] = defaultdict(list)
    for r in sorted(record["received"], key=lambda r: r["receive_time_us"]):
        ledger, entry, _, index = r["message_id"]
        key = (capture, r["topic"], r["subscription"], r["consumer_name"], ledger, entry)
        mine = runs[key]
        if not mine or index in mine[-1][1] or r["redelivery_count"] != mine[-1][2]:
            mine.append((r["receive_time_us"], set(), r["redelivery_count"]))
        mine[-1][1].add(index)
    starts: dict[tuple, list[int]] = defaultdict(list)  # every delivery of an entry
    for (_, topic, subscription, _, ledger, entry), mine in runs.items():
        starts[(topic, subscription, ledger, entry)] += [start for start, _, _ in mine]
    acked: dict[tuple, list[int]] = defaultdict(list)
    for a in record["acks"]:
        assert a["type"] == "individual", a
        ledger, entry, _, index = a["message_id"]
        acked[(a["topic"], a["subscription"], ledger, entry, index)].append(a["t_us"])
    out: dict[tuple, list[int | None]] = {}
    for key, mine in runs.items():
        _, topic, subscription, _, ledger, entry = key
        out[key] = []
        for start, members, _ in mine:
            until = min(
                (t for t in starts[(topic, subscription, ledger, entry)] if t > start), default=None
            )
            times = []
            for index in members:
                ts = [t for t in acked[(topic, subscription, ledger, entry, index)] if t >= start]
                times.append(min((t for t in ts if until is None or t < until), default=None))
            out[key].append(None if None in times else max(times))
    return out


@pytest.mark.slow
@pytest.mark.parametrize("name", BATCH_INDEX_ACKED)
def test_a_batch_is_answered_by_the_ack_of_its_last_member(name, deliveries):
    """``answered_deliveries`` on batch-index acks: a delivery is answered when the
    client's record says the application acknowledged every member it delivered, by the
    first ACK on the wire after the last of them, within the client's ack grouping."""
    capture = truth(name)["capture"]["file"]
    ours: dict[tuple, list] = defaultdict(list)
    for d in sorted((d for d in deliveries if d.capture == capture), key=lambda d: d.ts):
        key = (capture, d.topic, d.subscription, d.consumer_name, d.ledger_id, d.entry_id)
        ours[key].append(_micros(d.ack_ts) if d.ack_ts else None)
    expected = recorded_answers(name)
    assert ours.keys() == expected.keys()
    for key, answers in expected.items():
        assert len(ours[key]) == len(answers), key
        for acked, last in zip(ours[key], answers, strict=True):
            assert (acked is None) == (last is None), (key, acked, last)
            assert last is None or last <= acked < last + ACK_SENT_WITHIN_US, (key, acked, last)
