"""The permits analytics against the real broker's own numbers (slow: Spark over every
real-broker sample).

During each real-broker capture (tests/realbroker/) the generator sampled the broker's admin
API every 100 ms, noting when each request left and its answer came back. For every
consumer in every sample, the broker's ``availablePermits`` must be a balance pwcap's permit
timeline (jobs/permits.py) takes inside that window. The window is widened by
``IN_FLIGHT_US`` on both sides: a FLOW is on the wire before the broker applies it, a
MESSAGE after the broker spent its permits.
"""

from __future__ import annotations

import json
from bisect import bisect_left, bisect_right
from collections import defaultdict
from pathlib import Path

import pytest
from pwcap.decode.driver import decode_captures
from pwcap.jobs import permits
from pyspark.sql import functions as F

SAMPLES = Path(__file__).resolve().parent.parent / "sample_pcaps"
NAMES = sorted(p.name.removesuffix(".truth.json") for p in SAMPLES.glob("realpulsar_*.truth.json"))
IN_FLIGHT_US = 20_000

Consumer = tuple[str, str, str, str, str]  # capture, topic, subscription, name, client address


def _micros(ts: object) -> int:
    return int(ts.timestamp() * 1_000_000) if hasattr(ts, "timestamp") else int(ts)


@pytest.fixture(scope="module")
def timelines(spark, tmp_path_factory) -> dict[Consumer, list[tuple[int, int, int]]]:
    """(ts, balance, messages delivered so far) after each event of each consumer's life,
    from pwcap's permit timeline of the decoded real-broker samples."""
    out = tmp_path_factory.mktemp("realbroker") / "dataset"
    decode_captures([SAMPLES / truth(n)["capture"]["file"] for n in NAMES], out)
    frames = spark.read.parquet(str(out / "frames"))
    connections = spark.read.parquet(str(out / "connections")).select(
        "capture", "conn_id", "client_ip", "client_port"
    )
    timeline = permits.permit_timeline(frames).join(connections, ["capture", "conn_id"])
    rows = timeline.where(F.col("balance").isNotNull()).orderBy("ts", "stream_offset").collect()
    by_consumer: dict[Consumer, list[tuple[int, int, int]]] = defaultdict(list)
    delivered: dict[tuple, int] = defaultdict(int)
    for row in rows:
        key = (
            row["capture"],
            row["topic"],
            row["subscription"],
            row["consumer_name"],
            f"{row['client_ip']}:{row['client_port']}",
        )
        life = (row["capture"], row["conn_id"], row["consumer_id"])
        if row["event"] == "subscribed":
            delivered[life] = 0
        delivered[life] += row["messages"] or 0
        by_consumer[key].append((_micros(row["ts"]), row["balance"], delivered[life]))
    return by_consumer


def truth(name: str) -> dict:
    return json.loads((SAMPLES / f"{name}.truth.json").read_text())


def broker_samples(name: str):
    """(request time, answer time, topic, subscription, consumer stats) of every sample."""
    for line in (SAMPLES / truth(name)["stats"]).read_text().splitlines():
        sample = json.loads(line)
        for subscription, stats in sample["subscriptions"].items():
            for consumer in stats["consumers"]:
                yield (
                    sample["t_request_us"],
                    sample["t_response_us"],
                    sample["topic"],
                    subscription,
                    consumer,
                )


def values_within(events: list[tuple[int, int, int]], lo: int, hi: int, field: int) -> set[int]:
    """The values a field takes from just before ``lo`` to ``hi`` (0 before the first)."""
    times = [t for t, *_ in events]
    start, end = bisect_left(times, lo), bisect_right(times, hi)
    values = {events[i][field] for i in range(start, end)}
    values.add(events[start - 1][field] if start else 0)
    return values


@pytest.mark.slow
@pytest.mark.parametrize("name", NAMES)
def test_permit_balance_equals_the_brokers_available_permits_at_every_sample(name, timelines):
    capture = truth(name)["capture"]["file"]
    compared, disagreements = 0, []
    for sent, answered, topic, subscription, consumer in broker_samples(name):
        key = (
            capture,
            topic,
            subscription,
            consumer["consumerName"],
            consumer["address"].lstrip("/"),
        )
        events = timelines.get(key, [])
        lo, hi = sent - IN_FLIGHT_US, answered + IN_FLIGHT_US
        permits_seen = values_within(events, lo, hi, 1)
        compared += 1
        if consumer["availablePermits"] not in permits_seen:
            disagreements.append(
                ("availablePermits", key, sent, consumer["availablePermits"], permits_seen)
            )
    assert compared
    assert disagreements == []
