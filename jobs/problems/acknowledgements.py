"""Acknowledgements lost on a reconnect, and entries left unacknowledged."""

from __future__ import annotations

from pyspark.sql import DataFrame
from pyspark.sql import functions as F

from .. import acks, redelivery
from .base import SUBSCRIPTION, Inputs, evidence, shown


def acks_lost_on_reconnect(data: Inputs) -> DataFrame:
    """Messages redelivered after a reconnect that the client had acknowledged
    individually after their previous delivery."""
    again = (
        data["redeliveries"]
        .where((F.col("trigger") == "reconnect") & (F.col("delivery_number") > 1))
        .select(*redelivery.MESSAGE, "ts", "previous_ts", *acks.RECEIVER)
        .localCheckpoint()  # few rows, read three times below
    )
    # The acks of the subscriptions redelivered after a reconnect alone: usually none.
    reconnected = F.broadcast(again.select(*SUBSCRIPTION).distinct())
    acking = data.ack_frames.join(reconnected, SUBSCRIPTION, "left_semi")
    acked = (
        acks.acks(acking)
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
        .join(_left_in_ack_set(acking), [*acks.ENTRY, "ack_ts", "batch_index"], "left_anti")
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
        shown("topic", "(unknown topic)"),
        shown("subscription", "(unknown subscription)"),
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
        evidence("redeliveries", "latency_pairs").alias("evidence"),
    )


def _left_in_ack_set(acking: DataFrame) -> DataFrame:
    """The batch members each ACK left unacknowledged in the ack_set of the entry it names
    (`frames.unacked_in_batch`): a batch-index acknowledgement acks the others only."""
    return acking.select(
        *SUBSCRIPTION, F.col("ts").alias("ack_ts"), F.explode("unacked_in_batch").alias("id")
    ).select(*SUBSCRIPTION, "ack_ts", "id.ledger_id", "id.entry_id", "id.batch_index")


def _partly_acked(ack_frames: DataFrame) -> DataFrame:
    """Entries acknowledged in part by batch-index acknowledgements: per entry, the batch
    members that every ACK naming it on its subscription left set in its ack_set
    (`frames.unacked_in_batch`; the broker clears a member's bit for good on any ack of
    it, and a plain ack clears them all), with the last of those ACKs."""
    acking = ack_frames.where(F.col("topic").isNotNull() & F.col("subscription").isNotNull())
    batchwise = F.broadcast(
        acking.where(F.size("unacked_in_batch") > 0).select(*SUBSCRIPTION).distinct()
    )
    acking = acking.join(batchwise, SUBSCRIPTION, "left_semi")
    frame = ["conn_id", "stream_offset"]
    entry = [*SUBSCRIPTION, "ledger_id", "entry_id"]

    def listed(column: str) -> DataFrame:
        return acking.select(
            *SUBSCRIPTION, *frame, *acks.RECEIVER[1:], "ts", F.explode(column).alias("id")
        ).select("*", "id.ledger_id", "id.entry_id", "id.batch_index")

    named = (
        listed("message_ids")
        .groupBy(*entry)
        .agg(
            F.countDistinct(*frame).alias("acks"),
            F.max("ts").alias("last_ack_ts"),
            F.max(F.struct("ts", *acks.RECEIVER)).alias("last"),
        )
    )
    members = (
        listed("unacked_in_batch")
        .groupBy(*entry, "batch_index")
        .agg(F.countDistinct(*frame).alias("listed"))
    )
    return (
        members.join(named, entry)
        .where(F.col("listed") == F.col("acks"))
        .groupBy(*entry)
        .agg(
            F.count("*").alias("num_messages"),
            F.first("last_ack_ts").alias("last_ts"),
            F.first("last").alias("last"),
        )
        .select(
            *entry,
            "num_messages",
            "last_ts",
            F.col("last.conn_id").alias("conn_id"),
            F.col("last.consumer_id").alias("consumer_id"),
            F.col("last.consumer_name").alias("consumer_name"),
            F.lit(True).alias("partly"),
        )
    )


def ack_holes(data: Inputs) -> DataFrame:
    """Entries left unacknowledged behind later ones the subscription acknowledged, and
    batches acknowledged in part (batch-index acks) that it went on past."""
    position = F.struct("ledger_id", "entry_id")
    whole = data["unacked"].select(
        *SUBSCRIPTION,
        "ledger_id",
        "entry_id",
        "num_messages",
        F.col("last_delivery_ts").alias("last_ts"),
        *acks.RECEIVER,
        F.lit(False).alias("partly"),
    )
    # A batch acknowledged in part is a delivery no ack answered too: counted once, in part;
    # unless a cumulative ACK took it whole, before or after. Computed once each (few
    # rows): read in several places below, each would scan the frames again.
    partly = _partly_acked(data.ack_frames).localCheckpoint()
    reached = acks.cumulative_reach(
        data.ack_frames.join(
            F.broadcast(partly.select(*SUBSCRIPTION).distinct()), SUBSCRIPTION, "left_semi"
        )
    )
    partly = (
        partly.join(reached, SUBSCRIPTION, "left")
        .where(F.col("whole_reach").isNull() | (position > F.col("whole_reach")))
        .drop("whole_reach")
    )
    entry = [*SUBSCRIPTION, "ledger_id", "entry_id"]
    left = (
        whole.join(partly.select(*entry), entry, "left_anti").unionByName(partly).localCheckpoint()
    )
    # The acks of the subscriptions that left entries unacknowledged alone.
    leaving = F.broadcast(left.select(*SUBSCRIPTION).distinct())
    reach = (
        acks.acks(data.ack_frames.join(leaving, SUBSCRIPTION, "left_semi"))
        .where(F.col("topic").isNotNull() & F.col("subscription").isNotNull())
        .groupBy(*SUBSCRIPTION)
        .agg(F.max(position).alias("reach"), F.max("ts").alias("reach_ts"))
    )
    # A whole entry is a hole behind a later one acknowledged after its delivery; a batch
    # acknowledged in part, when the subscription acknowledged a later entry (in the same
    # ACK, or after).
    before = position < F.col("reach")
    behind = before & (F.col("last_ts") < F.col("reach_ts"))
    holes = left.join(reach, SUBSCRIPTION).where(behind | (F.col("partly") & before))
    grouped = holes.groupBy(*SUBSCRIPTION).agg(
        F.count("*").alias("count"),
        F.sum("num_messages").alias("messages"),
        F.count(F.when(F.col("partly"), 1)).alias("partly"),
        F.min("last_ts").alias("start_ts"),
        F.max("reach_ts").alias("end_ts"),
        F.min(position).alias("oldest"),
        F.countDistinct("conn_id", "consumer_id").alias("consumers"),
        F.min(F.struct("conn_id", "consumer_id", "consumer_name")).alias("consumer"),
    )
    explanation = F.format_string(
        "%s / %s left %d entries (%d messages; %d of them batches acknowledged in part)"
        " unacknowledged behind later acknowledgements, the oldest %d:%d: the broker keeps"
        " them, and the backlog's start, until they are acknowledged.",
        shown("topic", "(unknown topic)"),
        shown("subscription", "(unknown subscription)"),
        "count",
        "messages",
        "partly",
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
        evidence("unacked", "frames").alias("evidence"),
    )
