"""How long each request, publish and delivery took: ``latency_pairs`` and ``latency_summary``.

Usage: ``spark-submit jobs/latency.py DATASET... -o OUT [--window 1m] [--overwrite] [--verbose]``
(or ``python jobs/latency.py ...`` with a local session).

Kinds of pair (the ``kind`` column):

- a request's command name (``LOOKUP``, ``PRODUCER``, ``SUBSCRIBE``, ``SEND``, ``PING``,
  ``ACK`` with a request id, ``CONNECT``, Kafka 0.7 ``FETCH``...) for every response the
  decoder paired with its request. The decoder pairs as the protocol guarantees (request
  ids per connection and direction, SEND by producer and sequence id in order, so each
  chunk of a chunked message and each batch is one pair; PING/PONG in order), and writes
  ``answers`` / ``request_ts`` on the response: joining on ``request_id`` here would mix
  up the separate counters clients keep for lookups and for producer/consumer commands.
- ``publish_delivery``: a message seen sent (SEND) and later delivered (MESSAGE) on any
  connection of the same capture file, by topic, producer name and sequence id; one pair
  per message and subscription, to its first delivery. A chunked message counts once, on
  its last chunk.
- ``delivery_ack``: a delivered entry and the ack that answered it (see ``acks.py``).

Requests never answered within the capture are rows with ``outcome`` ``unanswered`` and
no response time; deliveries superseded by a redelivery before any ack are ``redelivered``.
"""

from __future__ import annotations

import sys
from functools import partial, reduce

from pyspark.sql import Column, DataFrame, SparkSession, Window
from pyspark.sql import functions as F

if __name__ == "__main__" and not __package__:
    # Run as a script (spark-submit jobs/latency.py): its relative imports are the
    # installed package's (PEP 366).
    __package__ = "pwcap.jobs"

from . import acks
from .common import (
    Tables,
    at_once,
    broker_addresses,
    conform,
    micros,
    read_table,
    run_job,
    window_start,
)
from .request_commands import (
    KAFKA_REQUESTS,
    PULSAR_ACK,
    PULSAR_BROKER_REQUESTS,
    PULSAR_CLIENT_REQUESTS,
    PULSAR_EITHER_REQUESTS,
)

PUBLISH_DELIVERY = "publish_delivery"
DELIVERY_ACK = "delivery_ack"

# What a request or response frame says about the pair, beside its times.
CONTEXT = [
    "capture",
    "conn_id",
    "topic",
    "subscription",
    "producer_id",
    "consumer_id",
    "sequence_id",
]
PERCENTILES = {"p50_us": 0.5, "p90_us": 0.9, "p99_us": 0.99, "p999_us": 0.999}
SUMMARY_KEYS = ["kind", "topic", "subscription", "broker", "window_start"]
LOOKED_UP = 100_000  # groups of requests matched in memory (see unanswered_requests)
BALANCES = ("requests", "fingerprint_low", "fingerprint_high")  # a group's sums (idem)
SECOND_BITS = 20  # a group spans 2**20 microseconds of request time (idem)


def _pair(kind: Column, request_ts: Column, response_ts: Column, outcome: Column) -> list:
    """The pair columns every kind fills the same way."""
    return [
        kind.alias("kind"),
        request_ts.alias("request_ts"),
        response_ts.alias("response_ts"),
        (micros(response_ts) - micros(request_ts)).alias("latency_us"),
        outcome.alias("outcome"),
    ]


def _outcome() -> Column:
    # Kafka 0.7 responses name their error code even when it is NoError.
    coded = F.col("error_code").isNotNull() & (F.col("error_code") != "NoError")
    failed = F.col("command").isin("ERROR", "SEND_ERROR") | coded
    code = F.concat(F.lit("error:"), F.coalesce("error_code", F.lit("unknown")))
    return F.when(failed, code).otherwise(F.lit("success"))


def _is_response() -> Column:
    """A response the decoder paired with its request (it names the request)."""
    return F.col("answers").isNotNull() & F.col("request_ts").isNotNull()


