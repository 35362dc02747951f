"""The capture's problems, named, ranked and explained: ``findings``.

Usage: ``spark-submit jobs/findings.py DATASET... -o OUT [--window 1m] [--overwrite]
[--verbose]``.

Each kind of problem (``FINDING_KINDS`` in ``tables/analytics.py``, which gives its
definition and threshold) is one function below, reading the dataset and the analytics
tables the other jobs write (``pwcap analyze`` hands it those it wrote; run alone, this
job computes them). Each finding row names its entities, quotes the numbers that prove
it in one sentence, and lists the tables holding its evidence rows; the rows are ranked
by severity, then by the share of the traffic concerned.
"""

from __future__ import annotations

import sys
from collections.abc import Callable, Mapping
from functools import partial, reduce

from pyspark.sql import Column, DataFrame, SparkSession, Window
from pyspark.sql import functions as F

if __name__ == "__main__" and not __package__:
    # Run as a script (spark-submit jobs/findings.py): its relative imports are the
    # installed package's (PEP 366).
    __package__ = "pwcap.jobs"

from ..tables.analytics import SEVERITIES, THRESHOLDS
from . import acks, latency, permits, redelivery
from .common import (
    Tables,
    at_once,
    conform,
    connection_ends,
    message_ids,
    micros,
    read_table,
    run_job,
)

T = THRESHOLDS
BUSIEST = ("SEND", "SEND_RECEIPT", "MESSAGE", "ACK", "FLOW", "PING", "PONG")
CONSUMER = ["capture", "conn_id", "consumer_id"]
SUBSCRIPTION = ["capture", "topic", "subscription"]
# The analytics tables the findings read, beside the dataset's.
INPUTS = (
    "latency_pairs",
    "starvation_intervals",
    "permit_summary",
    "redeliveries",
    "redelivery_summary",
    "unacked",
)
# Pairs whose remote time is not the broker's own: a message's way through it to a
# consumer, a client's acknowledgement, a ping either side may send.
NOT_BROKER_TIME = (latency.PUBLISH_DELIVERY, latency.DELIVERY_ACK, "PING")


class Inputs:
    """What the findings read: the dataset's tables and the other jobs' tables."""

    def __init__(
        self,
        frames: DataFrame,
        messages: DataFrame,
        connections: DataFrame,
        analytics: Mapping[str, DataFrame],
    ) -> None:
        self.frames = frames
        self.messages = messages
        self.connections = connections
        self.analytics = analytics
        # The last frame of each capture: what "the capture went on" is measured against.
        self.capture_ends = frames.groupBy("capture").agg(F.max("ts").alias("capture_end"))
        # The frames of every command but the busiest, read once for the kinds that need
        # only those (errors, closes, lookups, producers, REDELIVER requests): a scan of
        # the frames for each of them cost as much as all of them together.
        self.rare = frames.where(~F.col("command").isin(*BUSIEST)).localCheckpoint(eager=True)

    def __getitem__(self, table: str) -> DataFrame:
        return self.analytics[table]


# -- helpers ---------------------------------------------------------------------------------


def _seconds(us: Column | str) -> Column:
    """Microseconds as seconds with two decimals, for a sentence."""
    return F.format_number((F.col(us) if isinstance(us, str) else us) / 1e6, 2)


def _millis(us: Column | str) -> Column:
    """Microseconds as milliseconds with one decimal."""
    return F.format_number((F.col(us) if isinstance(us, str) else us) / 1e3, 1)


def _percent(fraction: Column | str) -> Column:
    value = F.col(fraction) if isinstance(fraction, str) else fraction
    return F.format_string("%.0f%%", value * 100)


def _name(column: str, fallback: str) -> Column:
    """A name for a sentence: the column's value, or what stands for it when unknown."""
    return F.coalesce(F.col(column), F.lit(fallback))


def _evidence(*tables: str) -> Column:
    return F.array(*(F.lit(t) for t in tables))


def _endpoint(ip: str, port: str) -> Column:
    """``ip:port``, an IPv6 address in brackets (as ``broker_addresses`` writes them)."""
    shown = F.when(F.col(ip).contains(":"), F.format_string("[%s]", ip)).otherwise(F.col(ip))
    return F.concat_ws(":", shown, F.col(port).cast("string"))


def _severity(high: Column, medium: Column | None = None) -> Column:
    """``high`` where ``high`` holds, ``medium`` where ``medium`` does (all: None), else low."""
    chosen = F.when(high, F.lit("high"))
    if medium is None:
        return chosen.otherwise(F.lit("medium"))
    return chosen.when(medium, F.lit("medium")).otherwise(F.lit("low"))


# -- consumers -------------------------------------------------------------------------------


def permit_starvation(data: Inputs) -> DataFrame:
    """Consumers starved of permits while the broker had messages for them, with the
    likely cause: batches as large as the queue, slow acknowledgements, or the queue."""
    spans = (
        data["starvation_intervals"]
        .where(F.col("backlog_waiting"))
        .groupBy(*CONSUMER)
        .agg(
            F.count("*").alias("spans"),
            F.sum("duration_us").alias("waiting_us"),
            F.max("duration_us").alias("longest_us"),
            F.min("start_ts").alias("start_ts"),
            F.max("end_ts").alias("end_ts"),
        )
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
        _name("consumer_name", "(unnamed)"),
        _name("topic", "(unknown topic)"),
        _name("subscription", "(unknown subscription)"),
        _percent("fraction"),
        _seconds("life_us"),
        "spans",
        _seconds("longest_us"),
        F.coalesce(queue.cast("string"), F.lit("unknown")),
        F.coalesce(_millis("ack_p50_us"), F.lit("unknown")),
        "batch",
    )
    return found.select(
        F.lit("permit_starvation").alias("kind"),
        _severity(F.col("fraction") >= 0.5).alias("severity"),
        F.least(F.col("fraction"), F.lit(1.0)).alias("score"),
        cause.alias("cause"),
        *CONSUMER,
        *permits.NAMES,
        "start_ts",
        "end_ts",
        F.col("spans").alias("count"),
        F.col("waiting_us").alias("duration_us"),
        explanation.alias("explanation"),
        _evidence("starvation_intervals", "permit_timeline", "latency_pairs").alias("evidence"),
    )


