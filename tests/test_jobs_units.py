"""The jobs' matching rules on small frame tables built by hand, for the cases the sample
captures do not contain: requests sharing a capture time, cumulative acks, batches
overspending permits, a redelivery after a reconnect."""

from __future__ import annotations

import io
import threading
import time
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest
from pyspark.sql import types as T

from pwcap.cli.analyze import latency_by_kind, summary
from pwcap.cli.analyze_progress import AnalyzeProgress
from pwcap.jobs import acks, latency, permits, redelivery
from pwcap.jobs.common import (
    connection_ends,
    kept,
    spark_schema,
    spark_type,
    write_concurrently,
)
from pwcap.tables.analytics import ANALYTICS

EPOCH = datetime(2026, 1, 1, tzinfo=UTC)
SUB = {"topic": "persistent://t/n/topic", "subscription": "sub", "capture": "unit.pcap"}


def at(us: int) -> datetime:
    return EPOCH + timedelta(microseconds=us)


def us(collected: datetime | None) -> int | None:
    """A collected timestamp (naive, in the session's UTC) back to test microseconds."""
    if collected is None:
        return None
    return (collected.replace(tzinfo=UTC) - EPOCH) // timedelta(microseconds=1)


def table(spark, name: str, rows: list[dict[str, Any]]):
    """A dataset table: the given columns, the rest null; times in microseconds."""
    schema = spark_schema(name)
    full = []
    for offset, row in enumerate(rows):
        row = {"capture": "unit.pcap", "protocol": "pulsar", "stream_offset": offset, **row}
        for column in ("ts", "request_ts"):
            if column in row:
                row[column] = at(row[column])
        full.append(tuple(row.get(field.name) for field in schema))
    return spark.createDataFrame(full, schema)


def frame(us: int, command: str, direction: str, conn_id: int = 1, **fields: Any) -> dict:
    return {"ts": us, "command": command, "direction": direction, "conn_id": conn_id, **fields}


def test_two_requests_in_one_packet_one_answered_leaves_one_unanswered(spark):
    frames = table(
        spark,
        "frames",
        [
            frame(100, "LOOKUP", "c2b", request_id=1),
            frame(100, "LOOKUP", "c2b", request_id=2),
            frame(350, "LOOKUP_RESPONSE", "b2c", request_id=1, answers="LOOKUP", request_ts=100),
        ],
    )
    pairs = latency.answered_requests(frames).unionByName(latency.unanswered_requests(frames))
    got = sorted((r.outcome, r.latency_us) for r in pairs.collect())
    assert got == [("success", 250), ("unanswered", None)]


def test_requests_short_of_answers_are_found_alike_when_too_many_to_look_up(spark, monkeypatch):
    """Past ``LOOKED_UP`` keys short of answers, the requests are joined with them rather
    than matched in memory: the same requests are unanswered, the later ones of a packet."""
    frames = table(
        spark,
        "frames",
        [
            frame(100, "LOOKUP", "c2b", request_id=1),
            frame(100, "LOOKUP", "c2b", request_id=2),
            frame(100, "LOOKUP", "c2b", request_id=3),
            frame(350, "LOOKUP_RESPONSE", "b2c", request_id=1, answers="LOOKUP", request_ts=100),
            frame(400, "PING", "c2b"),
            frame(900, "PING", "b2c"),
        ],
    )
    found = {}
    for looked_up in (100, 0):
        monkeypatch.setattr(latency, "LOOKED_UP", looked_up)
        rows = latency.unanswered_requests(frames).collect()
        found[looked_up] = sorted((r.kind, us(r.request_ts)) for r in rows)
    assert (
        found[100] == found[0] == [("LOOKUP", 100), ("LOOKUP", 100), ("PING", 400), ("PING", 900)]
    )


def test_a_response_to_a_request_the_frames_lack_hides_no_unanswered_request_beside_it(spark):
    """Requests and responses are first counted per connection and time: there, one too
    many responses (a request the capture lost) would balance one request too few, were
    the rest of the key not compared."""
    frames = table(
        spark,
        "frames",
        [
            frame(100, "LOOKUP", "c2b", request_id=1),
            frame(300, "GET_SCHEMA_RESPONSE", "b2c", answers="GET_SCHEMA", request_ts=100),
        ],
    )
    rows = latency.unanswered_requests(frames).collect()
    assert [(r.kind, us(r.request_ts)) for r in rows] == [("LOOKUP", 100)]