def answered_requests(frames: DataFrame) -> DataFrame:
    """Every response the decoder paired with its request."""
    return frames.where(_is_response()).select(
        *CONTEXT, *_pair(F.col("answers"), F.col("request_ts"), F.col("ts"), _outcome())
    )


def _is_request() -> Column:
    pulsar = (F.col("protocol") == "pulsar") & (
        ((F.col("direction") == "c2b") & F.col("command").isin(*PULSAR_CLIENT_REQUESTS))
        | F.col("command").isin(*PULSAR_EITHER_REQUESTS)
        | ((F.col("direction") == "b2c") & F.col("command").isin(*PULSAR_BROKER_REQUESTS))
        | ((F.col("command") == PULSAR_ACK) & F.col("request_id").isNotNull())
    )
    kafka = (
        (F.col("protocol") == "kafka07")
        & (F.col("direction") == "c2b")
        & F.col("command").isin(*KAFKA_REQUESTS)
    )
    return pulsar | kafka


def unanswered_requests(frames: DataFrame) -> DataFrame:
    """Requests no response answers.

    Responses name their request by (connection, direction, command, time); several
    requests can share a capture time (one packet), so the requests of such a key beyond
    the number of responses naming it are the unanswered ones, the last in the stream.

    A first pass sums, per connection and second of request time (a group), requests less
    responses and a fingerprint of the keys they name: each request adds a 64-bit hash of
    its whole key, each response takes away its request's. A group whose responses name
    exactly its requests' keys sums to zero; one that does not, to zero only if its
    hashes cancel out by chance (about one group in 2**64). Only the groups that do not
    balance are looked at by their whole key. The first pass aggregates a few groups per
    connection where one per request time would shuffle every request. The groups looked
    at are usually few: up to ``LOOKED_UP`` of them are broadcast and the requests and
    responses matched against them in memory, never shuffled; more, and they are joined.
    """
    key = ["capture", "conn_id", "direction", "command", "us"]
    opposite = F.when(F.col("direction") == "c2b", "b2c").otherwise("c2b")
    second = F.shiftright("us", SECOND_BITS).alias("second")
    requests = frames.where(_is_request()).select(
        *CONTEXT, "direction", "command", "ts", micros("ts").alias("us"), "stream_offset"
    )
    requests = requests.select("*", second)
    responses = frames.where(_is_response()).select(
        "capture",
        "conn_id",
        opposite.alias("direction"),
        F.col("answers").alias("command"),
        micros("request_ts").alias("us"),
    )
    responses = responses.select("*", second)
    group = ["conn_id", "second"]
    sums = [_balance(requests, 1), _balance(responses, -1)]
    groups = (
        reduce(DataFrame.unionByName, sums)
        .groupBy(*group)
        .agg(*(F.sum(c).alias(c) for c in BALANCES))
    )
    # Computed once and counted in the JVM: handed through Python, the groups started
    # Python workers (whatever python3 the PATH has, not necessarily the driver's).
    looked_at = (
        groups.where(reduce(Column.__or__, (F.col(c) != 0 for c in BALANCES)))
        .select(*group)
        .localCheckpoint()
    )
    if looked_at.limit(LOOKED_UP + 1).count() <= LOOKED_UP:
        looked_at = F.broadcast(looked_at)
    answered = (
        responses.join(looked_at, group, "left_semi").groupBy(*key).agg(F.count("*").alias("n"))
    )
    in_order = Window.partitionBy(*key).orderBy("stream_offset")
    missing = (
        requests.join(looked_at, group, "left_semi")
        .join(answered.withColumnRenamed("n", "answered"), key, "left")
        .withColumn("n", F.row_number().over(in_order))
        .where(F.col("n") > F.coalesce("answered", F.lit(0)))
    )
    no_time = F.lit(None).cast("timestamp")
    return missing.select(
        *CONTEXT, *_pair(F.col("command"), F.col("ts"), no_time, F.lit("unanswered"))
    )