def _redeliver_requests(data: Inputs) -> DataFrame:
    """Each REDELIVER_UNACKNOWLEDGED_MESSAGES with ``age_us``: how long the youngest
    delivery it covers had been held (the named entries' latest deliveries before it, or
    for one naming none, the consumer's latest delivery), and ``cause`` from it."""
    frames = data.frames
    requests = data.rare.where(F.col("command") == redelivery.REDELIVER).select(
        *CONSUMER,
        "topic",
        "subscription",
        "ts",
        "stream_offset",
        "num_message_ids",
        "message_ids",
        "ledger_id",
        "entry_id",
        "partition",
        "batch_index",
    )
    # Only the deliveries of consumers that asked: most ask for nothing.
    asking = F.broadcast(requests.select(*CONSUMER).distinct())
    deliveries = (
        frames.where(F.col("command") == "MESSAGE").join(asking, CONSUMER, "left_semi")
    ).select(
        *CONSUMER,
        F.col("ts").alias("delivered_ts"),
        "ledger_id",
        "entry_id",
    )
    request_key = [*CONSUMER, "topic", "subscription", "ts", "stream_offset"]
    named = (
        message_ids(requests.where(F.col("num_message_ids") > 0))
        .join(deliveries, [*CONSUMER, "ledger_id", "entry_id"])
        .where(F.col("delivered_ts") <= F.col("ts"))
        .groupBy(*request_key)
        .agg(F.max("delivered_ts").alias("youngest_ts"))
    )
    # For a request naming none, the consumer's latest delivery before it: a running
    # last value over its deliveries and requests in time order, no join.
    order = Window.partitionBy(*CONSUMER).orderBy("ts", "stream_offset")
    everything = (
        requests.where(F.coalesce("num_message_ids", F.lit(0)) == 0)
        .select(*request_key, F.lit(None).cast("timestamp").alias("delivered_ts"))
        .unionByName(
            deliveries.select(
                *CONSUMER,
                F.lit(None).cast("string").alias("topic"),
                F.lit(None).cast("string").alias("subscription"),
                F.col("delivered_ts").alias("ts"),
                F.lit(-1).cast("long").alias("stream_offset"),
                "delivered_ts",
            )
        )
        .withColumn(
            "youngest_ts",
            F.last("delivered_ts", ignorenulls=True).over(
                order.rowsBetween(Window.unboundedPreceding, Window.currentRow)
            ),
        )
    )
    whole = everything.where(F.col("delivered_ts").isNull()).select(*request_key, "youngest_ts")
    age = micros("ts") - micros("youngest_ts")
    cause = F.when(age >= T["ack_timeout_floor_us"], "ack_timeout").otherwise("negative_ack")
    return (
        named.unionByName(whole)
        .where(F.col("youngest_ts").isNotNull())
        .select(*request_key, age.alias("age_us"), cause.alias("cause"))
    )


def redelivery_causes(data: Inputs) -> DataFrame:
    """Every redelivery (not one a SEEK asked for) with its ``cause``; a redelivery a
    REDELIVER request triggered takes the cause of the latest such request of its
    consumer's subscription before it."""
    again = (
        data["redeliveries"]
        .where((F.col("delivery_number") > 1) & (F.col("trigger") != "seek"))
        .select(*SUBSCRIPTION, "conn_id", "consumer_id", "consumer_name", "ts", "trigger")
    )
    requests = _redeliver_requests(data).select(*SUBSCRIPTION, "ts", "cause", "age_us")
    order = Window.partitionBy(*SUBSCRIPTION).orderBy("ts", "is_request")
    running = order.rowsBetween(Window.unboundedPreceding, Window.currentRow)
    request = F.struct("cause", "age_us")
    rows = again.select("*", F.lit(False).alias("is_request")).unionByName(
        requests.select("*", F.lit(True).alias("is_request")), allowMissingColumns=True
    )
    asked = F.last(F.when(F.col("is_request"), request), ignorenulls=True).over(running)
    cause = (
        F.when(
            F.col("trigger").startswith("redeliver_"),
            F.coalesce("asked.cause", F.lit("negative_ack")),
        )
        .when(F.col("trigger") == "reconnect", "reconnect")
        .otherwise("unexplained")
    )
    return (
        rows.withColumn("asked", asked)
        .where(~F.col("is_request"))
        .select(
            *SUBSCRIPTION,
            "conn_id",
            "consumer_id",
            "consumer_name",
            "ts",
            cause.alias("cause"),
            F.col("asked.age_us").alias("age_us"),
        )
    )


_CAUSE_TEXT = {
    "negative_ack": "the client asked for them again %s ms (median) after their delivery:"
    " negative acknowledgements",
    "ack_timeout": "the client's ack timeout expired: it asked for them again %s ms (median)"
    " after their delivery without acknowledging them",
    "reconnect": "the consumer reconnected before acknowledging them",
    "unexplained": "of nothing the wire shows (the broker's own decision, or the capture"
    " missed the cause)",
}


