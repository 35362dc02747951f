"""Report sections over the analytics tables: latency, permits, redelivery."""

from __future__ import annotations

from collections import Counter
from datetime import datetime
from typing import Any

import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.dataset as ds

from . import markup as m
from . import svg
from .decoded import MAX_BARS, TOP, missing
from .tables import Source, count_by, read_columns, sum_by, top_rows, value_range
from .timeaxis import BrokenAxis

PERCENTILES = {"p50": 0.5, "p90": 0.9, "p99": 0.99, "max": 1.0}
TIME_BINS = 120  # points per series of a chart over time
SERIES = 6  # kinds drawn in the latency-over-time chart
CONSUMERS = 8  # permit timelines drawn
TIMELINE_POINTS = 400  # points per permit timeline, after downsampling
SPANS = 300  # starvation spans shaded per consumer (the longest)


def _micros_column(column: pa.ChunkedArray) -> pa.ChunkedArray:
    return pc.cast(column, pa.timestamp("us", tz="UTC")).cast(pa.int64())


class LatencyKinds:
    """Percentiles and p99-over-time of each kind of pair, read one kind at a time so
    memory holds one kind's latencies, never the whole pairs table. Time bins lie on
    ``axis``, which skips the hours no capture recorded."""

    def __init__(self, pairs: ds.Dataset, axis: BrokenAxis) -> None:
        self.outcomes = count_by(pairs, ["kind", "outcome"])
        answered = pc.field("latency_us").is_valid()
        self.axis = axis
        self.width = axis.length / TIME_BINS
        kinds = Counter[str]()
        for (kind, _), n in self.outcomes.items():
            if kind is not None:
                kinds[kind] += n
        self.busiest = [kind for kind, _ in kinds.most_common(SERIES)]
        self.rows: list[dict[str, Any]] = []
        self.series: list[tuple[str, list[svg.Point]]] = []
        for kind in kinds:
            where = (pc.field("kind") == kind) & answered
            latency = read_columns(pairs, ["request_ts", "latency_us"], where)
            self.rows.append(self._percentiles(kind, latency["latency_us"]))
            if kind in self.busiest:
                self.series.append((kind, self._over_time(latency)))
        self.rows.sort(key=lambda r: -(r.get("p99") or -1))
        self.series.sort(key=lambda s: self.busiest.index(s[0]))

    def unanswered(self) -> Counter[str]:
        """Requests never answered within the capture, by kind (a delivery without an ack
        is not a request: the unacked messages are counted with redelivery)."""
        return Counter(
            {
                kind: n
                for (kind, outcome), n in self.outcomes.items()
                if outcome == "unanswered" and kind != "delivery_ack"
            }
        )

    def _percentiles(self, kind: str, latency: pa.ChunkedArray) -> dict[str, Any]:
        count = {o: n for (k, o), n in self.outcomes.items() if k == kind}
        row: dict[str, Any] = {
            "kind": kind,
            "count": len(latency),
            "unanswered": count.get("unanswered", 0),
            "errors": sum(n for o, n in count.items() if o and o.startswith("error:")),
        }
        if len(latency):  # exact, as Spark's percentile: linear interpolation
            quantiles = pc.quantile(latency, q=list(PERCENTILES.values())).to_pylist()
            row.update(zip(PERCENTILES, quantiles, strict=True))
        return row

    def _over_time(self, latency: pa.Table) -> list[svg.Point]:
        position = self.axis.positions(_micros_column(latency["request_ts"]))
        binned = pa.table(
            {
                "bin": pc.floor(pc.divide(position, self.width)),
                "latency_us": pc.cast(latency["latency_us"], pa.float64()),
            }
        ).filter(pc.is_valid(position))
        grouped = (
            binned.group_by("bin")
            .aggregate([("latency_us", "tdigest", pc.TDigestOptions(q=0.99))])
            .sort_by("bin")
        )
        return [
            (b * self.width + self.width / 2, max(q[0], 1.0))
            for b, q in zip(
                grouped["bin"].to_pylist(), grouped["latency_us_tdigest"].to_pylist(), strict=True
            )
            if q
        ]


def _micros(value: datetime) -> int:
    return round(value.timestamp() * 1_000_000)


