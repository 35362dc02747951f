"""Sends never receipted, receipts slower than the send timeout, send errors."""

from __future__ import annotations

from pyspark.sql import Column, DataFrame
from pyspark.sql import functions as F

from ..common import micros
from .base import Inputs, T, evidence, seconds, shown

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
        shown("producer_name", "(unnamed)"),
        shown("topic", "(unknown topic)"),
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
        evidence("latency_pairs", "frames").alias("evidence"),
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
        shown("producer_name", "(unnamed)"),
        shown("topic", "(unknown topic)"),
        F.lit(f"{T['send_timeout_us'] / 1e6:g}"),
        "count",
        seconds("worst_us"),
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
        shown("producer_name", "(unnamed)"),
        shown("topic", "(unknown topic)"),
        shown("cause", "an unknown error"),
        shown("message", "no message"),
    )
    return _producer_finding(grouped, "send_error", "high", explanation)
