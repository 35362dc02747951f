"""Which acknowledgement, if any, answered each delivered entry.

Shared by the latency job (delivery -> ack) and the redelivery job (ack holes). A delivery
is one MESSAGE frame: an entry (``ledger_id``, ``entry_id``) of ``num_messages`` messages
sent to a consumer of a subscription. It is answered by the first ACK after it, on the same
topic and subscription and before the entry is delivered again, that either

- names the entry individually and leaves none of its members owed: an id without an
  ack_set acknowledges the whole entry (any batch index: the C++ client acks a whole batch
  once, with batch index -1); with batch-index acknowledgement the ACKs of a batch's
  members carry ack_sets, and only the one that acknowledges the last member owed
  answers (:func:`member_acks` keeps the account), or
- is cumulative at or beyond the entry's position; one whose ack_set leaves members of
  the entry it names owed (batch-index acknowledgement) reaches the entry before it.

Acks are matched per subscription rather than per connection so an ack sent after a
reconnect (new consumer id, same subscription) still answers the delivery; and per capture
file, because one dataset may hold captures of unrelated clusters with the same names.
"""

from __future__ import annotations

from pyspark.sql import Column, DataFrame, Window
from pyspark.sql import functions as F

from .common import message_ids

SUBSCRIPTION = ("capture", "topic", "subscription")
ENTRY = (*SUBSCRIPTION, "ledger_id", "entry_id")
RECEIVER = ("conn_id", "consumer_id", "consumer_name")  # whom a delivery went to


DELIVERY = (
    *RECEIVER,
    *ENTRY,
    "partition",
    "redelivery_count",
    "num_messages",
    "stream_offset",
    "ts",
)
DELIVERY_ONLY = tuple(c for c in DELIVERY if c not in (*ENTRY, "num_messages", "ts"))  # not acks


def acks(frames: DataFrame) -> DataFrame:
    """One row per message id an ACK names."""
    return message_ids(frames.where(F.col("command") == "ACK")).select(
        *ENTRY,
        "batch_index",
        F.coalesce(F.col("ack_type"), F.lit("Individual")).alias("ack_type"),
        "validation_error",
        "ts",
    )


def answered_deliveries(frames: DataFrame) -> DataFrame:
    """Every delivered entry (one MESSAGE frame) with ``delivery_number`` (1, 2... per
    entry), ``next_delivery_ts`` (when the same entry was delivered again, if ever),
    ``ack_ts`` (null when unanswered), ``ack_how`` (``individual`` / ``cumulative``) and
    the answering ack's ``validation_error``.

    Deliveries and acks go through one shuffle and sorted passes, never a join on the
    entry: an entry delivered and acked n times would join n * n rows (a redelivery
    storm, or a benchmark replaying the same ids). Rows are partitioned per entry, except
    in a subscription that acks cumulatively, whose acks answer across entries: there the
    whole subscription is one partition, and only there run the passes over positions
    and times that cumulative acks need.
    """
    # An ack whose topic or subscription is unknown (capture started mid-connection)
    # answers nothing: it cannot be told which subscription it is for.
    rows = _deliveries_and_acks(frames).where((F.col("row") == DELIVERED) | _known(ENTRY))
    # Few subscriptions ack cumulatively, often none: then the rows are read only once.
    # Found in the JVM (as a Python list they would start Python workers).
    acking = _cumulative_acks(frames).select(*SUBSCRIPTION).distinct().localCheckpoint()
    matched = (F.broadcast(acking), list(SUBSCRIPTION))
    answered = _individual_answer(rows.join(*matched, "left_anti"))
    answered = answered.withColumn("cumulative_ts", F.lit(None).cast("timestamp"))
    if not acking.isEmpty():
        per_subscription = rows.join(*matched, "left_semi")
        per_subscription = per_subscription.repartition(*SUBSCRIPTION)  # one shuffle, both passes
        answered = answered.unionByName(_cumulative_answer(_individual_answer(per_subscription)))
    first = F.least("individual_ts", "cumulative_ts")
    return answered.where(F.col("row") == DELIVERED).select(
        *DELIVERY,
        "next_delivery_ts",
        "delivery_number",
        first.alias("ack_ts"),
        F.when(first.isNull(), None)
        .when(first == F.col("individual_ts"), "individual")
        .otherwise("cumulative")
        .alias("ack_how"),
        F.when(first == F.col("individual_ts"), F.col("individual_error")).alias(
            "validation_error"
        ),
    )


