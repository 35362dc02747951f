"""The report's first section: the answers an SRE opens the page for, each linking to the
section that explains it. Row counts come last, in small print: they are not answers."""

from __future__ import annotations

from collections.abc import Sequence
from datetime import UTC, datetime

import pyarrow as pa
import pyarrow.compute as pc

from . import markup as m
from .analytics import LatencyKinds
from .decoded import missing
from .tables import (
    DECODED_TABLES,
    Source,
    count_by,
    read_columns,
    sum_by,
    top_rows,
)

WORST = 5  # kinds, consumers or subscriptions a card lists
NOT_ANALYSED = "needs the analytics (pwcap analyze, then --analytics)"


def capture_spans(decoded: Source) -> list[tuple[int, int]]:
    """(first, last) capture time in µs of each capture, from its connections."""
    if not decoded.has("connections", "capture", "first_ts", "last_ts"):
        return []
    table = read_columns(decoded.get("connections"), ["capture", "first_ts", "last_ts"])
    if table.num_rows == 0:
        return []
    grouped = table.group_by("capture").aggregate([("first_ts", "min"), ("last_ts", "max")])
    first = pc.cast(grouped["first_ts_min"], pa.int64()).to_pylist()
    last = pc.cast(grouped["last_ts_max"], pa.int64()).to_pylist()
    return [(a, b) for a, b in zip(first, last, strict=True) if a is not None and b is not None]


def _card(anchor: str, title: str, value: str, details: Sequence[str] = ()) -> str:
    lines = "".join(f"<li>{m.esc(line)}</li>" for line in details)
    return (
        f'<a class="answer" href="#{m.esc(anchor)}"><span>{m.esc(title)}</span>'
        f"<b>{m.esc(value)}</b>{f'<ul>{lines}</ul>' if lines else ''}</a>"
    )


def _when(micros: int) -> str:
    return datetime.fromtimestamp(micros / 1e6, UTC).strftime("%Y-%m-%d %H:%M:%S")


def _span(spans: list[tuple[int, int]]) -> str:
    if not spans:
        return _card("connections", "Capture span", "no connections")
    first, last = min(a for a, _ in spans), max(b for _, b in spans)
    recorded = sum(b - a for a, b in spans)
    return _card(
        "connections",
        "Capture span",
        m.micros(last - first),
        [
            f"from {_when(first)} to {_when(last)} UTC",
            f"{len(spans):,} capture(s), {m.micros(recorded)} of traffic in all",
        ],
    )


def _worst_latency(kinds: LatencyKinds | None) -> str:
    """The p99 of each kind of pair over the whole capture: the values of the latency
    section's table by kind, worst first."""
    answered = [r for r in kinds.rows if r.get("p99") is not None] if kinds else []
    if not answered:
        why = NOT_ANALYSED if kinds is None else "no request was answered"
        return _card("latency", "Worst p99 latency, by kind", "–", [why])
    worst = answered[:WORST]
    return _card(
        "latency",
        "Worst p99 latency, by kind",
        m.micros(worst[0]["p99"]),
        [f"{m.micros(r['p99'])}  {m.short(r['kind'])} (n={r['count']:,})" for r in worst],
    )


def _unanswered(kinds: LatencyKinds | None) -> str:
    if kinds is None:
        return _card("latency", "Unanswered requests", "–", [NOT_ANALYSED])
    counts = kinds.unanswered()
    return _card(
        "latency",
        "Unanswered requests",
        f"{sum(counts.values()):,}",
        [f"{m.short(kind)} {n:,}" for kind, n in counts.most_common(WORST)]
        or ["every request answered"],
    )


