"""Chunked messages never completed, and chunk stalls."""

from __future__ import annotations

from pyspark.sql import DataFrame, Window
from pyspark.sql import functions as F

from ..common import micros
from .base import Inputs, T, evidence, seconds, severity, shown


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
        F.format_string("sent by producer %s", shown("producer_name", "(unnamed)")),
    ).otherwise(F.format_string("delivered on subscription %s", shown("subscription", "(unknown)")))
    explanation = F.when(
        F.col("kind") == "chunk_incomplete",
        F.format_string(
            "%d chunked messages on %s %s never completed (as few as %d of %d chunks seen).",
            "count",
            shown("topic", "(unknown topic)"),
            where,
            "fewest.chunks",
            "fewest.num_chunks",
        ),
    ).otherwise(
        F.format_string(
            "%d chunked messages on %s %s paused between two chunks, up to %s s.",
            "count",
            shown("topic", "(unknown topic)"),
            where,
            seconds("pause_us"),
        )
    )
    return grouped.select(
        "kind",
        severity(F.col("kind") == "chunk_incomplete").alias("severity"),
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
        evidence("messages").alias("evidence"),
    )