def _balance(rows: DataFrame, sign: int) -> DataFrame:
    """Per row, what it adds to its group's sums: ``sign`` for the count, and the halves
    of its key's hash (two sums of 32-bit halves cannot overflow a long where one sum of
    64-bit hashes would)."""
    fingerprint = F.xxhash64("capture", "direction", "command", "us")
    return rows.select(
        "conn_id",
        "second",
        F.lit(sign).alias("requests"),
        (fingerprint.bitwiseAND(0xFFFFFFFF) * sign).alias("fingerprint_low"),
        (F.shiftright(fingerprint, 32) * sign).alias("fingerprint_high"),
    )


def _application_messages(messages: DataFrame, command: str) -> DataFrame:
    """Messages as the application sees them: a chunked one only on its last chunk."""
    whole = F.col("num_chunks").isNull() | (F.col("chunk_id") == F.col("num_chunks") - 1)
    return messages.where((F.col("command") == command) & whole)


def publish_delivery(messages: DataFrame) -> DataFrame:
    """First send of each message to its first delivery on each subscription."""
    # The sequence id first: the aggregates below sort by these keys, and it decides most.
    key = ["sequence_id", "producer_name", "topic", "capture"]
    sent = (
        _application_messages(messages, "SEND")
        .where(F.col("producer_name").isNotNull())
        .groupBy(*key)
        .agg(F.min("ts").alias("sent_ts"), F.min("producer_id").alias("producer_id"))
    )
    # The earliest per receiver first, a hash aggregate: the minimum of a struct is a sort
    # aggregate, which sorted every delivery of a message delivered many times.
    receiver = ["conn_id", "consumer_id"]
    delivered = (
        _application_messages(messages, "MESSAGE")
        .groupBy(*key, "subscription", *receiver)
        .agg(F.min("ts").alias("ts"))
        .groupBy(*key, "subscription")
        .agg(F.min(F.struct("ts", *receiver)).alias("first"))
    )
    return delivered.join(sent, key).select(
        "capture",
        F.col("first.conn_id").alias("conn_id"),
        "topic",
        "subscription",
        "producer_id",
        F.col("first.consumer_id").alias("consumer_id"),
        "sequence_id",
        *_pair(F.lit(PUBLISH_DELIVERY), F.col("sent_ts"), F.col("first.ts"), F.lit("success")),
    )


def delivery_ack(answered: DataFrame) -> DataFrame:
    """Each delivered entry (:func:`acks.answered_deliveries`) to the ack that answered it."""
    outcome = (
        F.when(F.col("ack_ts").isNull() & F.col("next_delivery_ts").isNotNull(), "redelivered")
        .when(F.col("ack_ts").isNull(), "unanswered")
        .when(F.col("validation_error").isNotNull(), F.concat(F.lit("error:"), "validation_error"))
        .otherwise("success")
    )
    return answered.select(
        "capture",
        "conn_id",
        "topic",
        "subscription",
        "consumer_id",
        *_pair(F.lit(DELIVERY_ACK), F.col("ts"), F.col("ack_ts"), outcome),
    )


def latency_pairs(
    frames: DataFrame,
    messages: DataFrame,
    connections: DataFrame,
    answered: DataFrame,
    unanswered: DataFrame,
) -> DataFrame:
    """Every kind of pair; ``answered`` are :func:`acks.answered_deliveries`,
    ``unanswered`` :func:`unanswered_requests`."""
    parts = [
        answered_requests(frames),
        unanswered,
        publish_delivery(messages),
        delivery_ack(answered),
    ]
    pairs = reduce(partial(DataFrame.unionByName, allowMissingColumns=True), parts)
    paths = F.broadcast(_paths(connections))
    return conform(_split(pairs.join(paths, ["capture", "conn_id"], "left")), "latency_pairs")


def _paths(connections: DataFrame) -> DataFrame:
    """(``capture``, ``conn_id``) -> ``broker`` and the round trips from the capture point
    to each side: the shortest the connection's TCP segments timed, handshake included."""
    rtt = {
        side: F.least(f"tcp_rtt_{side}_handshake_us", f"tcp_rtt_{side}_min_us").alias(
            f"rtt_{side}_us"
        )
        for side in ("broker", "client")
    }
    return broker_addresses(connections).join(
        connections.select("capture", "conn_id", *rtt.values()).dropDuplicates(
            ["capture", "conn_id"]
        ),
        ["capture", "conn_id"],
    )


