"""Which consumers sat starved of permits, and for how long: ``permit_timeline``,
``starvation_intervals`` and ``permit_summary``.

Usage: ``spark-submit jobs/permits.py DATASET... -o OUT [--overwrite] [--verbose]``.

The balance is kept as the broker keeps it: it starts at zero when the broker answers
SUBSCRIBE, grows with each FLOW and shrinks by each delivered entry's number of messages.
It can go negative, because brokers dispatch whole batches. A consumer whose SUBSCRIBE is
not in the capture (capture started mid-connection) has no known balance: its timeline is
written with a null balance and it gets no starvation intervals.

A starvation interval opens when a delivery brings the balance to zero or below and ends
at the FLOW that lifts it above zero, at CLOSE_CONSUMER, or at the end of the capture
(``ended_by``). The zero balance between SUBSCRIBE and the consumer's first FLOW is in the
timeline but is not starvation: the consumer has not asked for messages yet.

The balance is the one the wire shows. The broker applies a FLOW when it reads it, which
can be a little after the capture saw it; a span the broker saw shorter than that delay
(a FLOW already in flight when the last permitted entry was sent) does not show here.

``backlog_waiting`` says the broker delivered within ``PROMPT_US`` of the FLOW that ended
the span: messages were waiting, so the consumer was the bottleneck.
"""

from __future__ import annotations

import sys

from pwcap.jobs.common import Tables, micros, read_table, run_job
from pyspark.sql import Column, DataFrame, SparkSession, Window
from pyspark.sql import functions as F

PROMPT_US = 10_000  # a delivery this soon after the FLOW was already waiting at the broker
# Connection ids are keyed with their capture: derived captures of one recording (cut,
# reordered, re-encoded) may carry the same connection under the same id.
CONSUMER = ["capture", "conn_id", "consumer_id"]
NAMES = ["topic", "subscription", "consumer_name"]
CONNECTION = CONSUMER[:2]
TIMELINE_COLUMNS = [
    *CONSUMER,
    *NAMES,
    "ts",
    "event",
    "permits",
    "messages",
    "balance_before",
    "balance",
]


def _events(frames: DataFrame) -> DataFrame:
    """Subscription, FLOW, delivery and close events of every consumer, with their delta."""
    subscribed = (F.col("command") == "SUCCESS") & (F.col("answers") == "SUBSCRIBE")
    closed = (F.col("command") == "CLOSE_CONSUMER") & (F.col("direction") == "c2b")
    event = (
        F.when(subscribed, "subscribed")
        .when(F.col("command") == "FLOW", "flow")
        .when(F.col("command") == "MESSAGE", "delivery")
        .when(closed, "closed")
    )
    messages = F.when(F.col("command") == "MESSAGE", F.coalesce("num_messages", F.lit(1)))
    permits = F.when(F.col("command") == "FLOW", F.coalesce("permits", F.lit(0)))
    return (
        frames.where(F.col("consumer_id").isNotNull())
        .withColumn("event", event)
        .where(F.col("event").isNotNull())
        .select(
            *CONSUMER,
            *NAMES,
            "ts",
            "stream_offset",
            "direction",
            "event",
            permits.cast("long").alias("permits"),
            messages.cast("long").alias("messages"),
        )
    )


def permit_timeline(frames: DataFrame) -> DataFrame:
    """Every event of every consumer in order, with the running balance.

    Events are ordered by capture time; a SUBSCRIBE answered again on the same consumer id
    starts a new life (``life``) whose balance restarts at zero.
    """
    events = _events(frames)
    order = Window.partitionBy(*CONSUMER).orderBy("ts", "direction", "stream_offset")
    running = order.rowsBetween(Window.unboundedPreceding, Window.currentRow)
    life = F.sum(F.when(F.col("event") == "subscribed", 1).otherwise(0)).over(running)
    delta = F.coalesce("permits", F.lit(0)) - F.coalesce("messages", F.lit(0))
    by_life = (
        Window.partitionBy(*CONSUMER, "life")
        .orderBy("ts", "direction", "stream_offset")
        .rowsBetween(Window.unboundedPreceding, Window.currentRow)
    )
    balance = F.when(F.col("life") > 0, F.sum("delta").over(by_life))
    return (
        events.withColumn("life", life)
        .withColumn("delta", delta)
        .withColumn("balance", balance)
        .withColumn("balance_before", F.col("balance") - F.col("delta"))
    )