DELIVERED, INDIVIDUAL, CUMULATIVE = 0, 1, 2  # kinds of row, in the order acks sort first


def unanswered_last_deliveries(frames: DataFrame) -> DataFrame:
    """Each entry's last delivery when no ack answered it, with ``deliveries`` (the entry's
    count): the rows of :func:`answered_deliveries` with neither ``next_delivery_ts`` nor
    ``ack_ts``, without its sorted passes over every delivery and ack.

    Only the last delivery and the latest acks decide: an individual ack of the entry at
    or after it answers it, and so does a cumulative ack of its subscription at or after
    it once some cumulative ack reaches the entry's position (they move forward: the later
    of the two reaches it). Hash aggregates of times find the unanswered entries; the last
    delivery's columns come from joining those back to their deliveries.
    """
    rows = _deliveries_and_acks(frames).where((F.col("row") == DELIVERED) | _known(ENTRY))
    delivered = F.col("row") == DELIVERED
    per_entry = (
        rows.where(F.col("row") != CUMULATIVE)
        .groupBy(*ENTRY)
        .agg(
            F.count(F.when(delivered, 1)).cast("int").alias("deliveries"),
            F.max(F.when(delivered, F.col("ts"))).alias("last_ts"),
            F.max(F.when(~delivered, F.col("ts"))).alias("individual_ts"),
        )
    )
    position = F.struct("ledger_id", "entry_id")  # nulls first, as the position pass sorts
    reach = (
        _cumulative_acks(frames)
        .groupBy(*SUBSCRIPTION)
        .agg(F.max(position).alias("reach"), F.max("ts").alias("reach_ts"))
    )
    answered = (F.col("individual_ts") >= F.col("last_ts")) | (
        (F.col("reach") >= position) & (F.col("reach_ts") >= F.col("last_ts"))
    )
    holes = (
        per_entry.where(F.col("deliveries") > 0)
        .join(F.broadcast(reach), list(SUBSCRIPTION), "left")
        .where(~F.coalesce(answered, F.lit(False)))
        .select(*ENTRY, "deliveries", "last_ts")
        .alias("hole")
    )
    last = _deliveries(frames).alias("delivery")
    same = [F.col(f"delivery.{c}").eqNullSafe(F.col(f"hole.{c}")) for c in ENTRY]
    found = last.join(holes, [*same, F.col("delivery.ts") == F.col("hole.last_ts")])
    # Deliveries at the same time: the last in the stream is the last one.
    others = [c for c in DELIVERY if c not in (*ENTRY, "stream_offset")]
    chosen = F.max(F.struct("delivery.stream_offset", *(f"delivery.{c}" for c in others)))
    return (
        found.groupBy(*(F.col(f"delivery.{c}") for c in ENTRY), "hole.deliveries")
        .agg(chosen.alias("last"))
        .select(*ENTRY, "deliveries", "last.*")
    )


def _deliveries_and_acks(frames: DataFrame) -> DataFrame:
    """MESSAGE frames (a row each) and the message ids ACKs name (a row each) from one
    scan: ``row`` says which; the delivery columns are a delivery's, ``error`` an ack's.

    Only an ACK's list is exploded: every other frame keeps its scalar ids as they are
    (an array built for each of them to explode would cost much of the scan)."""
    is_ack = F.col("command") == "ACK"
    listed = is_ack & (F.size("message_ids") > 0)
    kind = (
        F.when(~is_ack, DELIVERED)
        .when(F.col("ack_type") == "Cumulative", CUMULATIVE)
        .otherwise(INDIVIDUAL)
    )
    kept = [*DELIVERY_ONLY, *SUBSCRIPTION, "num_messages", "ts", "error", "row"]
    rows = (
        frames.where(F.col("command").isin("MESSAGE", "ACK"))
        .select(
            *(F.when(~is_ack, F.col(c)).alias(c) for c in DELIVERY_ONLY),
            *SUBSCRIPTION,
            F.when(~is_ack, F.coalesce("num_messages", F.lit(1))).alias("num_messages"),
            "ts",
            F.when(is_ack, F.col("validation_error")).alias("error"),
            kind.alias("row"),
            listed.alias("listed"),
            _reaches_before().alias("before"),
            F.when(is_ack, F.col("conn_id")).alias("ack_conn_id"),
            F.when(is_ack, F.col("stream_offset")).alias("ack_offset"),
            "ledger_id",
            "entry_id",
            F.posexplode_outer(F.when(listed, F.col("message_ids"))).alias("place", "_id"),
        )
        .select(
            *kept,
            "ack_conn_id",
            "ack_offset",
            "place",
            F.when(F.col("listed"), F.col("_id.ledger_id"))
            .otherwise(F.col("ledger_id"))
            .alias("ledger_id"),
            (
                F.when(F.col("listed"), F.col("_id.entry_id")).otherwise(F.col("entry_id"))
                - F.col("before").cast("long")
            ).alias("entry_id"),
        )
        .where(F.col("ledger_id").isNotNull())
    )
    with_sets = (F.col("command") == "ACK") & (F.size(F.coalesce("ack_sets", F.array())) > 0)
    if not frames.where(with_sets).limit(1).isEmpty():  # batch-index acks: most captures none
        rows = rows.join(_partial_acks(frames), list(PARTIAL), "left_anti")
    return rows.drop("ack_conn_id", "ack_offset", "place")


