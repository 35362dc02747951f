"""Messages delivered again, by cause, and redelivery storms."""

from __future__ import annotations

from pyspark.sql import Column, DataFrame, Window
from pyspark.sql import functions as F

from .. import redelivery
from ..common import message_ids, micros
from .base import (
    CONSUMER,
    SUBSCRIPTION,
    Inputs,
    T,
    evidence,
    millis,
    percent,
    seconds,
    severity,
    shown,
    storms,
)


def _redeliver_requests(data: Inputs) -> DataFrame:
    """Each REDELIVER_UNACKNOWLEDGED_MESSAGES with ``age_us``: how long the youngest
    delivery it covers had been held (the named entries' latest deliveries before it, or
    for one naming none, the consumer's latest delivery), and its ``cause``
    (:func:`_cause`)."""
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
        "consumer_epoch",
        "sub_type",
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
    request = [*CONSUMER, "ts", "stream_offset"]  # the frame: its topic may be unknown
    named_ids = message_ids(requests.where(F.col("num_message_ids") > 0))
    named = (
        named_ids.join(deliveries, [*CONSUMER, "ledger_id", "entry_id"])
        .where(F.col("delivered_ts") <= F.col("ts"))
        .groupBy(*request_key)
        .agg(
            F.max("delivered_ts").alias("youngest_ts"),
            F.min("delivered_ts").alias("oldest_ts"),
        )
    )
    left_behind = _left_behind(named, deliveries, named_ids, data.ack_frames, asking)
    named = named.join(left_behind, request, "left").select(
        *request_key,
        "youngest_ts",
        F.lit(None).cast("long").alias("consumer_epoch"),
        F.lit(False).alias("epoch_moved"),
        F.lit(False).alias("everything"),
        F.coalesce("left_behind", F.lit(False)).alias("left_behind"),
    )
    # For a request naming none, the consumer's latest delivery before it: a running
    # last value over its deliveries and requests in time order, no join.
    order = Window.partitionBy(*CONSUMER).orderBy("ts", "stream_offset")
    everything = (
        requests.where(F.coalesce("num_message_ids", F.lit(0)) == 0)
        .select(
            *request_key,
            "sub_type",
            "consumer_epoch",
            F.lit(None).cast("timestamp").alias("delivered_ts"),
        )
        .unionByName(
            deliveries.select(
                *CONSUMER,
                F.lit(None).cast("string").alias("topic"),
                F.lit(None).cast("string").alias("subscription"),
                F.col("delivered_ts").alias("ts"),
                F.lit(-1).cast("long").alias("stream_offset"),
                F.lit(None).cast("string").alias("sub_type"),
                F.lit(None).cast("long").alias("consumer_epoch"),
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
    epochs = _epochs(data, asking)
    whole = (
        everything.where(F.col("delivered_ts").isNull())
        .join(epochs, request, "left")
        .select(
            *request_key,
            "youngest_ts",
            "consumer_epoch",
            F.coalesce("epoch_moved", F.lit(False)).alias("epoch_moved"),
            F.col("sub_type").isin("Shared", "Key_Shared").alias("everything"),
            F.lit(False).alias("left_behind"),
        )
    )
    age = micros("ts") - micros("youngest_ts")
    # A consumer that asked sooner than any client times acknowledgements out acknowledges
    # negatively: so are its other requests (a client using both is rare).
    nacking = F.min(age).over(Window.partitionBy(*CONSUMER)) < T["ack_timeout_floor_us"]
    return (
        named.unionByName(whole)
        .where(F.col("youngest_ts").isNotNull())
        .withColumn("nacking", nacking)
        .select(*request_key, "consumer_epoch", age.alias("age_us"), _cause(age).alias("cause"))
    )


def _cause(age: Column) -> Column:
    """Why a client asked for deliveries again, from what the wire shows (no field says):

    - a request naming none whose ``consumer_epoch`` is above the consumer's before: it
      moved its epoch, asking for everything unacknowledged (the Java client's ack timeout,
      negative acks or application on an Exclusive or Failover subscription):
      ``consumer_epoch``;
    - one naming none on a Shared or Key_Shared subscription, whose clients name the
      messages their ack timeouts and negative acks ask for: ``application``;
    - sooner than any client times acknowledgements out, from a consumer that ever did so
      (``nacking``), leaving an older delivery unacknowledged and unasked for (an ack
      timeout takes every delivery held that long, oldest first), or as long after as the
      clients' default negative-ack delay: ``negative_ack``;
    - else ``ack_timeout``.
    """
    default_nack = (age >= T["default_nack_delay_us"]) & (
        age < T["default_nack_delay_us"] * 4 / 3 + T["ack_timeout_floor_us"]
    )
    return (
        F.when(F.col("epoch_moved"), "consumer_epoch")
        .when(F.col("everything"), "application")
        .when(F.col("nacking") | F.col("left_behind") | default_nack, "negative_ack")
        .otherwise("ack_timeout")
    )


def _left_behind(
    named: DataFrame,
    deliveries: DataFrame,
    named_ids: DataFrame,
    ack_frames: DataFrame,
    asking: DataFrame,
) -> DataFrame:
    """Per request naming entries (``named``, with its ``oldest_ts`` delivery), whether
    the consumer then held a delivery older than those, neither acknowledged nor named by
    any of its requests up to this one: ``left_behind``."""
    request_key = [*CONSUMER, "topic", "subscription", "ts", "stream_offset"]
    older = (
        named.join(deliveries, CONSUMER)
        .where(F.col("delivered_ts") < F.col("oldest_ts"))
        .select(*request_key, "ledger_id", "entry_id", "delivered_ts")
    )
    acked = message_ids(ack_frames.join(asking, CONSUMER, "left_semi")).select(
        *CONSUMER,
        "ledger_id",
        "entry_id",
        F.col("ts").alias("acked_ts"),
        F.coalesce("ack_type", F.lit("Individual")).alias("ack_type"),
    )
    cumulative = F.col("ack_type") == "Cumulative"
    covered = F.when(
        cumulative,
        F.struct(F.col("a.ledger_id"), F.col("a.entry_id"))
        >= F.struct(F.col("o.ledger_id"), F.col("o.entry_id")),
    ).otherwise(
        (F.col("a.ledger_id") == F.col("o.ledger_id"))
        & (F.col("a.entry_id") == F.col("o.entry_id"))
    )
    same = [F.col(f"a.{c}") == F.col(f"o.{c}") for c in CONSUMER]
    unacked = older.alias("o").join(
        acked.alias("a"),
        [*same, covered, F.col("a.acked_ts") <= F.col("o.ts")],
        "left_anti",
    )
    asked = named_ids.select(
        *CONSUMER, "ledger_id", "entry_id", F.col("ts").alias("asked_ts")
    ).alias("n")
    unasked = unacked.alias("o").join(
        asked,
        [
            *(F.col(f"n.{c}") == F.col(f"o.{c}") for c in (*CONSUMER, "ledger_id", "entry_id")),
            F.col("n.asked_ts") <= F.col("o.ts"),
        ],
        "left_anti",
    )
    return (
        unasked.select(*CONSUMER, "ts", "stream_offset")
        .distinct()
        .withColumn("left_behind", F.lit(True))
    )


def _epochs(data: Inputs, asking: DataFrame) -> DataFrame:
    """Per REDELIVER request of a consumer, whether its ``consumer_epoch`` is above every
    one the consumer gave before (its SUBSCRIBE's, its earlier requests'): ``epoch_moved``."""
    said = (
        data.rare.where(
            F.col("command").isin("SUBSCRIBE", redelivery.REDELIVER)
            & F.col("consumer_epoch").isNotNull()
        )
        .join(asking, CONSUMER, "left_semi")
        .select(
            *CONSUMER, "topic", "subscription", "ts", "stream_offset", "command", "consumer_epoch"
        )
    )
    order = Window.partitionBy(*CONSUMER).orderBy("ts", "stream_offset")
    before = F.max("consumer_epoch").over(order.rowsBetween(Window.unboundedPreceding, -1))
    return (
        said.withColumn("before", before)
        .where(F.col("command") == redelivery.REDELIVER)
        .select(
            *CONSUMER,
            "ts",
            "stream_offset",
            (F.col("consumer_epoch") > F.col("before")).alias("epoch_moved"),
        )
    )


def redelivery_causes(data: Inputs) -> DataFrame:
    """Every redelivery (not one a SEEK asked for) with its ``cause``; a redelivery a
    REDELIVER request triggered takes the cause, ``age_us`` and ``consumer_epoch`` of the
    latest such request of its consumer's subscription before it, and ``median_age_us``
    (:func:`_median_age`).

    The redeliveries of one instant to one consumer (one packet's) are one row of their
    number (``redeliveries``), never a row each. Only those a request triggered are sorted
    with the requests (a subscription's all in one task): a reconnect's, or the broker's
    own, have their cause in their trigger."""
    receiver = ["conn_id", "consumer_id", "consumer_name"]
    again = (
        data["redeliveries"]
        .where((F.col("delivery_number") > 1) & (F.col("trigger") != "seek"))
        .groupBy(*SUBSCRIPTION, *receiver, "ts", "trigger")
        .agg(F.count("*").alias("redeliveries"))
    )
    requested = F.col("trigger").startswith("redeliver_")
    requests = _redeliver_requests(data).select(
        *SUBSCRIPTION, "ts", "cause", "age_us", "consumer_epoch"
    )
    order = Window.partitionBy(*SUBSCRIPTION).orderBy("ts", "is_request")
    running = order.rowsBetween(Window.unboundedPreceding, Window.currentRow)
    request = F.struct("cause", "age_us", "consumer_epoch")
    rows = (
        again.where(requested)
        .select("*", F.lit(False).alias("is_request"))
        .unionByName(
            requests.select("*", F.lit(True).alias("is_request")), allowMissingColumns=True
        )
    )
    asked = F.last(F.when(F.col("is_request"), request), ignorenulls=True).over(running)
    by_request = (
        rows.withColumn("asked", asked)
        .where(~F.col("is_request"))
        .select(
            *SUBSCRIPTION,
            *receiver,
            "ts",
            "redeliveries",
            F.coalesce("asked.cause", F.lit("negative_ack")).alias("cause"),
            F.col("asked.age_us").alias("age_us"),
            F.col("asked.consumer_epoch").alias("consumer_epoch"),
        )
        .withColumn("median_age_us", _median_age())
    )
    unasked = again.where(~requested).select(
        *SUBSCRIPTION,
        *receiver,
        "ts",
        "redeliveries",
        F.when(F.col("trigger") == "reconnect", "reconnect")
        .otherwise("unexplained")
        .alias("cause"),
        *(F.lit(None).cast("long").alias(c) for c in ("age_us", "consumer_epoch", "median_age_us")),
    )
    return by_request.unionByName(unasked)


def _median_age() -> Column:
    """A row's ``age_us`` where that is its (subscription, cause)'s median, weighted by
    ``redeliveries``: the smallest age reached by at least half of the redeliveries that
    have one (the element a percentile takes, rank ceil(n / 2)). Its minimum per group is
    the median, found without a row per redelivery."""
    group = Window.partitionBy(*SUBSCRIPTION, "cause")
    aged = F.when(F.col("age_us").isNotNull(), F.col("redeliveries"))
    reached = F.sum(aged).over(
        group.orderBy("age_us").rowsBetween(Window.unboundedPreceding, Window.currentRow)
    )
    return F.when(
        F.col("age_us").isNotNull() & (reached >= F.ceil(F.sum(aged).over(group) / 2)),
        F.col("age_us"),
    )


_CAUSE_TEXT = {
    "consumer_epoch": "the consumer moved to consumer epoch %s (its latest) %s ms (median)"
    " after their delivery, asking for everything it had not acknowledged again (and"
    " dropping what it held)",
    "negative_ack": "the client asked for them again %s ms (median) after their delivery:"
    " negative acknowledgements",
    "ack_timeout": "the client's ack timeout expired: it asked for them again %s ms (median)"
    " after their delivery without acknowledging them",
    "application": "the application asked for every message it had not acknowledged again"
    " %s ms (median) after their delivery",
    "reconnect": "the consumer reconnected before acknowledging them",
    "unexplained": "of nothing the wire shows (the broker's own decision, or the capture"
    " missed the cause)",
}


def _because(cause: Column, age_us: Column, epoch: Column) -> Column:
    """The end of a redelivery finding's sentence: why, with the request's age (and the
    consumer epoch it moved to)."""
    arguments = {0: [], 1: [millis(age_us)], 2: [epoch.cast("string"), millis(age_us)]}
    chosen = F
    for name, text in _CAUSE_TEXT.items():
        values = arguments[text.count("%s")]
        said = F.format_string(text, *values) if values else F.lit(text)
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
            F.sum("redeliveries").alias("count"),
            F.min("ts").alias("start_ts"),
            F.max("ts").alias("end_ts"),
            F.min("median_age_us").alias("age_us"),
            F.max("consumer_epoch").alias("consumer_epoch"),
            F.countDistinct("conn_id", "consumer_id").alias("consumers"),
            F.min(F.struct("conn_id", "consumer_id", "consumer_name")).alias("consumer"),
        )
        .join(deliveries, SUBSCRIPTION, "left")
    )
    rate = F.col("count") / F.greatest(F.col("deliveries"), F.col("count"))
    text = F.col("cause")
    because = _because(text, F.col("age_us"), F.col("consumer_epoch"))
    explanation = F.format_string(
        "%d messages of %s / %s were delivered again (%s of its %d deliveries, to %d"
        " consumers) because %s.",
        "count",
        shown("topic", "(unknown topic)"),
        shown("subscription", "(unknown subscription)"),
        percent(rate),
        F.coalesce("deliveries", "count"),
        "consumers",
        because,
    )
    one = F.col("consumers") == 1
    return grouped.select(
        F.lit("redelivery").alias("kind"),
        severity(rate >= 0.5, ~text.isin("negative_ack", "application")).alias("severity"),
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
        evidence("redeliveries", "redelivery_summary").alias("evidence"),
    )


def redelivery_storms(data: Inputs) -> DataFrame:
    """Subscriptions that had many redeliveries within a short time, most of their
    deliveries redeliveries."""
    again = (
        data["redeliveries"]
        .where((F.col("delivery_number") > 1) & (F.col("trigger") != "seek"))
        .select(*SUBSCRIPTION, "ts")
    )
    found = storms(again, SUBSCRIPTION, T["storm_redeliveries"])
    deliveries = (
        data["redelivery_summary"].groupBy(*SUBSCRIPTION).agg(F.sum("deliveries").alias("all"))
    )
    rate = F.col("count") / F.greatest(F.col("all"), F.col("count"))
    explanation = F.format_string(
        "%s / %s had a redelivery storm: %d redeliveries in %s s (%s of its %d deliveries),"
        " %d within %s s.",
        shown("topic", "(unknown topic)"),
        shown("subscription", "(unknown subscription)"),
        "count",
        seconds(micros("end_ts") - micros("start_ts")),
        percent(rate),
        F.coalesce("all", "count"),
        "worst",
        F.lit(f"{T['storm_window_s']:g}"),
    )
    return (
        found.join(deliveries, SUBSCRIPTION, "left")
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
            evidence("redeliveries", "redelivery_summary").alias("evidence"),
        )
    )