def _because(cause: Column, age_us: Column) -> Column:
    """The end of a redelivery finding's sentence: why, with the request's age."""
    chosen = F
    for name, text in _CAUSE_TEXT.items():
        said = F.format_string(text, _millis(age_us)) if "%s" in text else F.lit(text)
        chosen = chosen.when(cause == name, said)
    return chosen


def redeliveries_by_cause(data: Inputs) -> DataFrame:
    """Redelivered messages per subscription and cause."""
    causes = redelivery_causes(data)
    deliveries = (
        data["redelivery_summary"]
        .groupBy(*SUBSCRIPTION)
        .agg(F.sum("deliveries").alias("deliveries"))
    )
    grouped = (
        causes.groupBy(*SUBSCRIPTION, "cause")
        .agg(
            F.count("*").alias("count"),
            F.min("ts").alias("start_ts"),
            F.max("ts").alias("end_ts"),
            F.percentile_approx("age_us", 0.5).alias("age_us"),
            F.countDistinct("conn_id", "consumer_id").alias("consumers"),
            F.min(F.struct("conn_id", "consumer_id", "consumer_name")).alias("consumer"),
        )
        .join(deliveries, SUBSCRIPTION, "left")
    )
    rate = F.col("count") / F.greatest(F.col("deliveries"), F.col("count"))
    text = F.col("cause")
    because = _because(text, F.col("age_us"))
    explanation = F.format_string(
        "%d messages of %s / %s were delivered again (%s of its %d deliveries, to %d"
        " consumers) because %s.",
        "count",
        _name("topic", "(unknown topic)"),
        _name("subscription", "(unknown subscription)"),
        _percent(rate),
        F.coalesce("deliveries", "count"),
        "consumers",
        because,
    )
    one = F.col("consumers") == 1
    return grouped.select(
        F.lit("redelivery").alias("kind"),
        _severity(rate >= 0.5, text != "negative_ack").alias("severity"),
        rate.alias("score"),
        "cause",
        *SUBSCRIPTION,
        F.when(one, F.col("consumer.conn_id")).alias("conn_id"),
        F.when(one, F.col("consumer.consumer_id")).alias("consumer_id"),
        F.when(one, F.col("consumer.consumer_name")).alias("consumer_name"),
        "start_ts",
        "end_ts",
        "count",
        explanation.alias("explanation"),
        _evidence("redeliveries", "redelivery_summary").alias("evidence"),
    )


def redelivery_storms(data: Inputs) -> DataFrame:
    """Subscriptions that had many redeliveries within a short time, most of their
    deliveries redeliveries."""
    again = (
        data["redeliveries"]
        .where((F.col("delivery_number") > 1) & (F.col("trigger") != "seek"))
        .select(*SUBSCRIPTION, "ts")
    )
    storms = _storms(again, SUBSCRIPTION, T["storm_redeliveries"])
    deliveries = (
        data["redelivery_summary"].groupBy(*SUBSCRIPTION).agg(F.sum("deliveries").alias("all"))
    )
    rate = F.col("count") / F.greatest(F.col("all"), F.col("count"))
    explanation = F.format_string(
        "%s / %s had a redelivery storm: %d redeliveries in %s s (%s of its %d deliveries),"
        " %d within %s s.",
        _name("topic", "(unknown topic)"),
        _name("subscription", "(unknown subscription)"),
        "count",
        _seconds(micros("end_ts") - micros("start_ts")),
        _percent(rate),
        F.coalesce("all", "count"),
        "worst",
        F.lit(f"{T['storm_window_s']:g}"),
    )
    return (
        storms.join(deliveries, SUBSCRIPTION, "left")
        .where(rate >= T["storm_rate"])
        .select(
            F.lit("redelivery_storm").alias("kind"),
            F.lit("high").alias("severity"),
            rate.alias("score"),
            *SUBSCRIPTION,
            "start_ts",
            "end_ts",
            "count",
            explanation.alias("explanation"),
            _evidence("redeliveries", "redelivery_summary").alias("evidence"),
        )
    )


def acks_lost_on_reconnect(data: Inputs) -> DataFrame:
    """Messages redelivered after a reconnect that the client had acknowledged
    individually after their previous delivery."""
    previous = Window.partitionBy(*redelivery.MESSAGE).orderBy("delivery_number")
    deliveries = data["redeliveries"].withColumn("previous_ts", F.lag("ts").over(previous))
    again = deliveries.where(
        (F.col("trigger") == "reconnect") & (F.col("delivery_number") > 1)
    ).select(*redelivery.MESSAGE, "ts", "previous_ts", "conn_id", "consumer_id", "consumer_name")
    # The acks of the subscriptions redelivered after a reconnect alone: usually none.
    reconnected = F.broadcast(again.select(*SUBSCRIPTION).distinct())
    acked = (
        acks.acks(data.frames.join(reconnected, SUBSCRIPTION, "left_semi"))
        .where(F.col("ack_type") == "Individual")
        .select(
            *acks.ENTRY,
            F.col("ts").alias("ack_ts"),
            F.coalesce("batch_index", F.lit(-1)).alias("ack_batch_index"),
        )
    )
    lost = (
        again.join(acked, list(acks.ENTRY))
        .where((F.col("ack_ts") > F.col("previous_ts")) & (F.col("ack_ts") < F.col("ts")))
        .where((F.col("ack_batch_index") < 0) | (F.col("ack_batch_index") == F.col("batch_index")))
        .dropDuplicates([*redelivery.MESSAGE, "ts"])
    )
    grouped = lost.groupBy(*SUBSCRIPTION).agg(
        F.count("*").alias("count"),
        F.min("ack_ts").alias("start_ts"),
        F.max("ts").alias("end_ts"),
        F.min(F.struct("conn_id", "consumer_id", "consumer_name")).alias("consumer"),
    )
    explanation = F.format_string(
        "%d messages of %s / %s were delivered again after a reconnect although the client"
        " had acknowledged them: the acknowledgements did not reach the broker before the"
        " connection ended.",
        "count",
        _name("topic", "(unknown topic)"),
        _name("subscription", "(unknown subscription)"),
    )
    return grouped.select(
        F.lit("ack_lost_on_reconnect").alias("kind"),
        F.lit("high").alias("severity"),
        F.lit(1.0).alias("score"),
        *SUBSCRIPTION,
        F.col("consumer.consumer_id").alias("consumer_id"),
        F.col("consumer.consumer_name").alias("consumer_name"),
        "start_ts",
        "end_ts",
        "count",
        explanation.alias("explanation"),
        _evidence("redeliveries", "latency_pairs").alias("evidence"),
    )