def _deliveries(frames: DataFrame) -> DataFrame:
    """The delivery rows of :func:`_deliveries_and_acks` alone, from a scan of the few
    columns MESSAGE frames need."""
    return frames.where((F.col("command") == "MESSAGE") & F.col("ledger_id").isNotNull()).select(
        *DELIVERY_ONLY,
        *ENTRY,
        F.coalesce("num_messages", F.lit(1)).alias("num_messages"),
        "ts",
    )


def _cumulative_acks(frames: DataFrame) -> DataFrame:
    """One row per message id a cumulative ACK of a known subscription names, at the
    last entry it acknowledges whole (:func:`_reaches_before`)."""
    cumulative = (F.col("command") == "ACK") & (F.col("ack_type") == "Cumulative")
    named = message_ids(frames.where(cumulative)).where(_known(ENTRY))
    return named.withColumn("entry_id", F.col("entry_id") - _reaches_before().cast("long"))


def cumulative_reach(frames: DataFrame) -> DataFrame:
    """Per subscription, ``whole_reach``: the last entry (``ledger_id``, ``entry_id``) its
    cumulative ACKs acknowledged whole; every entry up to it is acknowledged."""
    return (
        _cumulative_acks(frames)
        .groupBy(*SUBSCRIPTION)
        .agg(F.max(F.struct("ledger_id", "entry_id")).alias("whole_reach"))
    )


def _reaches_before() -> Column:
    """A cumulative ACK whose ack_set leaves members of its entry owed (batch-index
    acknowledgement of a batch's member: its single id's set bits): it acknowledges the
    entries before that one, and of that one only the members before. False otherwise."""
    cumulative = (F.col("command") == "ACK") & (F.col("ack_type") == "Cumulative")
    owed = F.exists(F.coalesce("ack_sets", F.array()), lambda w: w["bits"] != 0)
    return F.coalesce(cumulative & owed, F.lit(False))


def _known(columns: tuple[str, ...]) -> Column:
    known = F.lit(True)
    for name in columns:
        known = known & F.col(name).isNotNull()
    return known


def _before_redelivery(ack_ts: Column) -> Column:
    return F.col("next_delivery_ts").isNull() | (ack_ts < F.col("next_delivery_ts"))


def _individual_answer(rows: DataFrame) -> DataFrame:
    """Per entry, latest first: for each delivery, the later deliveries (the next one's
    time, and so its number) and the earliest individual ack at or after it, which answers
    it if it comes before the next delivery."""
    # The ids first: sorting compares them before the names, which they mostly decide.
    # Every window below shares this one order, so the rows are sorted once.
    latest_first = Window.partitionBy("entry_id", "ledger_id", *SUBSCRIPTION).orderBy(
        # At one time, acks before deliveries: an ack in the delivery's own packet answers it.
        F.desc("ts"),
        F.desc("individual"),
        F.desc("stream_offset"),
    )
    after = latest_first.rowsBetween(Window.unboundedPreceding, -1)
    from_here = latest_first.rowsBetween(Window.unboundedPreceding, Window.currentRow)
    entry = latest_first.rowsBetween(Window.unboundedPreceding, Window.unboundedFollowing)
    is_delivery = F.col("row") == DELIVERED
    later_deliveries = F.count(F.when(is_delivery, 1)).over(after)
    deliveries = F.count(F.when(is_delivery, 1)).over(entry)
    individual = F.when(F.col("individual"), F.struct("ts", "error"))
    return (
        rows.withColumn("individual", F.col("row") == INDIVIDUAL)
        .select(
            "*",
            F.min(F.when(is_delivery, F.col("ts"))).over(after).alias("next_delivery_ts"),
            (deliveries - later_deliveries).cast("int").alias("delivery_number"),
            F.min(individual).over(from_here).alias("first_ack"),
        )
        .withColumn(
            "individual_ts",
            F.when(_before_redelivery(F.col("first_ack.ts")), F.col("first_ack.ts")),
        )
        .withColumn(
            "individual_error",
            F.when(F.col("individual_ts").isNotNull(), F.col("first_ack.error")),
        )
    )


