"""What every kind of finding shares: the tables they read (:class:`Inputs`), the
entities' keys, and the pieces of their sentences."""

from __future__ import annotations

from collections.abc import Mapping

from pyspark.sql import Column, DataFrame, Window
from pyspark.sql import functions as F

from ...tables.analytics import THRESHOLDS
from ..common import micros

T = THRESHOLDS
BUSIEST = ("SEND", "SEND_RECEIPT", "MESSAGE", "ACK", "FLOW", "PING", "PONG")
# The frame columns the kinds read from the other commands' frames (``Inputs.rare``): a
# kind that reads another fails at once, as Spark knows no such column.
RARE_COLUMNS = (
    "capture",
    "conn_id",
    "stream_offset",
    "ts",
    "direction",
    "command",
    "answers",
    "request_ts",
    "error_code",
    "error_message",
    "topic",
    "subscription",
    "sub_type",
    "key_shared_mode",
    "hash_ranges",
    "producer_id",
    "producer_name",
    "consumer_id",
    "consumer_name",
    "consumer_epoch",
    "num_message_ids",
    "message_ids",
    "ledger_id",
    "entry_id",
    "partition",
    "batch_index",
)
# The columns of the ACK frames the kinds read (``Inputs.ack_frames``).
ACK_COLUMNS = (
    "capture",
    "topic",
    "subscription",
    "conn_id",
    "consumer_id",
    "consumer_name",
    "stream_offset",
    "ts",
    "command",
    "ack_type",
    "ack_sets",
    "validation_error",
    "message_ids",
    "ledger_id",
    "entry_id",
    "partition",
    "batch_index",
    "unacked_in_batch",
)
CONSUMER = ["capture", "conn_id", "consumer_id"]
SUBSCRIPTION = ["capture", "topic", "subscription"]


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
        # the frames for each of them cost as much as all of them together. Only the
        # columns they read are kept: the others would be read and held for nothing.
        rare = frames.where(~F.col("command").isin(*BUSIEST)).select(*RARE_COLUMNS)
        self.rare = rare.localCheckpoint(eager=True)
        # The ACK frames, read once: the acknowledgement kinds read them five times over
        # (ids named, batch members left, cumulative reach), each a scan of the frames.
        # Kept by the first kind that reads them, while the others run (Spark computes a
        # kept partition once, the other readers waiting for it).
        acking = frames.where(F.col("command") == "ACK").select(*ACK_COLUMNS)
        self.ack_frames = acking.localCheckpoint(eager=False)

    def __getitem__(self, table: str) -> DataFrame:
        return self.analytics[table]


# -- helpers ---------------------------------------------------------------------------------


def seconds(us: Column | str) -> Column:
    """Microseconds as seconds with two decimals, for a sentence."""
    return F.format_number((F.col(us) if isinstance(us, str) else us) / 1e6, 2)


def millis(us: Column | str) -> Column:
    """Microseconds as milliseconds with one decimal."""
    return F.format_number((F.col(us) if isinstance(us, str) else us) / 1e3, 1)


def percent(fraction: Column | str) -> Column:
    value = F.col(fraction) if isinstance(fraction, str) else fraction
    return F.format_string("%.0f%%", value * 100)


def shown(column: str, fallback: str) -> Column:
    """A name for a sentence: the column's value, or what stands for it when unknown."""
    return F.coalesce(F.col(column), F.lit(fallback))


def evidence(*tables: str) -> Column:
    return F.array(*(F.lit(t) for t in tables))


def endpoint(ip: str, port: str) -> Column:
    """``ip:port``, an IPv6 address in brackets (as ``broker_addresses`` writes them)."""
    shown = F.when(F.col(ip).contains(":"), F.format_string("[%s]", ip)).otherwise(F.col(ip))
    return F.concat_ws(":", shown, F.col(port).cast("string"))


def severity(high: Column, medium: Column | None = None) -> Column:
    """``high`` where ``high`` holds, ``medium`` where ``medium`` does (all: None), else low."""
    chosen = F.when(high, F.lit("high"))
    if medium is None:
        return chosen.otherwise(F.lit("medium"))
    return chosen.when(medium, F.lit("medium")).otherwise(F.lit("low"))


