"""Which acknowledgement, if any, answered each delivered entry.

Shared by the latency job (delivery -> ack) and the redelivery job (ack holes). A delivery
is one MESSAGE frame: an entry (``ledger_id``, ``entry_id``) of ``num_messages`` messages
sent to a consumer of a subscription. It is answered by the first ACK after it, on the same
topic and subscription and before the entry is delivered again, that either

- names the entry individually (any batch index: the C++ client acks a whole batch once,
  with batch index -1), or
- is cumulative at or beyond the entry's position.

Acks are matched per subscription rather than per connection so an ack sent after a
reconnect (new consumer id, same subscription) still answers the delivery; and per capture
file, because one dataset may hold captures of unrelated clusters with the same names.
"""

from __future__ import annotations

from pwcap.jobs.common import message_ids
from pyspark.sql import Column, DataFrame, Window
from pyspark.sql import functions as F

SUBSCRIPTION = ("capture", "topic", "subscription")
ENTRY = (*SUBSCRIPTION, "ledger_id", "entry_id")


def deliveries(frames: DataFrame) -> DataFrame:
    """Every delivered entry, with the time the same entry was next delivered (if ever)."""
    again = Window.partitionBy(*ENTRY).orderBy("ts", "stream_offset")
    return (
        frames.where((F.col("command") == "MESSAGE") & F.col("ledger_id").isNotNull())
        .select(
            "conn_id",
            "consumer_id",
            "consumer_name",
            *ENTRY,
            "partition",
            "redelivery_count",
            F.coalesce("num_messages", F.lit(1)).alias("num_messages"),
            "stream_offset",
            "ts",
        )
        .withColumn("next_delivery_ts", F.lead("ts").over(again))
        .withColumn("delivery_number", F.row_number().over(again))
    )


def acks(frames: DataFrame) -> DataFrame:
    """One row per message id an ACK names."""
    return message_ids(frames.where(F.col("command") == "ACK")).select(
        *ENTRY,
        "batch_index",
        F.coalesce(F.col("ack_type"), F.lit("Individual")).alias("ack_type"),
        "validation_error",
        "ts",
    )


def answered_deliveries(frames: DataFrame) -> DataFrame:
    """:func:`deliveries` plus ``ack_ts`` (null when unanswered), ``ack_how``
    (``individual`` / ``cumulative``) and the answering ack's ``validation_error``."""
    delivered = deliveries(frames)
    listed = acks(frames)
    individual = _first_individual_ack(delivered, listed.where(F.col("ack_type") != "Cumulative"))
    cumulative = _first_cumulative_ack(delivered, listed.where(F.col("ack_type") == "Cumulative"))
    key = [*ENTRY, "ts"]
    joined = delivered.join(individual, key, "left").join(cumulative, key, "left")
    first = F.least("individual_ts", "cumulative_ts")
    return joined.select(
        *delivered.columns,
        first.alias("ack_ts"),
        F.when(first.isNull(), None)
        .when(first == F.col("individual_ts"), "individual")
        .otherwise("cumulative")
        .alias("ack_how"),
        F.when(first == F.col("individual_ts"), F.col("individual_error")).alias(
            "validation_error"
        ),
    )


def _before_redelivery(ack_ts: Column) -> Column:
    return F.col("next_delivery_ts").isNull() | (ack_ts < F.col("next_delivery_ts"))


def _first_individual_ack(delivered: DataFrame, individual: DataFrame) -> DataFrame:
    """Equi-join on the entry, then the earliest ack after the delivery."""
    a = individual.select(
        *ENTRY, F.col("ts").alias("a_ts"), F.col("validation_error").alias("a_error")
    )
    return (
        delivered.select(*ENTRY, "ts", "next_delivery_ts")
        .join(a, list(ENTRY))
        .where((F.col("a_ts") >= F.col("ts")) & _before_redelivery(F.col("a_ts")))
        .groupBy(*ENTRY, "ts")
        .agg(F.min(F.struct("a_ts", "a_error")).alias("first"))
        .select(
            *ENTRY,
            "ts",
            F.col("first.a_ts").alias("individual_ts"),
            F.col("first.a_error").alias("individual_error"),
        )
    )


def _first_cumulative_ack(delivered: DataFrame, cumulative: DataFrame) -> DataFrame:
    """Earliest cumulative ack after the delivery at or beyond the entry's position.

    Without a quadratic range join: cumulative acks move forward, so the answer is the
    later of (the first ack at or beyond the position) and (the first ack after the
    delivery), both running minimums over one sorted pass per subscription.
    """
    # Only subscriptions that ack cumulatively need the two sorted passes.
    acking = cumulative.select(*SUBSCRIPTION).distinct()
    rows = (
        delivered.join(acking, list(SUBSCRIPTION), "left_semi").select(
            *ENTRY, "ts", "next_delivery_ts", F.lit(False).alias("is_ack")
        )
    ).unionByName(
        cumulative.select(
            *ENTRY,
            "ts",
            F.lit(None).cast("timestamp").alias("next_delivery_ts"),
            F.lit(True).alias("is_ack"),
        )
    )
    ack_ts = F.when(F.col("is_ack"), F.col("ts"))
    by_position = (
        Window.partitionBy(*SUBSCRIPTION)
        .orderBy(F.desc("ledger_id"), F.desc("entry_id"), F.desc("is_ack"))
        .rowsBetween(Window.unboundedPreceding, Window.currentRow)
    )
    # "Rows after this one" as a running frame in reverse order: Spark recomputes a frame
    # ending at unboundedFollowing for every row, quadratic in the partition's size.
    by_time = (
        Window.partitionBy(*SUBSCRIPTION)
        .orderBy(F.desc("ts"), F.desc("is_ack"))
        .rowsBetween(Window.unboundedPreceding, -1)
    )
    at_or_beyond = F.min(ack_ts).over(by_position)
    after = F.min(ack_ts).over(by_time)
    # greatest() skips nulls; no ack on either side means no answer.
    answer = F.when(at_or_beyond.isNotNull() & after.isNotNull(), F.greatest(at_or_beyond, after))
    return (
        rows.withColumn("cumulative_ts", answer)
        .where(~F.col("is_ack") & _before_redelivery(F.col("cumulative_ts")))
        .select(*ENTRY, "ts", "cumulative_ts")
        .dropDuplicates([*ENTRY, "ts"])
    )
