"""Key_Shared stalls: a consumer without permits holding back the keys the broker hashes
to it while the subscription's other consumers had permits and nothing to do.

The broker routes an entry of a Key_Shared subscription by its sticky key (the ordering
key, else the partition key, else the bytes ``NONE_KEY``) hashed with Murmur3 32 (seed
0, sign bit cleared) into its selector's range (by default 0..65535, a hash of 0 taken
as 1: ``StickyKeyConsumerSelectorUtils.makeStickyKeyHash``). A STICKY consumer names its
ranges in SUBSCRIBE (`frames.hash_ranges`); an AUTO_SPLIT one gets the broker's share of
a hash ring, which the wire shows only as the entries it delivers to it.
"""

from __future__ import annotations

import mmh3
import pandas as pd
from pyspark.sql import Column, DataFrame
from pyspark.sql import functions as F
from pyspark.sql.types import IntegerType

from ..common import micros
from .base import (
    CONSUMER,
    SUBSCRIPTION,
    Inputs,
    T,
    evidence,
    seconds,
    shown,
    with_messages_waiting,
)

KEY_HASH_RANGE = 65536  # StickyKeyConsumerSelector.DEFAULT_RANGE_SIZE: hashes 0..65535
NONE_KEY = b"NONE_KEY"  # the sticky key of an entry with neither key


def sticky_key_hash(key: bytes, range_size: int = KEY_HASH_RANGE) -> int:
    """The hash the broker routes a sticky key by, in a selector range starting at 0."""
    hashed = (mmh3.hash(key, 0, signed=False) & 0x7FFFFFFF) % range_size
    return hashed or 1  # 0 means "not set" to the broker


def sticky_key(ordering_key: bytes | None, key: str | None) -> bytes:
    """An entry's sticky key, as the broker reads it from its metadata."""
    if ordering_key:
        return ordering_key
    return key.encode() if key is not None else NONE_KEY


@F.pandas_udf(IntegerType())
def _key_hash(ordering_key: pd.Series, key: pd.Series) -> pd.Series:
    return pd.Series(
        [
            sticky_key_hash(sticky_key(o, None if k is None or k != k else k))
            for o, k in zip(ordering_key, key, strict=True)
        ]
    )


def key_hash(ordering_key: str, key: str) -> Column:
    """The sticky key hash of each row's entry (its ``ordering_key`` and ``key``)."""
    return _key_hash(F.col(ordering_key), F.col(key))


def key_shared_deliveries(data: Inputs) -> DataFrame:
    """Each entry delivered to a Key_Shared subscription, with its sticky key hash: the
    first message of its batch, whose key a key-based batch shares."""
    consumers = F.broadcast(
        data.rare.where(
            (F.col("command") == "SUBSCRIBE") & (F.col("sub_type") == "Key_Shared")
        ).select(*CONSUMER)
    )
    first = F.coalesce("batch_index", F.lit(0)) == 0
    return (
        data.messages.where((F.col("command") == "MESSAGE") & first)
        .join(consumers, CONSUMER, "left_semi")
        .select(
            *CONSUMER,
            "topic",
            "subscription",
            "ts",
            "key",
            key_hash("ordering_key", "key").alias("key_hash"),
            F.struct("ledger_id", "entry_id").alias("position"),
        )
    )