def _cumulative_answer(rows: DataFrame) -> DataFrame:
    """``cumulative_ts``: the earliest cumulative ack after the delivery at or beyond the
    entry's position, before the entry is delivered again.

    Without a quadratic range join: cumulative acks move forward, so the answer is the
    later of (the first ack at or beyond the position) and (the first ack after the
    delivery), both running minimums over one sorted pass per subscription.
    """
    ack_ts = F.when(F.col("cumulative"), F.col("ts"))
    by_position = (
        Window.partitionBy(*SUBSCRIPTION)
        .orderBy(F.desc("ledger_id"), F.desc("entry_id"), F.desc("cumulative"))
        .rowsBetween(Window.unboundedPreceding, Window.currentRow)
    )
    # "Rows after this one" as a running frame in reverse order: Spark recomputes a frame
    # ending at unboundedFollowing for every row, quadratic in the partition's size.
    by_time = (
        Window.partitionBy(*SUBSCRIPTION)
        .orderBy(F.desc("ts"), F.desc("cumulative"))
        .rowsBetween(Window.unboundedPreceding, -1)
    )
    at_or_beyond = F.min(ack_ts).over(by_position)
    after = F.min(ack_ts).over(by_time)
    # greatest() skips nulls; no ack on either side means no answer.
    answer = F.when(at_or_beyond.isNotNull() & after.isNotNull(), F.greatest(at_or_beyond, after))
    return (
        rows.withColumn("cumulative", F.col("row") == CUMULATIVE)
        .withColumn("cumulative_ts", answer)
        .withColumn(
            "cumulative_ts",
            F.when(_before_redelivery(F.col("cumulative_ts")), F.col("cumulative_ts")),
        )
        .drop("cumulative")
    )


def member_acks(frames: DataFrame) -> DataFrame:
    """One row per message id an individual ACK names on a delivered entry, with
    ``members``: the entry's messages it acknowledges that were still owed (0 for an ack
    repeated), and the acking ``conn_id`` and ``consumer_id``.

    With batch-index acknowledgement an ACK names batch members by the entry's id and an
    ack_set whose cleared bits are the members acknowledged (the Java and Go clients send
    every member acknowledged so far, the C++ client those of this ack); an id without
    one acknowledges the whole entry. The broker keeps per entry the members owed and
    intersects each ack_set with them, counting what left
    (``Consumer.individualAckNormal``); so does this, per entry in time order. A delivery
    owes what it delivers: the members its own ack_set leaves set, else all of them (an
    entry the broker delivers again after a transaction's acks were aborted is owed again).
    The batch's size is the entry's ``num_messages`` as delivered; ids of entries the
    capture never delivered are left out.
    """
    return (
        _member_steps(_member_rows(frames), frames)
        .where(F.col("row") == INDIVIDUAL)
        .select(*ENTRY, "conn_id", "consumer_id", "ts", "members")
    )


PARTIAL = (*ENTRY, "ack_conn_id", "ack_offset", "place")  # an id of an ACK frame


def _partial_acks(frames: DataFrame) -> DataFrame:
    """The ids of individual ACKs that leave members of their entry owed (an ack_set with
    members not acknowledged yet), by ``PARTIAL``: they answer no delivery. Only entries
    some ack_set names are followed."""
    rows = _member_rows(frames)
    named = rows.where((F.col("row") == INDIVIDUAL) & (F.size("words") > 0)).select(*ENTRY)
    steps = _member_steps(rows.join(named.distinct(), list(ENTRY), "left_semi"), frames)
    return steps.where((F.col("row") == INDIVIDUAL) & (F.col("owed") > 0)).select(
        *ENTRY,
        F.col("conn_id").alias("ack_conn_id"),
        F.col("stream_offset").alias("ack_offset"),
        "place",
    )