def ack_holes(data: Inputs) -> DataFrame:
    """Entries left unacknowledged behind later entries the subscription acknowledged."""
    position = F.struct("ledger_id", "entry_id")
    # The acks of the subscriptions that left entries unacknowledged alone.
    unacked = F.broadcast(data["unacked"].select(*SUBSCRIPTION).distinct())
    reach = (
        acks.acks(data.frames.join(unacked, SUBSCRIPTION, "left_semi"))
        .where(F.col("topic").isNotNull() & F.col("subscription").isNotNull())
        .groupBy(*SUBSCRIPTION)
        .agg(F.max(position).alias("reach"), F.max("ts").alias("reach_ts"))
    )
    holes = (
        data["unacked"]
        .join(reach, SUBSCRIPTION)
        .where((position < F.col("reach")) & (F.col("last_delivery_ts") < F.col("reach_ts")))
    )
    grouped = holes.groupBy(*SUBSCRIPTION).agg(
        F.count("*").alias("count"),
        F.sum("num_messages").alias("messages"),
        F.min("last_delivery_ts").alias("start_ts"),
        F.max("reach_ts").alias("end_ts"),
        F.min(position).alias("oldest"),
        F.countDistinct("conn_id", "consumer_id").alias("consumers"),
        F.min(F.struct("conn_id", "consumer_id", "consumer_name")).alias("consumer"),
    )
    explanation = F.format_string(
        "%s / %s left %d entries (%d messages) unacknowledged behind later entries it"
        " acknowledged, the oldest %d:%d: the broker keeps them, and the backlog's start,"
        " until they are acknowledged.",
        _name("topic", "(unknown topic)"),
        _name("subscription", "(unknown subscription)"),
        "count",
        "messages",
        "oldest.ledger_id",
        "oldest.entry_id",
    )
    one = F.col("consumers") == 1
    return grouped.select(
        F.lit("ack_hole").alias("kind"),
        F.lit("medium").alias("severity"),
        F.lit(0.5).alias("score"),
        *SUBSCRIPTION,
        F.when(one, F.col("consumer.conn_id")).alias("conn_id"),
        F.when(one, F.col("consumer.consumer_id")).alias("consumer_id"),
        F.when(one, F.col("consumer.consumer_name")).alias("consumer_name"),
        "start_ts",
        "end_ts",
        "count",
        explanation.alias("explanation"),
        _evidence("unacked").alias("evidence"),
    )


# -- producers -------------------------------------------------------------------------------

PRODUCER = ["capture", "conn_id", "producer_id"]


def _producer_names(frames: DataFrame) -> DataFrame:
    """Each producer's name and topic, from its PRODUCER request and the broker's answer
    (a few frames: every SEND carries them too, but there are many)."""
    return (
        frames.where(F.col("command").isin("PRODUCER", "PRODUCER_SUCCESS"))
        .where(F.col("producer_id").isNotNull())
        .groupBy(*PRODUCER)
        .agg(
            F.first("producer_name", ignorenulls=True).alias("producer_name"),
            F.first("topic", ignorenulls=True).alias("topic"),
        )
    )


def sends_unreceipted(data: Inputs) -> DataFrame:
    """SENDs never answered although their producer or connection ended after them, or
    the capture went on past the send timeout."""
    closed = (
        data.rare.where((F.col("command") == "CLOSE_PRODUCER") & (F.col("direction") == "c2b"))
        .groupBy(*PRODUCER)
        .agg(F.max("ts").alias("closed_ts"))
    )
    ended = data.connections.where(F.col("close_reason").isin("fin", "rst")).select(
        "capture", "conn_id", F.col("last_ts").alias("conn_end")
    )
    # A capture that lost bytes of the connection may have lost the receipts with them.
    whole = data.connections.where(F.col("gaps") == 0).select("capture", "conn_id")
    unanswered = (
        data["latency_pairs"]
        .where((F.col("kind") == "SEND") & (F.col("outcome") == "unanswered"))
        .join(closed, PRODUCER, "left")
        .join(whole, ["capture", "conn_id"], "left_semi")
        .join(ended, ["capture", "conn_id"], "left")
        .join(data.capture_ends, "capture")
    )
    gone = (
        (F.col("closed_ts") > F.col("request_ts"))
        | F.col("conn_end").isNotNull()
        | (micros("capture_end") - micros("request_ts") >= T["send_timeout_us"])
    )
    grouped = (
        unanswered.where(gone)
        .groupBy(*PRODUCER)
        .agg(
            F.count("*").alias("count"),
            F.min("request_ts").alias("start_ts"),
            F.max(F.coalesce("closed_ts", "conn_end", "capture_end")).alias("end_ts"),
            F.max(F.col("closed_ts").isNotNull()).alias("closed"),
            F.max(F.col("conn_end").isNotNull()).alias("disconnected"),
        )
        .join(_producer_names(data.rare), PRODUCER, "left")
    )
    how = (
        F.when(F.col("closed"), "before the producer closed")
        .when(F.col("disconnected"), "before its connection ended")
        .otherwise(f"within {T['send_timeout_us'] / 1e6:g} s (the default send timeout)")
    )
    explanation = F.format_string(
        "Producer %s on %s sent %d messages the broker never acknowledged %s: the"
        " application was told they failed, or never heard.",
        _name("producer_name", "(unnamed)"),
        _name("topic", "(unknown topic)"),
        "count",
        how,
    )
    return _producer_finding(grouped, "send_unreceipted", "high", explanation)