def test_a_response_naming_a_lost_request_of_the_same_command_hides_no_unanswered_one(spark):
    """One request and one response in the same second balance by count; the keys they
    name (their times) do not, so the request is still found unanswered."""
    frames = table(
        spark,
        "frames",
        [
            frame(100, "LOOKUP", "c2b", request_id=1),
            frame(300, "LOOKUP_RESPONSE", "b2c", request_id=2, answers="LOOKUP", request_ts=200),
            frame(5_000_000, "LOOKUP", "c2b", request_id=3),  # another second, answered
            frame(5_000_100, "LOOKUP_RESPONSE", "b2c", answers="LOOKUP", request_ts=5_000_000),
        ],
    )
    rows = latency.unanswered_requests(frames).collect()
    assert [(r.kind, us(r.request_ts)) for r in rows] == [("LOOKUP", 100)]


def test_requests_of_other_connections_at_the_same_time_are_told_apart(spark):
    frames = table(
        spark,
        "frames",
        [
            frame(100, "LOOKUP", "c2b", conn_id=1, request_id=1),
            frame(100, "LOOKUP", "c2b", conn_id=2, request_id=1),
            frame(200, "LOOKUP_RESPONSE", "b2c", conn_id=2, answers="LOOKUP", request_ts=100),
        ],
    )
    rows = latency.unanswered_requests(frames).collect()
    assert [(r.conn_id, r.kind) for r in rows] == [(1, "LOOKUP")]


def delivery(us: int, entry: int, conn_id: int = 1, **fields: Any) -> dict:
    defaults = {"consumer_id": 0, "ledger_id": 7, "entry_id": entry, "num_messages": 1, **SUB}
    return frame(us, "MESSAGE", "b2c", conn_id, **{**defaults, **fields})


def ack(us: int, entries: list[int], ack_type: str = "Individual") -> dict:
    ids = [{"ledger_id": 7, "entry_id": e, "partition": -1, "batch_index": -1} for e in entries]
    return frame(
        us,
        "ACK",
        "c2b",
        consumer_id=0,
        ack_type=ack_type,
        ledger_id=7,
        entry_id=entries[0],
        num_message_ids=len(ids),
        message_ids=ids,
        **SUB,
    )


def exact_percentile(values: list[int], q: float) -> float:
    """The percentile as Spark's exact ``percentile`` defines it: interpolated between the
    two values around rank q * (n - 1) of the sorted values."""
    ordered = sorted(values)
    rank = q * (len(ordered) - 1)
    low = int(rank)
    high = min(low + 1, len(ordered) - 1)
    return ordered[low] + (ordered[high] - ordered[low]) * (rank - low)


# Two kinds; latencies repeat within each, unanswered and redelivered pairs have none.
REPEATING = {"SEND": [5, 5, 5, 7, 7, 100, 5, 3], "delivery_ack": [40, 40, 41, 40, 2000]}


def repeating_pairs(spark):
    """``latency_pairs`` rows of :data:`REPEATING`: one SEND failed, one unanswered, one
    delivery redelivered."""
    rows = []
    for kind, values in REPEATING.items():
        for i, value in enumerate(values):
            outcome = "error:ServiceNotReady" if kind == "SEND" and i == 5 else "success"
            rows.append(
                {"kind": kind, "request_ts": at(1000 + i), "latency_us": value, "outcome": outcome}
            )
    rows.append({"kind": "SEND", "request_ts": at(1100), "outcome": "unanswered"})
    rows.append({"kind": "delivery_ack", "request_ts": at(1100), "outcome": "redelivered"})
    return analytics_table(
        spark, "latency_pairs", [{**SUB, "broker": "10.0.0.2:6650", **row} for row in rows]
    )


def analytics_table(spark, name: str, rows: list[dict[str, Any]]):
    """An analytics table of the given rows, columns left out null."""
    columns = ANALYTICS[name]
    schema = T.StructType([T.StructField(c.name, spark_type(c.type)) for c in columns])
    return spark.createDataFrame([tuple(row.get(c.name) for c in columns) for row in rows], schema)