def _member_rows(frames: DataFrame) -> DataFrame:
    """Every delivery of a known entry and every id an individual ACK names, with
    ``place`` (the id's in the ACK's list) and ``words`` (its ack_set, or a delivery's)."""
    individual = F.coalesce("ack_type", F.lit("Individual")) != "Cumulative"
    ack = (F.col("command") == "ACK") & individual & (F.size("message_ids") > 0)
    delivery = (F.col("command") == "MESSAGE") & F.col("ledger_id").isNotNull()
    exploded = frames.where(ack | delivery).select(
        *SUBSCRIPTION,
        "conn_id",
        "consumer_id",
        "ts",
        "stream_offset",
        "ack_sets",
        "ledger_id",
        "entry_id",
        F.when(delivery, DELIVERED).otherwise(INDIVIDUAL).alias("row"),
        F.posexplode_outer(F.when(ack, F.col("message_ids"))).alias("place", "_id"),
    )
    return exploded.select(
        *SUBSCRIPTION,
        "conn_id",
        "consumer_id",
        "ts",
        "stream_offset",
        "row",
        F.coalesce("place", F.lit(0)).alias("place"),
        F.coalesce("_id.ledger_id", "ledger_id").alias("ledger_id"),
        F.coalesce("_id.entry_id", "entry_id").alias("entry_id"),
        F.filter(F.coalesce("ack_sets", F.array()), lambda w: w["id"] == F.col("place")).alias(
            "words"
        ),
    ).where(_known(ENTRY))


def _member_steps(rows: DataFrame, frames: DataFrame) -> DataFrame:
    """:func:`_member_rows` per entry in time order, each with ``members`` (what an ack
    took off the members owed) and ``owed`` (how many are owed after it)."""
    sizes = _deliveries(frames).groupBy(*ENTRY).agg(F.max("num_messages").alias("size"))
    # The members an id or a delivery leaves owed: the set bits of its words below the
    # batch's size; without words, none (an ack) or all (a delivery).
    every = F.sequence(F.lit(0), F.col("size") - 1)
    set_bits = F.expr(
        "filter(sequence(0, size - 1), i -> exists(words,"
        " w -> w.word = i div 64 and shiftright(w.bits, i % 64) & 1 = 1))"
    )
    owed = (
        F.when(F.size("words") > 0, set_bits)
        .when(F.col("row") == DELIVERED, every)
        .otherwise(F.array().cast("array<int>"))
    )
    steps = rows.join(sizes, list(ENTRY)).withColumn("owed", owed)
    in_order = F.sort_array(
        F.collect_list(
            F.struct("ts", "row", "stream_offset", "place", "conn_id", "consumer_id", "owed")
        )
    )
    # In turn: a delivery owes what it owes; an ack leaves the intersection, its members
    # what left.
    left = "array_intersect(done.left, s.owed)"
    members = f"concat(done.members, array(size(done.left) - size({left})))"
    still = f"concat(done.still, array(size({left})))"
    acked = f"named_struct('left', {left}, 'members', {members}, 'still', {still})"
    delivered = (
        "named_struct('left', s.owed, 'members', concat(done.members, array(0)),"
        " 'still', concat(done.still, array(size(s.owed))))"
    )
    none = "cast(array() as array<int>)"
    counted = F.expr(
        f"aggregate(steps, named_struct('left', {none}, 'members', {none}, 'still', {none}),"
        f" (done, s) -> if(s.row = {DELIVERED}, {delivered}, {acked}))"
    )
    return (
        steps.groupBy(*ENTRY)
        .agg(in_order.alias("steps"))
        .select(*ENTRY, "steps", counted.alias("counted"))
        .select(*ENTRY, "steps", "counted.members", "counted.still")
        .select(*ENTRY, F.explode(F.arrays_zip("steps", "members", "still")).alias("_step"))
        .select(
            *ENTRY,
            *(
                F.col(f"_step.steps.{c}").alias(c)
                for c in ("row", "conn_id", "consumer_id", "ts", "stream_offset", "place")
            ),
            F.col("_step.members").alias("members"),
            F.col("_step.still").alias("owed"),
        )
    )