def _producer_finding(
    grouped: DataFrame, kind: str, severity: str, explanation: Column
) -> DataFrame:
    return grouped.select(
        F.lit(kind).alias("kind"),
        F.lit(severity).alias("severity"),
        F.lit(1.0).alias("score"),
        *PRODUCER,
        "producer_name",
        "topic",
        "start_ts",
        "end_ts",
        "count",
        explanation.alias("explanation"),
        _evidence("latency_pairs", "frames").alias("evidence"),
        *(c for c in ("cause",) if c in grouped.columns),
    )


def slow_receipts(data: Inputs) -> DataFrame:
    """SENDs answered after the clients' default send timeout."""
    slow = data["latency_pairs"].where(
        (F.col("kind") == "SEND") & (F.col("latency_us") > T["send_timeout_us"])
    )
    grouped = (
        slow.groupBy(*PRODUCER)
        .agg(
            F.count("*").alias("count"),
            F.min("request_ts").alias("start_ts"),
            F.max("response_ts").alias("end_ts"),
            F.max("latency_us").alias("worst_us"),
        )
        .join(_producer_names(data.rare), PRODUCER, "left")
    )
    explanation = F.format_string(
        "Producer %s on %s waited longer than the %s s send timeout for %d receipts (the"
        " longest %s s): the application was told those sends failed.",
        _name("producer_name", "(unnamed)"),
        _name("topic", "(unknown topic)"),
        F.lit(f"{T['send_timeout_us'] / 1e6:g}"),
        "count",
        _seconds("worst_us"),
    )
    return _producer_finding(grouped, "slow_receipt", "high", explanation)


def send_errors(data: Inputs) -> DataFrame:
    """SEND_ERRORs per producer (by name: a producer the broker refused reconnects, with
    a new connection and id) and error code."""
    names = _producer_names(data.rare).select(
        *PRODUCER, F.col("producer_name").alias("named"), F.col("topic").alias("named_topic")
    )
    errors = (
        data.rare.where(F.col("command") == "SEND_ERROR")
        .select(*PRODUCER, "ts", "error_code", "error_message", "topic", "producer_name")
        .join(names, PRODUCER, "left")
        .withColumn("topic", F.coalesce("topic", "named_topic"))
        .withColumn("producer_name", F.coalesce("producer_name", "named"))
    )
    grouped = errors.groupBy(
        "capture", "topic", "producer_name", F.col("error_code").alias("cause")
    ).agg(
        F.count("*").alias("count"),
        F.min("ts").alias("start_ts"),
        F.max("ts").alias("end_ts"),
        F.first("error_message", ignorenulls=True).alias("message"),
        F.countDistinct("conn_id", "producer_id").alias("producers"),
        F.min(F.struct("conn_id", "producer_id")).alias("first"),
    )
    one = F.col("producers") == 1
    grouped = grouped.select(
        "*",
        F.when(one, F.col("first.conn_id")).alias("conn_id"),
        F.when(one, F.col("first.producer_id")).alias("producer_id"),
    )
    explanation = F.format_string(
        "The broker refused %d sends of producer %s on %s with %s (%s).",
        "count",
        _name("producer_name", "(unnamed)"),
        _name("topic", "(unknown topic)"),
        _name("cause", "an unknown error"),
        _name("message", "no message"),
    )
    return _producer_finding(grouped, "send_error", "high", explanation)


# -- connections -----------------------------------------------------------------------------

CLIENT = ["capture", "client_ip"]
HIGH_ERRORS = ("AuthenticationError", "AuthorizationError", "ChecksumError", "PersistenceError")


def errors(data: Inputs) -> DataFrame:
    """Error answers to each client address, by code (SEND_ERROR apart)."""
    coded = (
        F.col("error_code").isNotNull()
        & (F.col("error_code") != "NoError")
        & (F.col("command") != "SEND_ERROR")
        & (F.col("direction") == "b2c")
    )
    clients = F.broadcast(
        data.connections.select(
            "capture", "conn_id", "client_ip", _endpoint("server_ip", "server_port").alias("broker")
        )
    )
    grouped = (
        data.rare.where(coded)
        .join(clients, ["capture", "conn_id"])
        .groupBy(*CLIENT, "broker", F.col("error_code").alias("cause"))
        .agg(
            F.count("*").alias("count"),
            F.min("ts").alias("start_ts"),
            F.max("ts").alias("end_ts"),
            F.countDistinct("conn_id").alias("connections"),
            F.min("conn_id").alias("conn_id"),
            F.first("error_message", ignorenulls=True).alias("message"),
            F.first(F.coalesce("answers", "command"), ignorenulls=True).alias("request"),
            F.first("topic", ignorenulls=True).alias("topic"),
        )
    )
    explanation = F.format_string(
        "Client %s got %d %s errors from broker %s over %d connections (first to %s: %s).",
        "client_ip",
        "count",
        "cause",
        "broker",
        "connections",
        "request",
        _name("message", "no message"),
    )
    return grouped.select(
        F.lit("error").alias("kind"),
        _severity(F.col("cause").isin(*HIGH_ERRORS)).alias("severity"),
        F.lit(1.0).alias("score"),
        "cause",
        "capture",
        F.when(F.col("connections") == 1, F.col("conn_id")).alias("conn_id"),
        F.col("client_ip").alias("client"),
        "broker",
        "topic",
        "start_ts",
        "end_ts",
        "count",
        explanation.alias("explanation"),
        _evidence("frames", "latency_pairs").alias("evidence"),
    )


