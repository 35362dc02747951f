"""Errors by kind, connect and lookup storms, topic unloads."""

from __future__ import annotations

from pyspark.sql import Column, DataFrame, Window
from pyspark.sql import functions as F

from ..common import micros
from .base import Inputs, T, endpoint, evidence, millis, seconds, severity, shown, storms

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
            "capture", "conn_id", "client_ip", endpoint("server_ip", "server_port").alias("broker")
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
        shown("message", "no message"),
    )
    return grouped.select(
        F.lit("error").alias("kind"),
        severity(F.col("cause").isin(*HIGH_ERRORS)).alias("severity"),
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
        evidence("frames", "latency_pairs").alias("evidence"),
    )


def connect_storms(data: Inputs) -> DataFrame:
    """Client addresses that opened connections to a broker over and over."""
    opened = data.connections.where(F.col("protocol") == "pulsar").select(
        *CLIENT,
        endpoint("server_ip", "server_port").alias("broker"),
        F.col("first_ts").alias("ts"),
    )
    found = storms(opened, [*CLIENT, "broker"], T["storm_connects"])
    explanation = F.format_string(
        "Client %s connected to broker %s %d times in %s s, %d within %s s.",
        "client_ip",
        "broker",
        "count",
        seconds(micros("end_ts") - micros("start_ts")),
        "worst",
        F.lit(f"{T['storm_window_s']:g}"),
    )
    return _storm_rows(found, "connect_storm", explanation, "broker", "connections")


def lookup_storms(data: Inputs) -> DataFrame:
    """Client addresses that looked one topic up more often than the producers and
    consumers they attached to it needed: a client looks a topic up to attach one (a
    Redirect answer adds a second lookup, to the owner), so the lookups beyond
    ``lookups_per_attach`` per attach within ``storm_window_s`` led nowhere (errors,
    timeouts, a retry loop)."""
    clients = F.broadcast(data.connections.select("capture", "conn_id", "client_ip"))
    asked = (F.col("command") == "LOOKUP") & (F.col("direction") == "c2b")
    refused = (F.col("command") == "LOOKUP_RESPONSE") & F.col("error_code").isNotNull()
    attached = (F.col("direction") == "b2c") & (
        (F.col("command") == "PRODUCER_SUCCESS")
        | ((F.col("command") == "SUCCESS") & (F.col("answers") == "SUBSCRIBE"))
    )
    events = (
        data.rare.where(asked | refused | attached)
        .join(clients, ["capture", "conn_id"])
        .select(
            *CLIENT,
            "topic",
            "ts",
            micros("ts").alias("us"),
            asked.cast("int").alias("lookup"),
            refused.cast("int").alias("refused"),
            attached.cast("int").alias("attach"),
        )
    )
    span = int(T["storm_window_s"] * 1e6)
    order = Window.partitionBy(*CLIENT, "topic").orderBy("us")
    # At each lookup: the lookups of the window before it, less those the attaches of
    # the window on either side of it account for.
    excess = F.sum("lookup").over(order.rangeBetween(-span, 0)) - T["lookups_per_attach"] * F.sum(
        "attach"
    ).over(order.rangeBetween(-span, span))
    found = (
        events.withColumn("excess", F.when(F.col("lookup") == 1, excess))
        .groupBy(*CLIENT, "topic")
        .agg(
            F.max("excess").alias("worst"),
            F.sum("lookup").alias("count"),
            F.sum("refused").alias("refused"),
            F.sum("attach").alias("attached"),
            F.min(F.when(F.col("lookup") == 1, F.col("ts"))).alias("start_ts"),
            F.max(F.when(F.col("lookup") == 1, F.col("ts"))).alias("end_ts"),
        )
        .where(F.col("worst") >= T["storm_lookups"])
    )
    explanation = F.format_string(
        "Client %s looked %s up %d times in %s s (%d answered with an error) and attached"
        " %d producers and consumers to it: %d lookups within %s s led to none.",
        "client_ip",
        shown("topic", "(unknown topic)"),
        "count",
        seconds(micros("end_ts") - micros("start_ts")),
        "refused",
        "attached",
        "worst",
        F.lit(f"{T['storm_window_s']:g}"),
    )
    return _storm_rows(found, "lookup_storm", explanation, "topic", "frames")


def _storm_rows(
    found: DataFrame, kind: str, explanation: Column, target: str, table: str
) -> DataFrame:
    """A storm's finding rows: the client, the ``target`` it went at, the count, the span
    and the ``explanation``."""
    return found.select(
        F.lit(kind).alias("kind"),
        F.lit("medium").alias("severity"),
        F.lit(1.0).alias("score"),
        "capture",
        F.col("client_ip").alias("client"),
        target,
        "start_ts",
        "end_ts",
        "count",
        explanation.alias("explanation"),
        evidence(table).alias("evidence"),
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
        shown("topic", "(unknown topic)"),
        "returned",
        F.coalesce(millis("back_us"), F.lit("-")),
    )
    return grouped.select(
        F.lit("topic_unload").alias("kind"),
        severity(F.col("returned") < F.col("count")).alias("severity"),
        F.lit(1.0).alias("score"),
        "capture",
        F.when(F.col("connections") == 1, F.col("conn_id")).alias("conn_id"),
        "topic",
        "start_ts",
        "end_ts",
        "count",
        explanation.alias("explanation"),
        evidence("frames").alias("evidence"),
    )
