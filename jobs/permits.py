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

This is the reference permit ledger. The decoder keeps the same one as it decodes, to
report each delivery beyond the permits as an anomaly where it is sure of the balance;
``decode/pulsar/state.py`` says where the two part (a capture started mid-connection,
lost bytes), and a test holds their verdicts equal everywhere else.

``backlog_waiting`` says the broker delivered within ``PROMPT_US`` of the FLOW that ended
the span: messages were waiting, so the consumer was the bottleneck.
"""

from __future__ import annotations

import sys

from pyspark.sql import Column, DataFrame, SparkSession, Window, WindowSpec
from pyspark.sql import functions as F

if __name__ == "__main__" and not __package__:
    # Run as a script (spark-submit jobs/permits.py): its relative imports are the
    # installed package's (PEP 366).
    __package__ = "pwcap.jobs"

from .common import Tables, connection_ends, kept, micros, read_table, run_job

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
    # Batch indexes a MESSAGE's ack_set marks acknowledged cost no permit (nor delivery).
    delivered = F.coalesce("num_messages", F.lit(1)) - F.coalesce("acked_in_batch", F.lit(0))
    messages = F.when(F.col("command") == "MESSAGE", delivered)
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
    """Every event of every consumer in order, with the running balance, and the marks
    :func:`starvation_intervals` reads, all from one sorted pass per consumer.

    Events are ordered by capture time; a SUBSCRIBE answered again on the same consumer id
    starts a new life (``life``) whose balance restarts at zero: the balance is the running
    sum of the deltas less that sum at the life's start (the SUCCESS adds nothing).
    """
    order = Window.partitionBy(*CONSUMER).orderBy("ts", "direction", "stream_offset")
    running = order.rowsBetween(Window.unboundedPreceding, Window.currentRow)
    subscribed = F.col("event") == "subscribed"
    delta = F.coalesce("permits", F.lit(0)) - F.coalesce("messages", F.lit(0))
    summed = _events(frames).select(
        "*",
        delta.alias("delta"),
        F.sum(F.when(subscribed, 1).otherwise(0)).over(running).alias("life"),
        F.sum(delta).over(running).alias("summed"),
    )
    at_start = F.last(F.when(subscribed, F.col("summed")), ignorenulls=True).over(running)
    balance = F.when(F.col("life") > 0, F.col("summed") - at_start)
    timeline = summed.withColumn("balance", balance).withColumn(
        "balance_before", F.col("balance") - F.col("delta")
    )
    return _starvation_marks(timeline, order)


def _starvation_marks(timeline: DataFrame, order: WindowSpec) -> DataFrame:
    """Which events are starved (at a balance of zero or below, a close excepted), which
    begin and end a run of them within a life, and for the last of a run the next event
    of its life and the first delivery after it: the ends of a starvation span."""
    starved = F.col("starved")
    marked = timeline.withColumn(
        "starved", (F.col("balance") <= 0) & (F.col("event") != "closed")
    ).withColumn("delivered", F.when(F.col("event") == "delivery", F.struct("life", "ts")))
    previous_in_life = F.lag("life").over(order) == F.col("life")
    next_in_life = F.lead("life").over(order) == F.col("life")
    # The first delivery after the event: the next non-null value, in this life or a later one.
    later = F.expr("lead(delivered, 1, null, true)").over(order)
    return marked.select(
        *TIMELINE_COLUMNS,
        "direction",
        "stream_offset",
        "life",
        (starved & ~F.coalesce(previous_in_life & F.lag(starved).over(order), F.lit(False))).alias(
            "starts_span"
        ),
        (starved & ~F.coalesce(next_in_life & F.lead(starved).over(order), F.lit(False))).alias(
            "ends_span"
        ),
        F.when(next_in_life, F.lead("ts").over(order)).alias("next_ts"),
        F.when(next_in_life, F.lead("event").over(order)).alias("next_event"),
        F.when(later.life == F.col("life"), later.ts).alias("later_delivery"),
    )


def starvation_intervals(timeline: DataFrame, ends: DataFrame) -> DataFrame:
    """Runs of starved events (:func:`permit_timeline`), each ended by the next event (or
    the connection's end, ``ends``: :func:`connection_ends`), with the consumer's receiver
    queue size and usual refill (what a span is measured against). A run's first and last
    events are all it takes: they are paired in order."""
    bounds = timeline.where(F.col("starts_span") | F.col("ends_span"))
    order = Window.partitionBy(*CONSUMER).orderBy("ts", "direction", "stream_offset")
    running = order.rowsBetween(Window.unboundedPreceding, Window.currentRow)
    start = F.struct("ts", (F.col("event") == "subscribed").alias("subscribed"), *NAMES)
    started = F.last(F.when(F.col("starts_span"), start), ignorenulls=True).over(running)
    spans = (
        bounds.withColumn("start", started)
        .where(F.col("ends_span") & ~F.col("start.subscribed"))  # not SUBSCRIBE to first FLOW
        .select(
            *CONSUMER,
            *(F.col(f"start.{name}").alias(name) for name in NAMES),
            F.col("start.ts").alias("start_ts"),
            "next_ts",
            "next_event",
            "later_delivery",
        )
    )
    end_ts = F.coalesce("next_ts", "capture_end")
    # The first delivery after the span's last event is the first after a FLOW ending it.
    flow_to_delivery = micros("later_delivery") - micros("next_ts")
    ended_by_flow = F.col("next_event") == "flow"
    pattern = _refill_pattern(timeline).select(*CONSUMER, "receiver_queue_size", "refill_permits")
    return (
        spans.join(ends, CONNECTION)
        .join(pattern, CONSUMER, "left")
        .select(
            *CONSUMER,
            *NAMES,
            "receiver_queue_size",
            "refill_permits",
            "start_ts",
            end_ts.alias("end_ts"),
            (micros(end_ts) - micros("start_ts")).alias("duration_us"),
            F.coalesce("next_event", F.lit("end_of_capture")).alias("ended_by"),
            F.when(ended_by_flow, flow_to_delivery).alias("flow_to_delivery_us"),
            (ended_by_flow & F.coalesce(flow_to_delivery <= PROMPT_US, F.lit(False))).alias(
                "backlog_waiting"
            ),
        )
    )


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


def permit_summary(timeline: DataFrame, intervals: DataFrame, ends: DataFrame) -> DataFrame:
    """Per consumer: grants, deliveries, starvation and deliveries beyond the permits
    (``ends``: :func:`connection_ends`)."""
    beyond = (F.col("event") == "delivery") & (F.col("balance_before") <= 0)
    # Counted per consumer and names first, then per consumer: an aggregate of strings
    # (the names) sorts its input, here only the few rows of the first step.
    per_names = timeline.groupBy(*CONSUMER, *NAMES).agg(
        F.min("ts").alias("first_ts"),
        F.max("ts").alias("last_ts"),
        F.count(F.when(F.col("event") == "flow", 1)).alias("flows"),
        F.sum("permits").alias("permits_granted"),
        F.count(F.when(F.col("event") == "delivery", 1)).alias("entries_delivered"),
        F.sum("messages").alias("messages_delivered"),
        F.count(F.when(beyond, 1)).alias("deliveries_beyond_permits"),
        F.max(F.col("life") > 0).alias("balance_known"),
        F.max(F.when(F.col("event") == "closed", F.col("ts"))).alias("closed_ts"),
    )
    # Sums of counts are never null, as the counts are not (nor in the table's schema).
    per_consumer = per_names.groupBy(*CONSUMER).agg(
        *(F.first(name, ignorenulls=True).alias(name) for name in NAMES),
        F.min("first_ts").alias("first_ts"),
        F.max("last_ts").alias("last_ts"),
        F.coalesce(F.sum("flows"), F.lit(0)).alias("flows"),
        F.coalesce(F.sum("permits_granted"), F.lit(0)).alias("permits_granted"),
        F.coalesce(F.sum("entries_delivered"), F.lit(0)).alias("entries_delivered"),
        F.coalesce(F.sum("messages_delivered"), F.lit(0)).alias("messages_delivered"),
        F.coalesce(F.sum("deliveries_beyond_permits"), F.lit(0)).alias("deliveries_beyond_permits"),
        F.max("balance_known").alias("balance_known"),
        F.max("closed_ts").alias("closed_ts"),
    )
    starvation = intervals.groupBy(*CONSUMER).agg(
        F.count("*").alias("starvation_spans"),
        F.sum("duration_us").alias("starved_us"),
        F.max("duration_us").alias("longest_starvation_us"),
        F.count(F.when(F.col("backlog_waiting"), 1)).alias("spans_with_backlog_waiting"),
    )
    lifetime = micros(F.coalesce("closed_ts", "capture_end")) - micros("first_ts")
    zero = F.lit(0).cast("long")
    return (
        per_consumer.join(_refill_pattern(timeline), CONSUMER, "left")
        .join(starvation, CONSUMER, "left")
        .join(ends, CONNECTION)
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
    timeline = kept(permit_timeline(frames))
    ends = connection_ends(frames)
    intervals = starvation_intervals(timeline, ends).cache()
    return {
        "permit_timeline": timeline.select(*TIMELINE_COLUMNS),
        "starvation_intervals": intervals,
        "permit_summary": permit_summary(timeline, intervals, ends),
    }


def build(spark: SparkSession, datasets: list[str], window: str) -> Tables:
    """Permit balance, starvation intervals and per-consumer permit summary."""
    return tables(read_table(spark, datasets, "frames"))


if __name__ == "__main__":
    sys.exit(run_job("permits", build))