LATENCY_COLUMNS = [
    ("kind", "kind"),
    ("count", "answered"),
    ("errors", "errors"),
    ("unanswered", "unanswered"),
    ("p50", "p50"),
    ("p90", "p90"),
    ("p99", "p99"),
    ("max", "max"),
]
PAIR_COLUMNS = [
    ("latency_us", "latency"),
    ("kind", "kind"),
    ("request_ts", "request"),
    ("capture", "capture"),
    ("conn_id", "conn"),
    ("broker", "broker"),
    ("topic", "topic"),
    ("subscription", "subscription"),
    ("producer_id", "producer"),
    ("consumer_id", "consumer"),
    ("sequence_id", "seq"),
    ("outcome", "outcome"),
]
WINDOW_COLUMNS = [
    ("p99_us", "p99"),
    ("window_start", "window"),
    ("kind", "kind"),
    ("topic", "topic"),
    ("subscription", "subscription"),
    ("broker", "broker"),
    ("count", "answered"),
    ("errors", "errors"),
    ("unanswered", "unanswered"),
    ("p50_us", "p50"),
    ("p999_us", "p99.9"),
    ("max_us", "max"),
]
DURATION_COLUMNS = ["latency_us", "duration_us", "p50_us", "p99_us", "p999_us", "max_us"]
DURATIONS = dict.fromkeys([*PERCENTILES, *DURATION_COLUMNS], m.micros)


def latency_kinds(analytics: Source, spans: list[tuple[int, int]]) -> LatencyKinds | None:
    """The latency percentiles, or None without a usable pairs table. ``spans`` are the
    captures' recording times (µs); without them, the pairs' own time range."""
    pairs = analytics.get("latency_pairs")
    if pairs is None or not analytics.has(
        "latency_pairs", "kind", "latency_us", "outcome", "request_ts"
    ):
        return None
    if not spans:
        bounds = value_range(pairs, "request_ts")
        spans = [(_micros(bounds[0]), _micros(bounds[1]))] if bounds else []
    return LatencyKinds(pairs, BrokenAxis(spans))


def latency(analytics: Source, kinds: LatencyKinds | None) -> str:
    pairs_table = analytics.get("latency_pairs")
    if kinds is None or pairs_table is None:
        return m.section("latency", "Latency", [missing(analytics, "latency_pairs")])
    by_kind = kinds.rows
    chart_rows = [(r["kind"], r) for r in by_kind[:MAX_BARS] if r["count"]]
    slowest = top_rows(pairs_table, [c for c, _ in PAIR_COLUMNS], "latency_us", TOP)
    parts = [
        m.subsection(
            "Latency percentiles by kind (log scale)",
            [svg.percentile_bars(chart_rows, list(PERCENTILES), m.micros, "latency by kind")],
        ),
        m.table(by_kind, LATENCY_COLUMNS, DURATIONS),
        m.subsection(
            f"p99 latency over time ({len(kinds.series)} busiest kinds, {TIME_BINS} time"
            " bins over the recorded time, log scale; breaks skip hours nothing was recorded)",
            [
                svg.time_series(
                    kinds.series, kinds.axis, m.micros, "p99 latency", "latency over time"
                )
            ],
        ),
        m.subsection(f"Slowest {len(slowest)} pairs", [m.table(slowest, PAIR_COLUMNS, DURATIONS)]),
    ]
    summary = analytics.get("latency_summary")
    if summary is not None and analytics.has("latency_summary", "p99_us"):
        worst = top_rows(summary, [c for c, _ in WINDOW_COLUMNS], "p99_us", TOP)
        parts.append(
            m.subsection(
                f"Worst windows by p99 ({len(worst)} of {summary.count_rows():,}"
                " kind, topic, subscription, broker and window groups)",
                [m.table(worst, WINDOW_COLUMNS, DURATIONS)],
            )
        )
    else:
        parts.append(missing(analytics, "latency_summary"))
    return m.section("latency", "Latency", parts)