def _starvation(analytics: Source) -> str:
    if not analytics.has("permit_summary", "starved_us"):
        return _card("permits", "Starved consumers", "–", [NOT_ANALYSED])
    table = read_columns(analytics.get("permit_summary"), ["starved_us"])
    starved = pc.greater(pc.fill_null(table["starved_us"], 0), 0)
    count = pc.sum(starved).as_py() or 0
    total = pc.sum(table["starved_us"]).as_py() or 0
    columns = ["subscription", "consumer_name", "starved_us", "receiver_queue_size"]
    worst = top_rows(
        analytics.get("permit_summary"),
        [c for c in columns if analytics.has("permit_summary", c)],
        "starved_us",
        WORST,
        pc.field("starved_us") > 0,
    )
    return _card(
        "permits",
        "Starved consumers",
        f"{count:,} of {table.num_rows:,}",
        [f"{m.micros(total)} starved in all (balance at zero)"]
        + [
            f"{m.micros(r['starved_us'])}  {m.short(r.get('subscription'))}"
            f" ({m.short(r.get('consumer_name'))}){_likely_cause(r)}"
            for r in worst
        ],
    )


def _likely_cause(consumer: dict) -> str:
    """Why a consumer sat without permits, as far as the capture tells: it grants as many
    as its receiver queue holds, so a small queue runs dry behind a slow application."""
    queue = consumer.get("receiver_queue_size")
    return "" if queue is None else f": likely its receiver queue of {queue:,}"


def _redelivery(analytics: Source) -> str:
    if not analytics.has("redelivery_summary", "deliveries", "redeliveries"):
        return _card("redelivery", "Redelivery rate", "–", [NOT_ANALYSED])
    table = read_columns(analytics.get("redelivery_summary"), ["deliveries", "redeliveries"])
    deliveries = pc.sum(table["deliveries"]).as_py() or 0
    redeliveries = pc.sum(table["redeliveries"]).as_py() or 0
    rate = f"{redeliveries / deliveries:.1%}" if deliveries else "–"
    by_subscription: dict[tuple, list[float]] = {}
    if analytics.has("redelivery_summary", "topic", "subscription"):
        by_subscription = sum_by(
            analytics.get("redelivery_summary"),
            ["topic", "subscription"],
            ["deliveries", "redeliveries"],
        )
    worst = sorted(
        ((r, d, key) for key, (d, r) in by_subscription.items() if r and d), key=lambda w: -w[0]
    )[:WORST]
    return _card(
        "redelivery",
        "Redelivery rate",
        rate,
        [f"{redeliveries:,} redeliveries of {deliveries:,} deliveries"]
        + [
            f"{r / d:.1%}  {m.short(topic)} / {m.short(sub)} ({r:,.0f} of {d:,.0f})"
            for r, d, (topic, sub) in worst
        ],
    )


def _anomalies(decoded: Source) -> str:
    table = decoded.get("anomalies")
    if table is None:
        return _card("anomalies", "Anomalies", "–", ["no anomalies table"])
    counts = count_by(table, ["kind"])
    return _card(
        "anomalies",
        "Anomalies",
        f"{sum(counts.values()):,}",
        [f"{m.short(kind)} {n:,}" for (kind,), n in counts.most_common()]
        or ["none: clean capture"],
    )


def answers(
    decoded: Source, analytics: Source, kinds: LatencyKinds | None, spans: list[tuple[int, int]]
) -> str:
    cards = [
        _worst_latency(kinds),
        _starvation(analytics),
        _redelivery(analytics),
        _anomalies(decoded),
        _unanswered(kinds),
        _span(spans),
    ]
    parts = [f'<div class="answers">{"".join(cards)}</div>']
    counts = [
        f"{table.count_rows():,} {name} rows"
        for source in (decoded, analytics)
        for name, table in source.tables.items()
    ]
    parts.append(m.note("Tables: " + ", ".join(counts) + "."))
    absent = [n for n in DECODED_TABLES if n not in decoded.tables]
    if absent:
        parts.append(missing(decoded, *absent))
    if analytics.problems:
        reason = "no analytics folder given (run `pwcap analyze` and pass --analytics)"
        if analytics.root is not None:
            reason = f"not found under {analytics.root}"
        parts.append(
            f'<p class="missing">Analytics tables missing: {m.esc(", ".join(analytics.problems))}'
            f" — {m.esc(reason)}.</p>"
        )
    return m.section("answers", "Answers", parts)