def test_summary_percentiles_and_counts_hold_when_latencies_repeat(spark):
    summary = latency.latency_summary(repeating_pairs(spark), "1 minute")
    got = {row.kind: row for row in summary.collect()}
    assert set(got) == set(REPEATING)
    for kind, values in REPEATING.items():
        row = got[kind]
        assert row["count"] == len(values)
        assert (row.min_us, row.max_us) == (min(values), max(values))
        for column, q in latency.PERCENTILES.items():
            assert row[column] == pytest.approx(exact_percentile(values, q)), (kind, column)
    assert (got["SEND"].errors, got["SEND"].unanswered, got["SEND"].redelivered) == (1, 1, 0)
    assert (got["delivery_ack"].errors, got["delivery_ack"].redelivered) == (0, 1)


def test_analyze_prints_each_kinds_exact_percentiles_worst_first_and_the_unanswered(spark):
    pairs = repeating_pairs(spark)
    got = {row.kind: row for row in latency_by_kind(pairs)}
    for kind, values in REPEATING.items():
        assert (got[kind].n, got[kind].max) == (len(values), max(values))
        assert got[kind].q == pytest.approx([exact_percentile(values, q) for q in (0.5, 0.99)])
    assert (got["SEND"].unanswered, got["delivery_ack"].unanswered) == (1, 0)
    others = {
        name: analytics_table(spark, name, []) for name in ANALYTICS if name != "latency_pairs"
    }
    printed = summary({"latency_pairs": pairs, **others}).splitlines()
    assert [line.split()[0] for line in printed[1:3]] == ["delivery_ack", "SEND"]
    assert printed[3] == "  requests never answered: SEND 1"


def test_a_cumulative_ack_answers_every_earlier_delivery_up_to_its_position(spark):
    frames = table(
        spark,
        "frames",
        [
            delivery(1_000, 0),
            delivery(1_100, 1),
            delivery(1_200, 2),
            ack(2_000, [1], "Cumulative"),  # entries 0 and 1, not 2
            delivery(2_500, 3),
            ack(3_000, [3], "Cumulative"),  # entries 2 and 3
        ],
    )
    answered = {r.entry_id: r for r in acks.answered_deliveries(frames).collect()}
    assert {e: (r.ack_how, us(r.ack_ts)) for e, r in answered.items()} == {
        0: ("cumulative", 2_000),
        1: ("cumulative", 2_000),
        2: ("cumulative", 3_000),
        3: ("cumulative", 3_000),
    }


def test_an_ack_after_a_redelivery_answers_the_redelivery_not_the_first_delivery(spark):
    frames = table(
        spark,
        "frames",
        [
            delivery(1_000, 0),
            delivery(5_000, 0, redelivery_count=1),
            ack(5_400, [0]),
            delivery(6_000, 1),  # never acked
        ],
    )
    pairs = latency.delivery_ack(acks.answered_deliveries(frames)).collect()
    got = sorted((us(r.request_ts), r.outcome, r.latency_us) for r in pairs)
    assert got == [
        (1_000, "redelivered", None),
        (5_000, "success", 400),
        (6_000, "unanswered", None),
    ]
    holes = redelivery.unacked(frames).collect()
    assert [(h.entry_id, h.deliveries) for h in holes] == [(1, 1)]