def _storms(events: DataFrame, key: list[str], threshold: float) -> DataFrame:
    """Per ``key``, the most events within any ``storm_window_s`` (a range over each
    event's time), with the first and last events and the total, where it reaches
    ``threshold``."""
    span = int(T["storm_window_s"] * 1e6)
    order = Window.partitionBy(*key).orderBy("us").rangeBetween(-span, 0)
    counted = events.withColumn("us", micros("ts")).withColumn("within", F.count("*").over(order))
    return (
        counted.groupBy(*key)
        .agg(
            F.max("within").alias("worst"),
            F.count("*").alias("count"),
            F.min("ts").alias("start_ts"),
            F.max("ts").alias("end_ts"),
        )
        .where(F.col("worst") >= threshold)
    )


def connect_storms(data: Inputs) -> DataFrame:
    """Client addresses that opened connections to a broker over and over."""
    opened = data.connections.where(F.col("protocol") == "pulsar").select(
        *CLIENT,
        _endpoint("server_ip", "server_port").alias("broker"),
        F.col("first_ts").alias("ts"),
    )
    storms = _storms(opened, [*CLIENT, "broker"], T["storm_connects"])
    explanation = F.format_string(
        "Client %s connected to broker %s %d times in %s s, %d within %s s.",
        "client_ip",
        "broker",
        "count",
        _seconds(micros("end_ts") - micros("start_ts")),
        "worst",
        F.lit(f"{T['storm_window_s']:g}"),
    )
    return storms.select(
        F.lit("connect_storm").alias("kind"),
        F.lit("medium").alias("severity"),
        F.lit(1.0).alias("score"),
        "capture",
        F.col("client_ip").alias("client"),
        "broker",
        "start_ts",
        "end_ts",
        "count",
        explanation.alias("explanation"),
        _evidence("connections").alias("evidence"),
    )


def lookup_storms(data: Inputs) -> DataFrame:
    """Client addresses that looked one topic up over and over."""
    clients = F.broadcast(data.connections.select("capture", "conn_id", "client_ip"))
    lookups = (
        data.rare.where((F.col("command") == "LOOKUP") & (F.col("direction") == "c2b"))
        .join(clients, ["capture", "conn_id"])
        .select(*CLIENT, "ts", "topic")
    )
    storms = _storms(lookups, [*CLIENT, "topic"], T["storm_lookups"])
    explanation = F.format_string(
        "Client %s looked %s up %d times in %s s, %d within %s s.",
        "client_ip",
        _name("topic", "(unknown topic)"),
        "count",
        _seconds(micros("end_ts") - micros("start_ts")),
        "worst",
        F.lit(f"{T['storm_window_s']:g}"),
    )
    return storms.select(
        F.lit("lookup_storm").alias("kind"),
        F.lit("medium").alias("severity"),
        F.lit(1.0).alias("score"),
        "capture",
        F.col("client_ip").alias("client"),
        "topic",
        "start_ts",
        "end_ts",
        "count",
        explanation.alias("explanation"),
        _evidence("frames").alias("evidence"),
    )


def topic_unloads(data: Inputs) -> DataFrame:
    """Topics whose producers or consumers the broker closed itself, and how long the
    clients took to come back (their next PRODUCER or SUBSCRIBE on the topic)."""
    frames = data.rare.where(F.col("topic").isNotNull())
    closes = frames.where(
        F.col("command").isin("CLOSE_PRODUCER", "CLOSE_CONSUMER") & (F.col("direction") == "b2c")
    ).select("capture", "topic", "ts", "conn_id", F.lit(True).alias("close"))
    returns = frames.where(
        F.col("command").isin("PRODUCER", "SUBSCRIBE") & (F.col("direction") == "c2b")
    ).select("capture", "topic", "ts", "conn_id", F.lit(False).alias("close"))
    order = Window.partitionBy("capture", "topic").orderBy("ts", F.desc("close"))
    after = order.rowsBetween(1, Window.unboundedFollowing)
    back = F.min(F.when(~F.col("close"), F.col("ts"))).over(after)
    timed = closes.unionByName(returns).withColumn("back_ts", back).where(F.col("close"))
    grouped = timed.groupBy("capture", "topic").agg(
        F.count("*").alias("count"),
        F.min("ts").alias("start_ts"),
        F.max(F.coalesce("back_ts", "ts")).alias("end_ts"),
        F.count("back_ts").alias("returned"),
        F.percentile_approx(micros("back_ts") - micros("ts"), 0.5).alias("back_us"),
        F.countDistinct("conn_id").alias("connections"),
        F.min("conn_id").alias("conn_id"),
    )
    explanation = F.format_string(
        "The broker closed %d producers and consumers of %s itself (the topic was unloaded"
        " or moved); %d came back, in %s ms (median).",
        "count",
        _name("topic", "(unknown topic)"),
        "returned",
        F.coalesce(_millis("back_us"), F.lit("-")),
    )
    return grouped.select(
        F.lit("topic_unload").alias("kind"),
        _severity(F.col("returned") < F.col("count")).alias("severity"),
        F.lit(1.0).alias("score"),
        "capture",
        F.when(F.col("connections") == 1, F.col("conn_id")).alias("conn_id"),
        "topic",
        "start_ts",
        "end_ts",
        "count",
        explanation.alias("explanation"),
        _evidence("frames").alias("evidence"),
    )


