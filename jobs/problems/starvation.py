"""Consumers starved of permits while the broker had messages for them."""

from __future__ import annotations

from pyspark.sql import DataFrame
from pyspark.sql import functions as F

from .. import latency, permits
from ..common import micros
from .base import (
    CONSUMER,
    Inputs,
    T,
    entry_deliveries,
    evidence,
    millis,
    percent,
    seconds,
    severity,
    shown,
    with_messages_waiting,
)


def permit_starvation(data: Inputs) -> DataFrame:
    """Consumers starved of permits while the broker had messages for them, with the
    likely cause: batches as large as the queue, slow acknowledgements, or the queue."""
    intervals = data["starvation_intervals"]
    late = intervals.where(~F.col("backlog_waiting")).select("capture", "topic")
    waiting = with_messages_waiting(intervals, entry_deliveries(data.frames, late))
    spans = waiting.groupBy(*CONSUMER).agg(
        F.count("*").alias("spans"),
        F.sum("duration_us").alias("waiting_us"),
        F.max("duration_us").alias("longest_us"),
        F.min("start_ts").alias("start_ts"),
        F.max("end_ts").alias("end_ts"),
    )
    acks_median = (
        data["latency_pairs"]
        .where((F.col("kind") == latency.DELIVERY_ACK) & F.col("latency_us").isNotNull())
        .join(F.broadcast(spans.select(*CONSUMER)), CONSUMER, "left_semi")
        .groupBy(*CONSUMER)
        .agg(F.percentile_approx("latency_us", 0.5).alias("ack_p50_us"))
    )
    life = micros("last_ts") - micros("first_ts")
    batch = F.col("messages_delivered") / F.greatest(F.col("entries_delivered"), F.lit(1))
    summary = data["permit_summary"].select(
        *CONSUMER,
        *permits.NAMES,
        "receiver_queue_size",
        life.alias("life_us"),
        batch.alias("batch"),
    )
    fraction = F.col("waiting_us") / F.col("life_us")
    queue = F.col("receiver_queue_size")
    cause = (
        F.when(queue.isNotNull() & (F.col("batch") * 2 >= queue), "batch_over_permits")
        .when(F.col("ack_p50_us") >= T["slow_ack_us"], "slow_acknowledgement")
        .otherwise("receiver_queue")
    )
    found = (
        spans.join(summary, CONSUMER)
        .join(acks_median, CONSUMER, "left")
        .where(F.col("life_us") > 0)
        .withColumn("fraction", fraction)
        .where(
            (F.col("fraction") >= T["starved_fraction"])
            & (F.col("waiting_us") >= T["starved_seconds"] * 1e6)
        )
    )
    explanation = F.format_string(
        "Consumer %s on %s / %s had no permits while the broker had messages for it %s of"
        " its %s s life (%d spans, the longest %s s): its receiver queue is %s permits, it"
        " acknowledges in %s ms (median) and its entries hold %.1f messages on average.",
        shown("consumer_name", "(unnamed)"),
        shown("topic", "(unknown topic)"),
        shown("subscription", "(unknown subscription)"),
        percent("fraction"),
        seconds("life_us"),
        "spans",
        seconds("longest_us"),
        F.coalesce(queue.cast("string"), F.lit("unknown")),
        F.coalesce(millis("ack_p50_us"), F.lit("unknown")),
        "batch",
    )
    return found.select(
        F.lit("permit_starvation").alias("kind"),
        severity(F.col("fraction") >= 0.5).alias("severity"),
        F.least(F.col("fraction"), F.lit(1.0)).alias("score"),
        cause.alias("cause"),
        *CONSUMER,
        *permits.NAMES,
        "start_ts",
        "end_ts",
        F.col("spans").alias("count"),
        F.col("waiting_us").alias("duration_us"),
        explanation.alias("explanation"),
        evidence("starvation_intervals", "permit_timeline", "latency_pairs").alias("evidence"),
    )