def test_ack_holes_by_aggregates_are_the_unanswered_last_deliveries_of_the_sorted_passes(spark):
    """The unacked table counts and compares times instead of answering every delivery:
    on redeliveries, same-time deliveries and acks, acks of entries never delivered or of
    an unknown subscription, and cumulative acks ahead of or behind a delivery, its holes
    are exactly the deliveries :func:`acks.answered_deliveries` leaves unanswered last."""
    other = {**SUB, "subscription": "cumulative-sub"}
    unknown = {**SUB, "subscription": None}
    frames = table(
        spark,
        "frames",
        [
            delivery(1_000, 0),
            delivery(2_000, 0, redelivery_count=1),
            ack(1_500, [0]),  # answers the first delivery, not the redelivery: a hole
            delivery(3_000, 1),
            delivery(3_000, 1, conn_id=2),  # the same time: the later in the stream is last
            ack(3_000, [1]),  # in the same packet: answers it
            delivery(4_000, 2),
            delivery(4_000, 3),  # never acked
            ack(3_500, [2]),  # before the delivery: a hole
            ack(5_000, [9]),  # an entry never delivered
            {**ack(5_000, [3]), **unknown},  # whose subscription nobody knows: answers nothing
            delivery(1_000, 0, **other),
            delivery(1_100, 5, **other),
            delivery(6_000, 6, **other),
            {**ack(2_000, [4], "Cumulative"), **other},  # reaches entry 0, not 5
            {**ack(7_000, [6], "Cumulative"), **other},  # reaches 5 and 6, after both
            delivery(8_000, 7, **other),  # after the last cumulative ack: a hole
        ],
    )
    general = acks.answered_deliveries(frames).where("next_delivery_ts is null and ack_ts is null")
    columns = [*acks.DELIVERY, "deliveries"]
    expected = general.withColumnRenamed("delivery_number", "deliveries").select(*columns)
    got = acks.unanswered_last_deliveries(frames).select(*columns)
    assert sorted(got.collect()) == sorted(expected.collect())
    holes = sorted((r.subscription, r.entry_id, r.conn_id, r.deliveries) for r in got.collect())
    assert holes == [
        ("cumulative-sub", 7, 1, 1),
        ("sub", 0, 1, 2),
        ("sub", 2, 1, 1),
        ("sub", 3, 1, 1),
    ]


def consumer_frames(spark, late_refill: bool):
    subscribed = frame(0, "SUCCESS", "b2c", consumer_id=0, answers="SUBSCRIBE", request_ts=0, **SUB)
    flow = lambda us, n: frame(us, "FLOW", "c2b", consumer_id=0, permits=n, **SUB)  # noqa: E731
    refill_delivery = 30_000 + (permits.PROMPT_US * 2 if late_refill else 100)
    return table(
        spark,
        "frames",
        [
            subscribed,
            flow(10, 2),
            delivery(1_000, 0, num_messages=3),  # a batch of 3 on 2 permits: balance -1
            delivery(2_000, 1),  # sent with no permit left: beyond the permits
            flow(30_000, 4),  # balance 2: the span ends
            delivery(refill_delivery, 2),
        ],
    )


@pytest.mark.parametrize("late_refill", [False, True])
def test_a_batch_overspends_permits_and_the_next_flow_ends_the_starvation(spark, late_refill):
    frames = consumer_frames(spark, late_refill)
    timeline = permits.permit_timeline(frames)
    balances = [r.balance for r in timeline.orderBy("ts").collect()]
    assert balances == [0, 2, -1, -2, 2, 1]
    ends = connection_ends(frames)
    (span,) = permits.starvation_intervals(timeline, ends).collect()
    assert (us(span.start_ts), us(span.end_ts), span.duration_us) == (1_000, 30_000, 29_000)
    assert span.ended_by == "flow"
    assert span.backlog_waiting is not late_refill
    (summary,) = permits.permit_summary(
        timeline, permits.starvation_intervals(timeline, ends), ends
    ).collect()
    assert (summary.permits_granted, summary.messages_delivered) == (6, 5)
    assert summary.deliveries_beyond_permits == 1
    assert (summary.receiver_queue_size, summary.refill_permits) == (2, 4)


def test_batch_members_acknowledged_before_spend_no_permit(spark):
    """A redelivered batch of 4 whose ack_set says 3 were acknowledged delivers one."""
    frames = table(
        spark,
        "frames",
        [
            frame(0, "SUCCESS", "b2c", consumer_id=0, answers="SUBSCRIBE", request_ts=0, **SUB),
            frame(10, "FLOW", "c2b", consumer_id=0, permits=2, **SUB),
            delivery(1_000, 0, num_messages=4, acked_in_batch=3),
            delivery(2_000, 1),
        ],
    )
    timeline = permits.permit_timeline(frames).orderBy("ts").collect()
    assert [(r.messages, r.balance) for r in timeline] == [(None, 0), (None, 2), (1, 1), (1, 0)]


