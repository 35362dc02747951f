"""Which messages were delivered more than once, why, and which were never acked:
``redeliveries``, ``redelivery_summary`` and ``unacked``.

Usage: ``spark-submit jobs/redelivery.py DATASET... -o OUT [--window 1m] [--overwrite]
[--verbose]``.

A message is identified per capture file and subscription by topic, ledger, entry,
partition and batch index (one row per message of a batch, from the ``messages`` table).
The trigger of a redelivery is what the wire shows between the previous delivery and this
one, first match wins: ``redeliver_ids`` (a REDELIVER_UNACKNOWLEDGED_MESSAGES naming its
entry), ``redeliver_all`` (one naming no ids), ``seek`` (a SEEK on the subscription),
``reconnect`` (a new SUBSCRIBE on the subscription, or the previous delivery's connection
ended), else ``none_visible`` (a broker-side redelivery, or a capture that missed it).
"""

from __future__ import annotations

import sys
from functools import reduce

from pyspark.sql import Column, DataFrame, SparkSession, Window
from pyspark.sql import functions as F

if __name__ == "__main__" and not __package__:
    # Run as a script (spark-submit jobs/redelivery.py): its relative imports are the
    # installed package's (PEP 366).
    __package__ = "pwcap.jobs"

from . import acks
from .common import (
    Tables,
    connection_ends,
    message_ids,
    micros,
    read_table,
    run_job,
    window_start,
)

SUBSCRIPTION = list(acks.SUBSCRIPTION)  # a list: Spark joins on a list of names
MESSAGE = [*SUBSCRIPTION, "ledger_id", "entry_id", "partition", "batch_index"]
# The same key as sorts and joins take it: the ids first, which they compare before the
# names and which mostly decide.
BY_ID = ["entry_id", "ledger_id", "batch_index", "partition", *SUBSCRIPTION]
REDELIVER = "REDELIVER_UNACKNOWLEDGED_MESSAGES"
TRIGGERS = ["redeliver_ids", "redeliver_all", "seek", "reconnect"]


def message_deliveries(messages: DataFrame) -> DataFrame:
    """Every delivery of every message delivered more than once to its subscription,
    numbered, with the previous one.

    Few messages are: they are found by counting deliveries per hash of the message id (an
    aggregate of one narrow column), and only theirs are sorted per message. Two ids that
    share a hash only make a candidate that the exact count below leaves out.
    """
    delivered = _deliveries(messages)
    key = F.xxhash64(*MESSAGE)
    again = delivered.groupBy(key.alias("key")).count().where(F.col("count") > 1)
    candidates = delivered.join(F.broadcast(again), key == F.col("key"), "left_semi")
    order = Window.partitionBy(*BY_ID).orderBy("ts", "stream_offset")
    message = order.rowsBetween(Window.unboundedPreceding, Window.unboundedFollowing)
    return candidates.select(
        "*",
        F.row_number().over(order).alias("delivery_number"),
        F.count("*").over(message).alias("deliveries"),
        F.lag("ts").over(order).alias("previous_ts"),
        F.lag("conn_id").over(order).alias("previous_conn_id"),
        F.min("ts").over(message).alias("first_ts"),
    ).where(F.col("deliveries") > 1)


def _deliveries(messages: DataFrame) -> DataFrame:
    """Every delivery of every message: a MESSAGE row of the ``messages`` table."""
    return messages.where((F.col("command") == "MESSAGE") & F.col("ledger_id").isNotNull()).select(
        *SUBSCRIPTION,
        "ledger_id",
        "entry_id",
        # -1, as Pulsar means it, rather than null: the id columns are join keys
        F.coalesce("partition", F.lit(-1)).alias("partition"),
        F.coalesce("batch_index", F.lit(-1)).alias("batch_index"),
        *acks.RECEIVER,
        F.coalesce("redelivery_count", F.lit(0)).alias("redelivery_count"),
        "stream_offset",
        "ts",
    )


def _trigger_rank(repeated: DataFrame, frames: DataFrame) -> DataFrame:
    """``repeated`` with ``rank``: the first kind in :data:`TRIGGERS` the wire shows between
    a delivery and the one before it (null: none of them).

    Each delivery keeps its row: the events it is checked against come beside it, as the
    times of the REDELIVER requests naming its entry and, per subscription, the few
    requests, seeks and subscribes concerning all of it, and the end of the connection the
    previous delivery went to. Matched instead as rows (a join per kind, a union, an
    aggregate back to one row per delivery and a join to the deliveries), they cost
    three shuffles of every redelivery.
    """
    requests = frames.where(F.col("command") == REDELIVER)
    entry = [*SUBSCRIPTION, "ledger_id", "entry_id"]
    named = (
        message_ids(requests.where(F.col("num_message_ids") > 0))
        .groupBy(*entry)
        .agg(F.collect_list("ts").alias("named_ts"))
    )
    # Rank in TRIGGERS of the commands that concern the whole subscription.
    for_all = requests.where(F.coalesce("num_message_ids", F.lit(0)) == 0).withColumn(
        "rank", F.lit(1)
    )
    seeks = frames.where(F.col("command") == "SEEK").withColumn("rank", F.lit(2))
    subscribes = frames.where(
        (F.col("command") == "SUBSCRIBE") & (F.col("direction") == "c2b")
    ).withColumn("rank", F.lit(3))
    subscription_wide = (
        reduce(
            DataFrame.unionByName,
            (part.select(*SUBSCRIPTION, "ts", "rank") for part in (for_all, seeks, subscribes)),
        )
        .groupBy(*SUBSCRIPTION)
        .agg(F.collect_list(F.struct("ts", "rank")).alias("wide"))
    )
    connection_end = connection_ends(frames).select(
        "capture",
        F.col("conn_id").alias("previous_conn_id"),
        F.col("capture_end").alias("previous_conn_end"),
    )

    def between(ts: Column) -> Column:
        return (ts > F.col("previous_ts")) & (ts <= F.col("ts"))

    named_seen = F.exists("named_ts", between)
    wide_rank = F.array_min(
        F.transform(F.filter("wide", lambda event: between(event["ts"])), lambda e: e["rank"])
    )
    closed = F.when(between(F.col("previous_conn_end")), F.lit(3))
    rank = F.when(named_seen, F.lit(0)).otherwise(F.least(wide_rank, closed))
    return (
        repeated.join(named, entry, "left")
        .join(subscription_wide, SUBSCRIPTION, "left")
        .join(connection_end, ["capture", "previous_conn_id"], "left")
        .withColumn("rank", rank)
    )