def _split(pairs: DataFrame) -> DataFrame:
    """Each answered pair's latency as the network's share (``network_us``: the round
    trip to the side that answers) and the rest (``remote_us``: the time that side took).
    A delivery is answered by the client; a request by whoever it was sent to; a PING or a
    message crossing connections by neither alone."""
    kind = F.col("kind")
    to_client = (kind == DELIVERY_ACK) | kind.isin(*PULSAR_BROKER_REQUESTS)
    network = (
        F.when(kind.isin(PUBLISH_DELIVERY, *PULSAR_EITHER_REQUESTS), None)
        .when(to_client, F.col("rtt_client_us"))
        .otherwise(F.col("rtt_broker_us"))
    )
    answered = F.col("latency_us").isNotNull()
    return pairs.withColumn("network_us", F.when(answered, network)).withColumn(
        "remote_us", F.greatest(F.col("latency_us") - F.col("network_us"), F.lit(0))
    )


def latency_summary(pairs: DataFrame, window: str) -> DataFrame:
    """Percentiles per kind, topic, subscription, broker and time window (of the request).

    ``count`` and the percentiles cover answered pairs; ``errors`` the answered ones with
    an error outcome; ``unanswered`` (and ``redelivered`` for deliveries) the rest.
    """
    latency = F.col("latency_us")
    answered = latency.isNotNull()
    # One row per group and latency first (a hash aggregate): latencies are whole
    # microseconds and a group's repeat, so the exact percentile below, which keeps a
    # boxed count per distinct value, sees each value once with its count (unaggregated,
    # it would box every pair's latency though they take few distinct values).
    per_value = (
        pairs.withColumn("window_start", window_start("request_ts", window))
        .groupBy(*SUMMARY_KEYS, "latency_us")
        .agg(
            F.count("*").alias("pairs"),
            F.count(F.when(answered & F.col("outcome").startswith("error:"), 1)).alias("errors"),
            F.count(F.when(F.col("outcome") == "unanswered", 1)).alias("unanswered"),
            F.count(F.when(F.col("outcome") == "redelivered", 1)).alias("redelivered"),
        )
    )
    pairs_answered = F.when(answered, F.col("pairs")).otherwise(0)
    quantiles = F.percentile(
        latency, F.array(*(F.lit(q) for q in PERCENTILES.values())), F.col("pairs")
    )
    summary = per_value.groupBy(*SUMMARY_KEYS).agg(
        _total(pairs_answered).alias("count"),
        _total(F.col("errors")).alias("errors"),
        _total(F.col("unanswered")).alias("unanswered"),
        _total(F.col("redelivered")).alias("redelivered"),
        quantiles.alias("q"),
        F.max(latency).alias("max_us"),
        F.min(latency).alias("min_us"),
    )
    percentiles = [F.col("q")[i].alias(name) for i, name in enumerate(PERCENTILES)]
    return conform(summary.select("*", *percentiles), "latency_summary")


def _total(counts: Column) -> Column:
    """A sum of counts that is a count itself: never null (as ``count`` is not)."""
    return F.coalesce(F.sum(counts), F.lit(0))


def tables(frames: DataFrame, messages: DataFrame, connections: DataFrame, window: str) -> Tables:
    # Each looks at the data before its plan is final (a small job): side by side.
    answered, unanswered = at_once(
        [partial(acks.answered_deliveries, frames), partial(unanswered_requests, frames)]
    )
    return {
        "latency_pairs": latency_pairs(frames, messages, connections, answered, unanswered),
        "latency_summary": lambda written: latency_summary(written["latency_pairs"], window),
    }


def build(spark: SparkSession, datasets: list[str], window: str) -> Tables:
    """Latency of every request/response, publish/delivery and delivery/ack pair."""
    read = [read_table(spark, datasets, name) for name in ("frames", "messages", "connections")]
    return tables(*read, window)


if __name__ == "__main__":
    sys.exit(run_job("latency", build))