def key_shared_stalls(data: Inputs) -> DataFrame:
    """Spans a Key_Shared consumer had no permits while messages for its keys waited
    (:func:`~.base.with_messages_waiting`) and another consumer of the
    subscription had permits (no span of its own then) and was delivered nothing."""
    subscribed = data.rare.where(
        (F.col("command") == "SUBSCRIBE") & (F.col("sub_type") == "Key_Shared")
    ).select(
        *CONSUMER,
        "key_shared_mode",
        "hash_ranges",
    )
    life = data["permit_summary"].join(subscribed.select(*CONSUMER), CONSUMER, "left_semi")
    long = (
        data["starvation_intervals"]
        .join(subscribed.select(*CONSUMER), CONSUMER, "left_semi")
        .where(F.col("duration_us") >= T["key_shared_stall_us"])
    )
    deliveries = key_shared_deliveries(data)
    spans = with_messages_waiting(long, deliveries).select(
        *CONSUMER, "topic", "subscription", "consumer_name", "start_ts", "end_ts"
    )
    others = life.select(
        *(F.col(c).alias(f"other_{c}") for c in ("conn_id", "consumer_id", "consumer_name")),
        "capture",
        "topic",
        "subscription",
        F.col("first_ts").alias("other_first_ts"),
        F.col("last_ts").alias("other_last_ts"),
    )
    alive = (F.col("other_first_ts") <= F.col("start_ts")) & (
        F.col("other_last_ts") >= F.col("end_ts")
    )
    other = (F.col("other_conn_id") != F.col("conn_id")) | (
        F.col("other_consumer_id") != F.col("consumer_id")
    )
    siblings = spans.join(others, SUBSCRIPTION).where(other & alive)
    # A sibling with no span of its own overlapping, and no delivery within: idle.
    starved = data["starvation_intervals"].select(
        F.col("capture").alias("s_capture"),
        F.col("conn_id").alias("s_conn_id"),
        F.col("consumer_id").alias("s_consumer_id"),
        F.col("start_ts").alias("s_start"),
        F.col("end_ts").alias("s_end"),
    )
    fed = deliveries.select(
        F.col("capture").alias("f_capture"),
        F.col("conn_id").alias("f_conn_id"),
        F.col("consumer_id").alias("f_consumer_id"),
        F.col("ts").alias("f_ts"),
    )
    same_s = (
        (F.col("s_capture") == F.col("capture"))
        & (F.col("s_conn_id") == F.col("other_conn_id"))
        & (F.col("s_consumer_id") == F.col("other_consumer_id"))
    )
    same_f = (
        (F.col("f_capture") == F.col("capture"))
        & (F.col("f_conn_id") == F.col("other_conn_id"))
        & (F.col("f_consumer_id") == F.col("other_consumer_id"))
    )
    overlapping = (F.col("s_start") < F.col("end_ts")) & (F.col("s_end") > F.col("start_ts"))
    within = (F.col("f_ts") > F.col("start_ts")) & (F.col("f_ts") < F.col("end_ts"))
    idle = siblings.join(starved, same_s & overlapping, "left_anti").join(
        fed, same_f & within, "left_anti"
    )
    stalls = idle.groupBy(*spans.columns).agg(
        F.count("*").alias("idle"),
        F.min("other_consumer_name").alias("idle_name"),
    )
    held = deliveries.groupBy(*CONSUMER).agg(
        F.countDistinct("key").alias("keys"),
        F.min("key_hash").alias("lowest_hash"),
        F.max("key_hash").alias("highest_hash"),
    )
    grouped = (
        stalls.groupBy(*CONSUMER, "topic", "subscription", "consumer_name")
        .agg(
            F.count("*").alias("count"),
            F.sum(micros("end_ts") - micros("start_ts")).alias("duration_us"),
            F.min("start_ts").alias("start_ts"),
            F.max("end_ts").alias("end_ts"),
            F.max("idle").alias("idle"),
            F.min("idle_name").alias("idle_name"),
        )
        .join(held, CONSUMER, "left")
        .join(subscribed, CONSUMER, "left")
    )
    ranges = F.when(
        F.size("hash_ranges") > 0,
        F.concat(
            F.lit(" (its STICKY ranges "),
            F.array_join(
                F.transform("hash_ranges", lambda r: F.concat_ws("-", r["start"], r["end"])),
                ", ",
            ),
            F.lit(")"),
        ),
    ).otherwise(F.lit(""))
    explanation = F.format_string(
        "Key_Shared consumer %s on %s / %s%s had no permits for %s s in %d spans while the"
        " broker held messages for the %d keys hashed to it (hashes %d to %d), and %d other"
        " consumers (%s) had permits and were delivered nothing: its keys stalled.",
        shown("consumer_name", "(unnamed)"),
        shown("topic", "(unknown topic)"),
        shown("subscription", "(unknown subscription)"),
        ranges,
        seconds("duration_us"),
        "count",
        F.coalesce("keys", F.lit(0)),
        F.coalesce("lowest_hash", F.lit(0)),
        F.coalesce("highest_hash", F.lit(0)),
        "idle",
        shown("idle_name", "(unnamed)"),
    )
    return grouped.select(
        F.lit("key_shared_stall").alias("kind"),
        F.lit("high").alias("severity"),
        F.lit(1.0).alias("score"),
        F.col("key_shared_mode").alias("cause"),
        *CONSUMER,
        "topic",
        "subscription",
        "consumer_name",
        "start_ts",
        "end_ts",
        "count",
        "duration_us",
        explanation.alias("explanation"),
        evidence("starvation_intervals", "permit_timeline", "messages").alias("evidence"),
    )