def test_a_span_ends_at_the_event_after_its_last_one_when_two_share_a_microsecond(spark):
    """Events of one time are ordered by direction, then offset (offsets of two directions
    do not compare): the span ends at the FLOW that lifts the balance above zero, not at
    the FLOW sharing a delivery's time that leaves it at zero."""
    flow = lambda us, n, **more: frame(us, "FLOW", "c2b", consumer_id=0, permits=n, **SUB, **more)  # noqa: E731
    frames = table(
        spark,
        "frames",
        [
            frame(0, "SUCCESS", "b2c", consumer_id=0, answers="SUBSCRIBE", request_ts=0, **SUB),
            flow(10, 1),
            delivery(1_000, 0),  # balance 0: starved
            delivery(2_000, 1, stream_offset=900),  # -1
            flow(2_000, 1, stream_offset=50),  # 0: still starved
            flow(3_000, 5),  # 5: the span ends
        ],
    )
    timeline = permits.permit_timeline(frames)
    (span,) = permits.starvation_intervals(timeline, connection_ends(frames)).collect()
    assert (us(span.start_ts), us(span.end_ts), span.ended_by) == (1_000, 3_000, "flow")


def test_a_redelivery_after_the_consumer_connection_ended_is_a_reconnect(spark):
    message = {
        "command": "MESSAGE",
        "direction": "b2c",
        "consumer_id": 0,
        "ledger_id": 7,
        "entry_id": 0,
        **SUB,
    }
    messages = table(
        spark,
        "messages",
        [
            {"ts": 1_000, "conn_id": 1, **message},
            {"ts": 9_000, "conn_id": 2, "redelivery_count": 1, **message},
        ],
    )
    frames = table(
        spark,
        "frames",
        [
            delivery(1_000, 0, conn_id=1),
            frame(2_000, "PING", "b2c", conn_id=1),  # the old connection's last frame
            delivery(9_000, 0, conn_id=2, redelivery_count=1),
        ],
    )
    rows = redelivery.redeliveries(redelivery.message_deliveries(messages), frames).collect()
    got = sorted((r.delivery_number, r.conn_id, r.trigger, r.since_first_delivery_us) for r in rows)
    assert got == [(1, 1, None, None), (2, 2, "reconnect", 8_000)]


def test_each_redelivery_names_the_first_trigger_kind_seen_since_the_delivery_before_it(spark):
    times = [1_000, 3_000, 5_000, 7_000, 9_000, 11_000, 13_000]
    message = {"command": "MESSAGE", "direction": "b2c", "conn_id": 1, "consumer_id": 0, **SUB}
    messages = table(
        spark,
        "messages",
        [
            {"ts": ts, "ledger_id": 7, "entry_id": 0, "redelivery_count": n, **message}
            for n, ts in enumerate(times)
        ],
    )
    redeliver = "REDELIVER_UNACKNOWLEDGED_MESSAGES"
    entry = [{"ledger_id": 7, "entry_id": 0, "partition": -1, "batch_index": -1}]
    other_entry = [{**entry[0], "entry_id": 1}]
    frames = table(
        spark,
        "frames",
        [
            *(delivery(ts, 0) for ts in times),
            # before the 2nd delivery: a request naming the entry outranks a seek
            frame(2_000, redeliver, "c2b", num_message_ids=1, message_ids=entry, **SUB),
            frame(2_500, "SEEK", "c2b", **SUB),
            # before the 3rd: a request naming no ids outranks a new subscribe
            frame(4_000, redeliver, "c2b", num_message_ids=0, **SUB),
            frame(4_500, "SUBSCRIBE", "c2b", **SUB),
            # before the 4th: a seek outranks a new subscribe
            frame(6_000, "SEEK", "c2b", **SUB),
            frame(6_500, "SUBSCRIBE", "c2b", **SUB),
            # before the 5th: a new subscribe (the broker's answer is no trigger)
            frame(8_000, "SUBSCRIBE", "c2b", **SUB),
            frame(8_100, "SUCCESS", "b2c"),
            # before the 6th: only what does not count: a subscribe at the previous
            # delivery's own time (the 5th's), a request naming another entry, a seek on
            # another subscription
            frame(9_000, "SUBSCRIBE", "c2b", **SUB),
            frame(10_000, redeliver, "c2b", num_message_ids=1, message_ids=other_entry, **SUB),
            frame(10_500, "SEEK", "c2b", **{**SUB, "subscription": "other"}),
            # the 7th: a seek at the delivery's own time counts
            frame(13_000, "SEEK", "c2b", **SUB),
            frame(20_000, "PING", "c2b"),  # the connection outlives every delivery
        ],
    )
    rows = redelivery.redeliveries(redelivery.message_deliveries(messages), frames).collect()
    got = sorted((r.delivery_number, r.trigger) for r in rows)
    assert got == [
        (1, None),
        (2, "redeliver_ids"),
        (3, "redeliver_all"),
        (4, "seek"),
        (5, "reconnect"),
        (6, "none_visible"),
        (7, "seek"),
    ]


