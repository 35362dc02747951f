"""The TCP layer's problems (zero windows, retransmission bursts, slow paths) and
brokers slow by their own time, the network's round trip apart."""

from __future__ import annotations

from functools import partial, reduce

from pyspark.sql import DataFrame
from pyspark.sql import functions as F

from .. import latency
from ..common import micros
from .base import Inputs, T, endpoint, evidence, millis, seconds, severity, shown

# Pairs whose remote time is not the broker's own: a message's way through it to a
# consumer, a client's acknowledgement, a ping either side may send.
NOT_BROKER_TIME = (latency.PUBLISH_DELIVERY, latency.DELIVERY_ACK, "PING")


def _per_side(connections: DataFrame) -> DataFrame:
    """The connections' TCP columns, one row per side (``side``: client or broker), the
    round trip its own segments timed (to its peer) beside what it advertised and sent."""
    sides = []
    for side, peer in (("client", "broker"), ("broker", "client")):
        sides.append(
            connections.select(
                "capture",
                "conn_id",
                endpoint("client_ip", "client_port").alias("client"),
                endpoint("server_ip", "server_port").alias("broker"),
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
        severity(F.col("zero_us") >= 1_000_000).alias("severity"),
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
            seconds("zero_us"),
            seconds("longest_zero_us"),
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
            millis("rtt_us"),
        ).alias("explanation"),
    )
    cited = evidence("connections").alias("evidence")
    return reduce(
        partial(DataFrame.unionByName, allowMissingColumns=True),
        (part.select("*", cited) for part in (zero, bursts, slow)),
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
        shown("broker", "(unknown)"),
        seconds("remote_p99_us"),
        "kind",
        millis("network_us"),
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
        evidence("latency_pairs").alias("evidence"),
    )