# -- chunked messages ------------------------------------------------------------------------


def _chunks(data: Inputs) -> DataFrame:
    """Per chunked message as one side saw it (its SEND by producer, or its deliveries
    by subscription): chunks seen, the last one's presence, the longest pause."""
    chunked = data.messages.where(
        F.col("num_chunks").isNotNull() & (F.col("num_chunks") > 1) & F.col("uuid").isNotNull()
    )
    key = ["capture", "command", "topic", "subscription", "producer_name", "uuid"]
    order = Window.partitionBy(*key).orderBy("ts", "stream_offset")
    pause = micros("ts") - micros(F.lag("ts").over(order))
    return (
        chunked.withColumn("pause_us", pause)
        .groupBy(*key)
        .agg(
            F.countDistinct("chunk_id").alias("chunks"),
            F.max("num_chunks").alias("num_chunks"),
            F.max(F.col("chunk_id") == F.col("num_chunks") - 1).alias("completed"),
            F.max("pause_us").alias("pause_us"),
            F.min("ts").alias("start_ts"),
            F.max("ts").alias("end_ts"),
            F.first("conn_id").alias("conn_id"),
        )
        .join(data.capture_ends, "capture")
    )


def chunk_problems(data: Inputs) -> DataFrame:
    """Chunked messages never completed, and those that paused between chunks."""
    chunks = _chunks(data)
    stalled_out = micros("capture_end") - micros("end_ts") >= T["chunk_stall_us"]
    incomplete = chunks.where(~F.col("completed") & stalled_out).withColumn(
        "kind", F.lit("chunk_incomplete")
    )
    stalled = chunks.where(F.col("completed") & (F.col("pause_us") > T["chunk_stall_us"]))
    stalled = stalled.withColumn("kind", F.lit("chunk_stall"))
    key = ["kind", "capture", "command", "topic", "subscription", "producer_name"]
    grouped = (
        incomplete.unionByName(stalled)
        .groupBy(*key)
        .agg(
            F.count("*").alias("count"),
            F.min("start_ts").alias("start_ts"),
            F.max("end_ts").alias("end_ts"),
            F.max("pause_us").alias("pause_us"),
            F.min(F.struct("chunks", "num_chunks")).alias("fewest"),
            F.countDistinct("conn_id").alias("connections"),
            F.min("conn_id").alias("conn_id"),
        )
    )
    where = F.when(
        F.col("command") == "SEND",
        F.format_string("sent by producer %s", _name("producer_name", "(unnamed)")),
    ).otherwise(F.format_string("delivered on subscription %s", _name("subscription", "(unknown)")))
    explanation = F.when(
        F.col("kind") == "chunk_incomplete",
        F.format_string(
            "%d chunked messages on %s %s never completed (as few as %d of %d chunks seen).",
            "count",
            _name("topic", "(unknown topic)"),
            where,
            "fewest.chunks",
            "fewest.num_chunks",
        ),
    ).otherwise(
        F.format_string(
            "%d chunked messages on %s %s paused between two chunks, up to %s s.",
            "count",
            _name("topic", "(unknown topic)"),
            where,
            _seconds("pause_us"),
        )
    )
    return grouped.select(
        "kind",
        _severity(F.col("kind") == "chunk_incomplete").alias("severity"),
        F.lit(1.0).alias("score"),
        "capture",
        F.when(F.col("connections") == 1, F.col("conn_id")).alias("conn_id"),
        "topic",
        "subscription",
        "producer_name",
        "start_ts",
        "end_ts",
        "count",
        explanation.alias("explanation"),
        _evidence("messages").alias("evidence"),
    )


# -- TCP -------------------------------------------------------------------------------------


def _per_side(connections: DataFrame) -> DataFrame:
    """The connections' TCP columns, one row per side (``side``: client or broker), the
    round trip its own segments timed (to its peer) beside what it advertised and sent."""
    sides = []
    for side, peer in (("client", "broker"), ("broker", "client")):
        sides.append(
            connections.select(
                "capture",
                "conn_id",
                _endpoint("client_ip", "client_port").alias("client"),
                _endpoint("server_ip", "server_port").alias("broker"),
                "first_ts",
                "last_ts",
                F.lit(side).alias("side"),
                F.lit(peer).alias("peer"),
                F.col(f"tcp_zero_windows_{side}").alias("zero_windows"),
                F.col(f"tcp_zero_window_us_{side}").alias("zero_us"),
                F.col(f"tcp_longest_zero_window_us_{side}").alias("longest_zero_us"),
                F.col(f"tcp_longest_zero_window_ts_{side}").alias("longest_zero_ts"),
                F.col(f"tcp_retransmissions_{side}").alias("retransmissions"),
                F.col(f"tcp_retransmitted_bytes_{side}").alias("retransmitted_bytes"),
                F.col(f"tcp_retransmission_burst_{side}").alias("burst"),
                F.col(f"tcp_retransmission_burst_ts_{side}").alias("burst_ts"),
                F.least(
                    F.col(f"tcp_rtt_{peer}_handshake_us"), F.col(f"tcp_rtt_{peer}_min_us")
                ).alias("rtt_us"),
                F.col(f"tcp_rtt_{peer}_samples").alias("rtt_samples"),
            )
        )
    return reduce(DataFrame.unionByName, sides)