def test_analyze_progress_names_the_tables_under_way_and_the_tasks_of_the_running_stages(spark):
    stream = io.StringIO()
    with AnalyzeProgress(spark.sparkContext, 3, stream) as progress:
        progress.started("latency_pairs")
        progress.started("unacked")
        progress.written("latency_pairs")
        progress.started("latency_summary")
        slow = (
            spark.range(8).repartition(8).selectExpr("reflect('java.lang.Thread', 'sleep', 400L)")
        )
        slow.collect()  # eight tasks of 0.4 s on the test's cores: drawn while they run
    drawn = stream.getvalue()
    assert "[1/3] unacked, latency_summary" in drawn
    assert "stage tasks " in drawn and "/8" in drawn
    assert drawn.endswith("\r\x1b[K")  # the line is wiped when the tables are written


def test_groups_of_tables_are_built_and_written_at_the_same_time(spark, tmp_path):
    second_started = threading.Event()

    def first() -> dict:
        # Run one group after the other and this would wait for the second in vain.
        assert second_started.wait(timeout=60), "the second group did not start meanwhile"
        return {"a": spark.range(3)}

    def second() -> dict:
        second_started.set()
        return {"b": spark.range(5)}

    written = write_concurrently([first, second], str(tmp_path))
    assert list(written) == ["a", "b"]
    assert spark.read.parquet(written["a"]).count() == 3
    assert spark.read.parquet(written["b"]).count() == 5


def test_a_failing_group_stops_the_others_and_its_error_is_raised(spark, tmp_path):
    # Forty one-second tasks: twenty seconds on the test's two cores if nothing stops them.
    slow = (
        spark.range(40)
        .repartition(40)
        .selectExpr("id", "reflect('java.lang.Thread', 'sleep', 1000L) AS slept")
    )

    def failing() -> dict:
        deadline = time.monotonic() + 60
        while not spark.sparkContext.statusTracker().getActiveJobsIds():
            assert time.monotonic() < deadline, "the slow group's job never started"
            time.sleep(0.05)
        raise ValueError("this group cannot be built")

    began = time.monotonic()
    with pytest.raises(ValueError, match="cannot be built"):
        write_concurrently([lambda: {"slow": slow}, failing], str(tmp_path))
    assert time.monotonic() - began < 15  # cancelled, not run to its end
    assert not (tmp_path / "slow").exists()


def test_the_connection_ends_are_aggregated_once_for_every_job_of_a_session(spark):
    frames = table(spark, "frames", [frame(10, "FLOW", "c2b"), frame(20, "PING", "b2c")])
    (end,) = connection_ends(frames).collect()
    assert us(end.capture_end) == 20
    again = connection_ends(frames).select("conn_id", "capture_end")
    assert "InMemoryTableScan" in again._jdf.queryExecution().executedPlan().toString()


def test_a_kept_result_is_computed_once_and_read_back_as_stored_rows_in_a_local_session(spark):
    frames = table(spark, "frames", [frame(10, "FLOW", "c2b"), frame(20, "PING", "b2c")])
    counted = kept(frames.groupBy("conn_id").count())
    assert [tuple(row) for row in counted.collect()] == [(1, 2)]
    plan = counted.where("count > 1")._jdf.queryExecution().executedPlan().toString()
    assert "ExistingRDD" in plan and "Aggregate" not in plan
