"""The capture's problems, named, ranked and explained: ``findings``.

Usage: ``spark-submit jobs/findings.py DATASET... -o OUT [--window 1m] [--overwrite]
[--verbose]``.

Each kind of problem (``FINDING_KINDS`` in ``tables/analytics.py``, which gives its
definition and threshold) is one function of the package ``jobs/problems/``, a module per
family (permits, redeliveries, acknowledgements, producers, connections, chunks, TCP),
reading the dataset and the analytics tables the other jobs write (``pwcap analyze``
hands it those it wrote; run alone, this job computes them). Each finding row names its
entities, quotes the numbers that prove it in one sentence, and lists the tables holding
its evidence rows; the rows are ranked by severity, then by the share of the traffic
concerned.
"""

from __future__ import annotations

import sys
from collections.abc import Callable, Mapping
from functools import partial, reduce

from pyspark.sql import DataFrame, SparkSession, Window
from pyspark.sql import functions as F

if __name__ == "__main__" and not __package__:
    # Run as a script (spark-submit jobs/findings.py): its relative imports are the
    # installed package's (PEP 366).
    __package__ = "pwcap.jobs"

from ..tables.analytics import SEVERITIES
from . import acks, latency, permits, redelivery
from .common import Tables, at_once, conform, connection_ends, read_table, run_job
from .problems.acknowledgements import ack_holes, acks_lost_on_reconnect
from .problems.base import Inputs, endpoint
from .problems.chunks import chunk_problems
from .problems.connections import connect_storms, errors, lookup_storms, topic_unloads
from .problems.key_shared import key_shared_stalls
from .problems.producers import send_errors, sends_unreceipted, slow_receipts
from .problems.redelivered import redeliveries_by_cause, redelivery_storms
from .problems.starvation import permit_starvation
from .problems.tcp import slow_brokers, tcp_problems

KINDS: list[Callable[[Inputs], DataFrame]] = [
    permit_starvation,
    key_shared_stalls,
    redeliveries_by_cause,
    redelivery_storms,
    acks_lost_on_reconnect,
    ack_holes,
    sends_unreceipted,
    slow_receipts,
    send_errors,
    errors,
    connect_storms,
    lookup_storms,
    topic_unloads,
    chunk_problems,
    tcp_problems,
    slow_brokers,
]


def findings(data: Inputs) -> DataFrame:
    """Every finding of every kind, ranked: severity first, then score, then time.

    Each kind is its own small query, all run at once and their few rows kept: one query
    of them all was a plan too large to compile quickly, run one stage at a time."""
    kinds = [partial(_found, kind, data) for kind in KINDS]
    parts = at_once(kinds)
    union = reduce(partial(DataFrame.unionByName, allowMissingColumns=True), parts)
    endpoints = F.broadcast(
        data.connections.select(
            "capture",
            "conn_id",
            endpoint("client_ip", "client_port").alias("conn_client"),
            endpoint("server_ip", "server_port").alias("conn_broker"),
        )
    )
    severity = F.array_position(F.array(*(F.lit(s) for s in SEVERITIES)), F.col("severity"))
    # Findings are few: ranked in one partition (jobs/log4j2.properties quiets the warning).
    order = Window.partitionBy(F.lit(0)).orderBy(
        severity, F.desc("score"), "start_ts", "kind", "explanation"
    )
    ranked = (
        union.join(endpoints, ["capture", "conn_id"], "left")
        .withColumn("client", F.coalesce("client", "conn_client"))
        .withColumn("broker", F.coalesce("broker", "conn_broker"))
        .withColumn("rank", F.row_number().over(order))
    )
    return conform(ranked, "findings")


def _found(kind: Callable[[Inputs], DataFrame], data: Inputs) -> DataFrame:
    """The rows of one kind, computed now and kept (they are few)."""
    return kind(data).localCheckpoint(eager=True)


def inputs(
    frames: DataFrame, messages: DataFrame, connections: DataFrame, window: str
) -> dict[str, DataFrame]:
    """The analytics tables the findings read, computed from the dataset (the job run
    alone; ``pwcap analyze`` reads back those it wrote instead)."""
    answered, unanswered = acks.answered_deliveries(frames), latency.unanswered_requests(frames)
    pairs = latency.latency_pairs(frames, messages, connections, answered, unanswered)
    timeline = permits.permit_timeline(frames)
    ends = connection_ends(frames)
    intervals = permits.starvation_intervals(timeline, ends)
    again = redelivery.redeliveries(redelivery.message_deliveries(messages), frames)
    return {
        "latency_pairs": pairs,
        "starvation_intervals": intervals,
        "permit_summary": permits.permit_summary(timeline, intervals, ends),
        "redeliveries": again,
        "redelivery_summary": redelivery.redelivery_summary(messages, again, frames, window),
        "unacked": redelivery.unacked(frames),
    }


def tables(
    frames: DataFrame,
    messages: DataFrame,
    connections: DataFrame,
    analytics: Mapping[str, DataFrame],
) -> Tables:
    return {"findings": findings(Inputs(frames, messages, connections, analytics))}


def build(spark: SparkSession, datasets: list[str], window: str) -> Tables:
    """The capture's problems, named, ranked and explained."""
    frames, messages, connections = (
        read_table(spark, datasets, name) for name in ("frames", "messages", "connections")
    )
    analytics = inputs(frames, messages, connections, window)
    return tables(frames, messages, connections, analytics)


if __name__ == "__main__":
    sys.exit(run_job("findings", build))