def starvation_intervals(timeline: DataFrame, frames: DataFrame) -> DataFrame:
    """Islands of consecutive events at or below zero, each ended by the next event, with
    the consumer's receiver queue size and usual refill (what a span is measured against)."""
    order = Window.partitionBy(*CONSUMER, "life").orderBy("ts", "direction", "stream_offset")
    # The rows after this one, as a running frame in reverse order (a frame ending at
    # unboundedFollowing is recomputed for every row: quadratic in a consumer's events).
    rest = (
        Window.partitionBy(*CONSUMER, "life")
        .orderBy(F.desc("ts"), F.desc("direction"), F.desc("stream_offset"))
        .rowsBetween(Window.unboundedPreceding, -1)
    )
    starved = (F.col("balance") <= 0) & (F.col("event") != "closed")
    later_delivery = F.min(F.when(F.col("event") == "delivery", F.col("ts"))).over(rest)
    marked = (
        timeline.where(F.col("balance").isNotNull())
        .withColumn("starved", starved)
        .withColumn("later_delivery", later_delivery)
        .withColumn("next_ts", F.lead("ts").over(order))
        .withColumn("next_event", F.lead("event").over(order))
        .withColumn("delivery_after_next", F.lead("later_delivery").over(order))
    )
    change = F.col("starved") != F.coalesce(F.lag("starved").over(order), F.lit(False))
    islands = marked.withColumn(
        "island",
        F.sum(change.cast("int")).over(order.rowsBetween(Window.unboundedPreceding, 0)),
    ).where("starved")
    last = F.max(F.struct("ts", "stream_offset", "next_ts", "next_event", "delivery_after_next"))
    spans = (
        islands.groupBy(*CONSUMER, "life", "island")
        .agg(
            *(F.first(name).alias(name) for name in NAMES),
            F.min("ts").alias("start_ts"),
            F.max(F.col("event") == "subscribed").alias("before_first_flow"),
            last.alias("last"),
        )
        .where(~F.col("before_first_flow"))
    )
    capture_end = _capture_end(frames)
    end_ts = F.coalesce("last.next_ts", "capture_end")
    flow_to_delivery = micros("last.delivery_after_next") - micros("last.next_ts")
    ended_by_flow = F.col("last.next_event") == "flow"
    pattern = _refill_pattern(timeline).select(*CONSUMER, "receiver_queue_size", "refill_permits")
    return (
        spans.join(capture_end, CONNECTION)
        .join(pattern, CONSUMER, "left")
        .select(
            *CONSUMER,
            *NAMES,
            "receiver_queue_size",
            "refill_permits",
            "start_ts",
            end_ts.alias("end_ts"),
            (micros(end_ts) - micros("start_ts")).alias("duration_us"),
            F.coalesce("last.next_event", F.lit("end_of_capture")).alias("ended_by"),
            F.when(ended_by_flow, flow_to_delivery).alias("flow_to_delivery_us"),
            (ended_by_flow & F.coalesce(flow_to_delivery <= PROMPT_US, F.lit(False))).alias(
                "backlog_waiting"
            ),
        )
    )


def _capture_end(frames: DataFrame) -> DataFrame:
    """The last time each connection was seen: where spans still open at the end stop."""
    return frames.groupBy(*CONNECTION).agg(F.max("ts").alias("capture_end"))