def tcp_problems(data: Inputs) -> DataFrame:
    """Zero windows, retransmission bursts and slow paths, per side of a connection."""
    sides = _per_side(data.connections)
    life = F.greatest(micros("last_ts") - micros("first_ts"), F.lit(1))
    zero = sides.where(F.col("zero_us") >= T["zero_window_us"]).select(
        F.lit("zero_window").alias("kind"),
        _severity(F.col("zero_us") >= 1_000_000).alias("severity"),
        F.least(F.col("zero_us") / life, F.lit(1.0)).alias("score"),
        "capture",
        "conn_id",
        "client",
        "broker",
        F.col("longest_zero_ts").alias("start_ts"),
        F.timestamp_micros(micros("longest_zero_ts") + F.col("longest_zero_us")).alias("end_ts"),
        F.col("zero_windows").alias("count"),
        F.col("zero_us").alias("duration_us"),
        F.format_string(
            "The %s of connection %s -> %s advertised a zero TCP window %d times, %s s in"
            " all (the longest %s s): it stopped reading its socket.",
            "side",
            "client",
            "broker",
            "zero_windows",
            _seconds("zero_us"),
            _seconds("longest_zero_us"),
        ).alias("explanation"),
    )
    bursts = sides.where(F.col("burst") >= T["retransmission_burst"]).select(
        F.lit("retransmission_burst").alias("kind"),
        F.lit("medium").alias("severity"),
        F.lit(0.5).alias("score"),
        "capture",
        "conn_id",
        "client",
        "broker",
        F.col("burst_ts").alias("start_ts"),
        F.timestamp_micros(micros("burst_ts") + 1_000_000).alias("end_ts"),
        F.col("retransmissions").alias("count"),
        F.format_string(
            "The %s of connection %s -> %s sent %d TCP segments again (%d bytes), %d of"
            " them within one second: packets were lost between the capture point and the"
            " %s.",
            "side",
            "client",
            "broker",
            "retransmissions",
            "retransmitted_bytes",
            "burst",
            "peer",
        ).alias("explanation"),
    )
    slow = sides.where(F.col("rtt_us") >= T["slow_rtt_us"]).select(
        F.lit("slow_network").alias("kind"),
        F.lit("medium").alias("severity"),
        F.lit(0.5).alias("score"),
        "capture",
        "conn_id",
        "client",
        "broker",
        F.col("first_ts").alias("start_ts"),
        F.col("last_ts").alias("end_ts"),
        F.col("rtt_samples").alias("count"),
        F.format_string(
            "The shortest round trip from the capture point to the %s of connection %s ->"
            " %s and back is %s ms: every request over it waits at least that long.",
            "peer",
            "client",
            "broker",
            _millis("rtt_us"),
        ).alias("explanation"),
    )
    evidence = _evidence("connections").alias("evidence")
    return reduce(
        partial(DataFrame.unionByName, allowMissingColumns=True),
        (part.select("*", evidence) for part in (zero, bursts, slow)),
    )


def slow_brokers(data: Inputs) -> DataFrame:
    """Kinds of request slow at the broker itself, the network's round trip apart."""
    pairs = data["latency_pairs"].where(
        F.col("remote_us").isNotNull() & ~F.col("kind").isin(*NOT_BROKER_TIME)
    )
    # The percentile only where the slowest answer reaches the threshold: usually nowhere.
    key = ["capture", "broker", "kind"]
    slow = (
        pairs.groupBy(*key)
        .agg(F.max("remote_us").alias("slowest"))
        .where(F.col("slowest") >= T["slow_remote_us"])
    )
    grouped = (
        pairs.join(F.broadcast(slow.select(*key)), key, "left_semi")
        .groupBy(*key)
        .agg(
            F.percentile_approx("remote_us", 0.99).alias("remote_p99_us"),
            F.percentile_approx("network_us", 0.5).alias("network_us"),
            F.count("*").alias("count"),
            F.min("request_ts").alias("start_ts"),
            F.max("response_ts").alias("end_ts"),
        )
        .where(F.col("remote_p99_us") >= T["slow_remote_us"])
    )
    explanation = F.format_string(
        "Broker %s took %s s (99th percentile) to answer %s requests, of which the"
        " network's round trip was %s ms: the broker is slow, not the network.",
        _name("broker", "(unknown)"),
        _seconds("remote_p99_us"),
        "kind",
        _millis("network_us"),
    )
    return grouped.select(
        F.lit("slow_broker").alias("kind"),
        F.lit("medium").alias("severity"),
        F.lit(0.5).alias("score"),
        F.col("kind").alias("cause"),
        "capture",
        "broker",
        "start_ts",
        "end_ts",
        "count",
        explanation.alias("explanation"),
        _evidence("latency_pairs").alias("evidence"),
    )


# -- all of them -----------------------------------------------------------------------------

KINDS: list[Callable[[Inputs], DataFrame]] = [
    permit_starvation,
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
            _endpoint("client_ip", "client_port").alias("conn_client"),
            _endpoint("server_ip", "server_port").alias("conn_broker"),
        )
    )
    severity = F.array_position(F.array(*(F.lit(s) for s in SEVERITIES)), F.col("severity"))
    # Findings are few: ranked in one partition (Spark warns of a window without one).
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