def storms(events: DataFrame, key: list[str], threshold: float) -> DataFrame:
    """Per ``key``, the most events within any ``storm_window_s`` (each event with those
    before it by at most that span), with the first and last events and the total, where it
    reaches ``threshold``.

    Counted as a running sum over each event (+1) and its expiry one span later (-1), an
    expiry after the events of its instant: a range frame (``rangeBetween``) gives the same
    counts, but Spark sums such a frame again each time it slides, which is quadratic in
    the events of one key (a subscription redelivering millions of messages). The events
    of one instant (the frames of one packet) are one step of their number: the sort is
    of instants, and a key's are all in one task."""
    span = int(T["storm_window_s"] * 1e6)
    timed = events.groupBy(*key, micros("ts").alias("us")).agg(
        F.count("*").alias("events"), F.min("ts").alias("ts")
    )
    # Each instant's arrival and expiry made from its one row: a union of two selects of
    # ``timed`` would aggregate the events twice.
    arrival = F.struct("ts", "us", F.col("events").alias("step"))
    expiry = F.struct(
        F.lit(None).cast("timestamp").alias("ts"),
        (F.col("us") + span).alias("us"),
        (-F.col("events")).alias("step"),
    )
    steps = timed.select(*key, F.explode(F.array(arrival, expiry)).alias("_step"))
    order = Window.partitionBy(*key).orderBy("us", F.desc("step"))
    running = F.sum("step").over(order.rowsBetween(Window.unboundedPreceding, 0))
    counted = steps.select(*key, "_step.*").withColumn("within", running).where(F.col("step") > 0)
    return (
        counted.groupBy(*key)
        .agg(
            F.max("within").alias("worst"),
            F.sum("step").alias("count"),
            F.min("ts").alias("start_ts"),
            F.max("ts").alias("end_ts"),
        )
        .where(F.col("worst") >= threshold)
    )


# -- spans without permits while messages waited ---------------------------------------------


def entry_deliveries(frames: DataFrame, topics: DataFrame) -> DataFrame:
    """Every entry delivered (one MESSAGE frame) on the ``topics`` (``capture``, ``topic``),
    to any subscription: its consumer, ``ts`` and ``position`` (ledger, entry)."""
    return (
        frames.where(F.col("command") == "MESSAGE")
        .join(F.broadcast(topics.distinct()), ["capture", "topic"], "left_semi")
        .select(*CONSUMER, "topic", "ts", F.struct("ledger_id", "entry_id").alias("position"))
    )


def with_messages_waiting(spans: DataFrame, deliveries: DataFrame) -> DataFrame:
    """The ``starvation_intervals`` rows ``spans`` during which the broker had messages for
    the consumer: it delivered at once when permits came (``backlog_waiting``), or it held
    an entry for the consumer throughout (:func:`_held`: a dispatcher can be slow to
    deliver after a FLOW, as a Key_Shared one replaying what it could not dispatch is)."""
    late = spans.where(~F.col("backlog_waiting"))
    return (
        spans.join(_held(late, deliveries), [*CONSUMER, "start_ts"], "left")
        .where(F.col("backlog_waiting") | F.coalesce("held", F.lit(False)))
        .drop("held")
    )


def _held(spans: DataFrame, deliveries: DataFrame) -> DataFrame:
    """The ``spans`` (``start_ts``, ``end_ts``) the first entry delivered to the consumer
    after which was in the topic before the span began, as a delivery (``deliveries``: to
    any subscription of the topic) of that entry or a later one before then shows: a ledger
    is written in order, and a later ledger has a greater id."""
    span = [*CONSUMER, "start_ts"]
    keyed = F.broadcast(spans.select(*span, "topic", "end_ts"))
    mine = deliveries.select(*CONSUMER, F.col("ts").alias("d_ts"), "position")
    after = (
        keyed.join(mine, CONSUMER)
        .where(F.col("d_ts") >= F.col("end_ts"))
        .groupBy(*span)
        .agg(F.min_by("position", "d_ts").alias("next_position"))
    )
    topic = deliveries.select("capture", "topic", F.col("ts").alias("d_ts"), "position")
    before = (
        keyed.join(topic, ["capture", "topic"])
        .where(F.col("d_ts") < F.col("start_ts"))
        .groupBy(*span)
        .agg(F.max("position").alias("written"))
    )
    return (
        after.join(before, span)
        .where(F.col("next_position") <= F.col("written"))
        .select(*span, F.lit(True).alias("held"))
    )