def _refill_pattern(timeline: DataFrame) -> DataFrame:
    """Receiver queue size (a consumer's first FLOW) and its most common later FLOW."""
    flows = timeline.where(F.col("event") == "flow").withColumn(
        "n",
        F.row_number().over(Window.partitionBy(*CONSUMER).orderBy("ts", "stream_offset")),
    )
    first = flows.where(F.col("n") == 1).select(
        *CONSUMER, F.col("permits").alias("receiver_queue_size")
    )
    refills = (
        flows.where(F.col("n") > 1)
        .groupBy(*CONSUMER, "permits")
        .count()
        .groupBy(*CONSUMER)
        .agg(
            F.max(F.struct("count", "permits")).alias("mode"),
            F.sum("count").alias("refills"),
        )
        .select(*CONSUMER, F.col("mode.permits").alias("refill_permits"), "refills")
    )
    return first.join(refills, CONSUMER, "left")


def permit_summary(timeline: DataFrame, intervals: DataFrame, frames: DataFrame) -> DataFrame:
    """Per consumer: grants, deliveries, starvation and deliveries beyond the permits."""
    beyond = (F.col("event") == "delivery") & (F.col("balance_before") <= 0)
    per_consumer = timeline.groupBy(*CONSUMER).agg(
        *(F.first(name, ignorenulls=True).alias(name) for name in NAMES),
        F.min("ts").alias("first_ts"),
        F.max("ts").alias("last_ts"),
        F.count(F.when(F.col("event") == "flow", 1)).alias("flows"),
        F.coalesce(F.sum("permits"), F.lit(0)).alias("permits_granted"),
        F.count(F.when(F.col("event") == "delivery", 1)).alias("entries_delivered"),
        F.coalesce(F.sum("messages"), F.lit(0)).alias("messages_delivered"),
        F.count(F.when(beyond, 1)).alias("deliveries_beyond_permits"),
        F.max(F.col("life") > 0).alias("balance_known"),
        F.max(F.when(F.col("event") == "closed", F.col("ts"))).alias("closed_ts"),
    )
    starvation = intervals.groupBy(*CONSUMER).agg(
        F.count("*").alias("starvation_spans"),
        F.sum("duration_us").alias("starved_us"),
        F.max("duration_us").alias("longest_starvation_us"),
        F.count(F.when(F.col("backlog_waiting"), 1)).alias("spans_with_backlog_waiting"),
    )
    capture_end = _capture_end(frames)
    lifetime = micros(F.coalesce("closed_ts", "capture_end")) - micros("first_ts")
    zero = F.lit(0).cast("long")
    return (
        per_consumer.join(_refill_pattern(timeline), CONSUMER, "left")
        .join(starvation, CONSUMER, "left")
        .join(capture_end, CONNECTION)
        .select(
            *CONSUMER,
            *NAMES,
            "first_ts",
            "last_ts",
            "balance_known",
            "receiver_queue_size",
            "refill_permits",
            "refills",
            "flows",
            "permits_granted",
            "entries_delivered",
            "messages_delivered",
            F.coalesce("starvation_spans", zero).alias("starvation_spans"),
            F.coalesce("starved_us", zero).alias("starved_us"),
            F.coalesce("longest_starvation_us", zero).alias("longest_starvation_us"),
            F.coalesce("spans_with_backlog_waiting", zero).alias("spans_with_backlog_waiting"),
            _fraction(F.coalesce("starved_us", zero), lifetime).alias("starved_fraction"),
            "deliveries_beyond_permits",
        )
    )


def _fraction(part: Column, whole: Column) -> Column:
    return F.when(whole > 0, part / whole).otherwise(F.lit(0.0))


def tables(frames: DataFrame) -> Tables:
    timeline = permit_timeline(frames).cache()
    intervals = starvation_intervals(timeline, frames).cache()
    return {
        "permit_timeline": timeline.select(*TIMELINE_COLUMNS),
        "starvation_intervals": intervals,
        "permit_summary": permit_summary(timeline, intervals, frames),
    }


def build(spark: SparkSession, datasets: list[str], window: str) -> Tables:
    """Permit balance, starvation intervals and per-consumer permit summary."""
    return tables(read_table(spark, datasets, "frames"))


if __name__ == "__main__":
    sys.exit(run_job("permits", build))