def redeliveries(repeated: DataFrame, frames: DataFrame) -> DataFrame:
    """Every delivery of every message delivered more than once to its subscription
    (``repeated``: :func:`message_deliveries`), with what triggered each redelivery."""
    names = F.array(*(F.lit(t) for t in TRIGGERS))
    trigger = (
        F.when(F.col("delivery_number") == 1, None)
        .when(F.col("rank").isNotNull(), names[F.col("rank")])
        .otherwise("none_visible")
    )
    return _trigger_rank(repeated, frames).select(
        *MESSAGE,
        *acks.RECEIVER,
        "ts",
        "delivery_number",
        "deliveries",
        "redelivery_count",
        trigger.alias("trigger"),
        F.when(F.col("delivery_number") > 1, micros("ts") - micros("first_ts")).alias(
            "since_first_delivery_us"
        ),
        "previous_ts",
    )


def redelivery_summary(
    messages: DataFrame, repeated: DataFrame, frames: DataFrame, window: str
) -> DataFrame:
    """Per subscription and window: deliveries, redeliveries, REDELIVER commands, ack errors.

    ``repeated``: the deliveries of messages delivered again, numbered (``redeliveries``).
    """
    key = [*SUBSCRIPTION, "window_start"]
    again = (
        repeated.where(F.col("delivery_number") > 1)
        .withColumn("window_start", window_start("ts", window))
        .groupBy(*key)
        .agg(F.count("*").alias("redeliveries"))
    )
    delivered = (
        _deliveries(messages)
        .withColumn("window_start", window_start("ts", window))
        .groupBy(*key)
        .agg(
            F.count("*").alias("deliveries"),
            F.max("redelivery_count").alias("max_redelivery_count"),
        )
        .join(again, key, "left")
    )
    with_ids = F.coalesce("num_message_ids", F.lit(0)) > 0
    requested = (
        frames.where(F.col("command") == REDELIVER)
        .withColumn("window_start", window_start("ts", window))
        .groupBy(*key)
        .agg(
            F.count(F.when(with_ids, 1)).alias("redeliver_with_ids"),
            F.count(F.when(~with_ids, 1)).alias("redeliver_all"),
        )
    )
    ack_errors = (
        frames.where((F.col("command") == "ACK") & F.col("validation_error").isNotNull())
        .withColumn("window_start", window_start("ts", window))
        .groupBy(*key, "validation_error")
        .count()
        .groupBy(*key)
        .agg(
            F.map_from_entries(F.collect_list(F.struct("validation_error", "count"))).alias(
                "ack_validation_errors"
            )
        )
    )
    zero = F.lit(0).cast("long")
    joined = delivered.join(requested, key, "full").join(ack_errors, key, "full")
    deliveries_n = F.coalesce("deliveries", zero)
    redeliveries_n = F.coalesce("redeliveries", zero)
    return joined.select(
        *key,
        deliveries_n.alias("deliveries"),
        redeliveries_n.alias("redeliveries"),
        F.when(deliveries_n > 0, redeliveries_n / deliveries_n).alias("redelivery_rate"),
        F.coalesce("max_redelivery_count", F.lit(0)).alias("max_redelivery_count"),
        F.coalesce("redeliver_with_ids", zero).alias("redeliver_with_ids"),
        F.coalesce("redeliver_all", zero).alias("redeliver_all"),
        F.coalesce("ack_validation_errors", F.create_map().cast("map<string,bigint>")).alias(
            "ack_validation_errors"
        ),
    )


def unacked(frames: DataFrame) -> DataFrame:
    """Entries whose last delivery no ack answered within the capture: ack holes
    (:func:`acks.unanswered_last_deliveries`)."""
    return acks.unanswered_last_deliveries(frames).select(
        *acks.ENTRY,
        "partition",
        "num_messages",
        *acks.RECEIVER,
        F.col("ts").alias("last_delivery_ts"),
        "deliveries",
        "redelivery_count",
    )


def tables(frames: DataFrame, messages: DataFrame, window: str) -> Tables:
    return {
        "redeliveries": redeliveries(message_deliveries(messages), frames),
        "redelivery_summary": lambda written: redelivery_summary(
            messages, written["redeliveries"], frames, window
        ),
        "unacked": unacked(frames),
    }


def build(spark: SparkSession, datasets: list[str], window: str) -> Tables:
    """Redelivered messages and their triggers, per-subscription summary, ack holes."""
    return tables(
        read_table(spark, datasets, "frames"), read_table(spark, datasets, "messages"), window
    )


if __name__ == "__main__":
    sys.exit(run_job("redelivery", build))