def balance_points(events: pa.Table, limit: int) -> list[svg.Point]:
    """(time µs, balance) of events sorted by time, thinned in Arrow to about ``limit``
    points: each time bucket keeps its first, lowest, highest and last balance, so dips to
    zero and peaks survive, and Python never holds more than ``limit`` points."""
    t = _micros_column(events["ts"])
    balance = events["balance"]
    if events.num_rows <= limit:
        return list(zip(t.to_pylist(), balance.to_pylist(), strict=True))
    buckets = max(1, limit // 4)
    t0, t1 = pc.min(t).as_py(), pc.max(t).as_py()
    width = max(1, (t1 - t0) // buckets + 1)
    table = pa.table({"bucket": pc.divide(pc.subtract(t, t0), width), "t": t, "b": balance})
    grouped = (
        table.group_by("bucket", use_threads=False)  # in order: first and last mean something
        .aggregate([("t", "first"), ("t", "last"), ("b", "first"), ("b", "last"), ("b", "min_max")])
        .sort_by("bucket")
    )
    points: list[svg.Point] = []
    for row in grouped.to_pylist():
        start, end = row["t_first"], row["t_last"]
        middle = (start + end) / 2
        low, high = row["b_min_max"]["min"], row["b_min_max"]["max"]
        points += [(start, row["b_first"]), (middle, low), (middle, high), (end, row["b_last"])]
    return points


def _consumer_filter(consumer: dict[str, Any]) -> pc.Expression:
    """One consumer's rows: its capture, connection and consumer id."""
    where = (pc.field("conn_id") == consumer["conn_id"]) & (
        pc.field("consumer_id") == consumer["consumer_id"]
    )
    if consumer.get("capture") is not None:
        where = where & (pc.field("capture") == consumer["capture"])
    return where


def _timeline(analytics: Source, consumer: dict[str, Any]) -> str:
    where = _consumer_filter(consumer)
    events = read_columns(analytics.get("permit_timeline"), ["ts", "balance"], where)
    events = events.filter(pc.is_valid(events["balance"])).sort_by("ts")
    points = balance_points(events, TIMELINE_POINTS)
    spans: list[tuple[float, float]] = []
    if analytics.has("starvation_intervals", "start_ts", "end_ts", "duration_us"):
        longest = top_rows(
            analytics.get("starvation_intervals"),
            ["start_ts", "end_ts"],
            "duration_us",
            SPANS,
            where,
        )
        spans = [
            (_micros(r["start_ts"]), _micros(r["end_ts"]))
            for r in longest
            if r["start_ts"] and r["end_ts"]
        ]
    names = " / ".join(m.short(consumer[k]) for k in ("topic", "subscription") if consumer.get(k))
    title = " — ".join(
        part
        for part in (
            f"{m.short(consumer.get('capture') or '')} conn {consumer['conn_id']}"
            f" consumer {consumer['consumer_id']}".strip(),
            names,
            f"starved {m.micros(consumer.get('starved_us'))}"
            f" in {consumer.get('starvation_spans') or 0} span(s)",
        )
        if part
    )
    if not points:
        return m.subsection(title, [m.note("Balance unknown (SUBSCRIBE not in the capture).")])
    return m.subsection(title, [svg.step_chart(points, spans, "permits", "permit balance")])


SUMMARY_COLUMNS = [
    ("starved_us", "starved"),
    ("capture", "capture"),
    ("conn_id", "conn"),
    ("consumer_id", "consumer"),
    ("consumer_name", "name"),
    ("topic", "topic"),
    ("subscription", "subscription"),
    ("receiver_queue_size", "queue"),
    ("permits_granted", "permits"),
    ("messages_delivered", "delivered"),
    ("starvation_spans", "spans"),
    ("longest_starvation_us", "longest"),
    ("starved_fraction", "fraction"),
    ("deliveries_beyond_permits", "beyond permits"),
]
INTERVAL_COLUMNS = [
    ("duration_us", "duration"),
    ("capture", "capture"),
    ("conn_id", "conn"),
    ("consumer_id", "consumer"),
    ("topic", "topic"),
    ("subscription", "subscription"),
    ("start_ts", "start"),
    ("end_ts", "end"),
    ("ended_by", "ended by"),
    ("flow_to_delivery_us", "FLOW to delivery"),
    ("backlog_waiting", "backlog waiting"),
]
PERMIT_FORMATS = {
    **DURATIONS,
    "starved_us": m.micros,
    "longest_starvation_us": m.micros,
    "flow_to_delivery_us": m.micros,
    "starved_fraction": lambda v: f"{v:.1%}",
}


def permits(analytics: Source) -> str:
    summary = analytics.get("permit_summary")
    if summary is None or not analytics.has("permit_summary", "starved_us"):
        return m.section(
            "permits", "Permits and starvation", [missing(analytics, "permit_summary")]
        )
    consumers = top_rows(summary, [c for c, _ in SUMMARY_COLUMNS], "starved_us", TOP)
    total = summary.count_rows()
    parts = [
        m.subsection(
            f"Most-starved consumers ({len(consumers)} of {total:,})",
            [m.table(consumers, SUMMARY_COLUMNS, PERMIT_FORMATS)],
        )
    ]
    starved = [c for c in consumers if c.get("starved_us")][:CONSUMERS]
    if not starved:
        parts.append(m.note("No consumer was ever starved of permits."))
    elif analytics.has("permit_timeline", "conn_id", "consumer_id", "ts", "balance"):
        parts.append(
            m.note(
                f"Permit balance over time of the {len(starved)} most-starved consumers;"
                " starvation spans (balance at or below zero) shaded."
            )
        )
        parts += [_timeline(analytics, c) for c in starved]
    else:
        parts.append(missing(analytics, "permit_timeline"))
    intervals = analytics.get("starvation_intervals")
    if intervals is not None and analytics.has("starvation_intervals", "duration_us"):
        longest = top_rows(intervals, [c for c, _ in INTERVAL_COLUMNS], "duration_us", TOP)
        parts.append(
            m.subsection(
                f"Longest starvation intervals ({len(longest)} of {intervals.count_rows():,})",
                [m.table(longest, INTERVAL_COLUMNS, PERMIT_FORMATS)],
            )
        )
    else:
        parts.append(missing(analytics, "starvation_intervals"))
    return m.section("permits", "Permits and starvation", parts)


REDELIVERY_COLUMNS = [
    ("since_first_delivery_us", "after first"),
    ("ts", "time"),
    ("topic", "topic"),
    ("subscription", "subscription"),
    ("ledger_id", "ledger"),
    ("entry_id", "entry"),
    ("partition", "partition"),
    ("batch_index", "batch idx"),
    ("conn_id", "conn"),
    ("consumer_id", "consumer"),
    ("delivery_number", "delivery #"),
    ("deliveries", "deliveries"),
    ("redelivery_count", "redelivery count"),
    ("trigger", "trigger"),
]
SUBSCRIPTION_COLUMNS = [
    ("redeliveries", "redeliveries"),
    ("topic", "topic"),
    ("subscription", "subscription"),
    ("deliveries", "deliveries"),
    ("rate", "rate"),
    ("redeliver_with_ids", "REDELIVER with ids"),
    ("redeliver_all", "REDELIVER all"),
    ("unacked", "never acked"),
]


def redelivery(analytics: Source) -> str:
    summary = analytics.get("redelivery_summary")
    if summary is None:
        return m.section("redelivery", "Redelivery", [missing(analytics, "redelivery_summary")])
    values = ["deliveries", "redeliveries", "redeliver_with_ids", "redeliver_all"]
    sums = sum_by(summary, ["topic", "subscription"], values)
    unacked = analytics.get("unacked")
    holes = count_by(unacked, ["topic", "subscription"]) if unacked is not None else {}
    rows = []
    for key in set(sums) | set(holes):
        totals = dict(zip(values, sums.get(key, [0.0] * len(values)), strict=True))
        row = {name: int(v) for name, v in totals.items()}
        rate = row["redeliveries"] / row["deliveries"] if row["deliveries"] else None
        rows.append(
            {
                "topic": key[0],
                "subscription": key[1],
                **row,
                "rate": rate,
                "unacked": holes.get(key, 0),
            }
        )
    rows.sort(key=lambda r: (-r["redeliveries"], -r["unacked"], str(r["topic"])))
    items = [
        (f"{r['topic']} / {r['subscription']}", r["redeliveries"])
        for r in rows[:MAX_BARS]
        if r["redeliveries"]
    ]
    parts = [
        m.subsection(
            "Redeliveries per subscription",
            [
                svg.bars(items, lambda v: f"{v:,.0f}", "redeliveries per subscription")
                or m.note("No message was delivered twice to a subscription.")
            ],
        ),
        m.table(rows[:TOP], SUBSCRIPTION_COLUMNS, {"rate": lambda v: f"{v:.1%}"}),
    ]
    if unacked is None:
        parts.append(missing(analytics, "unacked"))
    redelivered = analytics.get("redeliveries")
    if redelivered is not None and analytics.has("redeliveries", "since_first_delivery_us"):
        slow = top_rows(
            redelivered, [c for c, _ in REDELIVERY_COLUMNS], "since_first_delivery_us", TOP
        )
        parts.append(
            m.subsection(
                f"Redeliveries longest after the first delivery ({len(slow)} shown)",
                [m.table(slow, REDELIVERY_COLUMNS, {"since_first_delivery_us": m.micros})],
            )
        )
    else:
        parts.append(missing(analytics, "redeliveries"))
    return m.section("redelivery", "Redelivery", parts)
