"""The report's first section: the capture's problems, most severe first, each with links
to the sections below that hold its evidence."""

from __future__ import annotations

import pyarrow.compute as pc

from . import markup as m
from .decoded import missing
from .tables import Source, top_rows

SHOWN = 50  # findings listed; the table holds them all
# The section of the page that shows each table a finding names as its evidence.
SECTIONS = {
    "connections": ("connections", "Connections"),
    "frames": ("frames", "Frames"),
    "messages": ("frames", "Frames"),
    "anomalies": ("anomalies", "Anomalies"),
    "latency_pairs": ("latency", "Latency"),
    "latency_summary": ("latency", "Latency"),
    "permit_timeline": ("permits", "Permits"),
    "starvation_intervals": ("permits", "Permits"),
    "permit_summary": ("permits", "Permits"),
    "redeliveries": ("redelivery", "Redelivery"),
    "redelivery_summary": ("redelivery", "Redelivery"),
    "unacked": ("redelivery", "Redelivery"),
}
COLUMNS = ["rank", "severity", "kind", "cause", "explanation", "start_ts", "end_ts", "evidence"]


def findings(analytics: Source) -> str:
    """The findings, ranked; a capture without any says so."""
    table = analytics.get("findings")
    if table is None:
        return m.section("findings", "Findings", [missing(analytics, "findings")])
    rows = top_rows(table, COLUMNS, "rank", SHOWN, largest=False)
    total = table.count_rows()
    if not rows:
        return m.section(
            "findings",
            "Findings",
            [m.note("No problem found: every kind of finding was looked for.")],
        )
    items = "".join(_item(row) for row in rows)
    parts = [f'<ol class="findings">{items}</ol>']
    if total > len(rows):
        parts.append(
            m.note(f"The {len(rows)} most severe of {total:,}; the findings table has all.")
        )
    severities = pc.value_counts(table.to_table(columns=["severity"])["severity"])
    counted = ", ".join(f"{c['counts']} {c['values']}" for c in severities.to_pylist())
    return m.section("findings", f"Findings ({counted})", parts)


def _item(row: dict) -> str:
    links = []
    for name in dict.fromkeys(row.get("evidence") or []):
        anchor, title = SECTIONS.get(name, (None, None))
        if anchor is not None:
            links.append(f'<a href="#{m.esc(anchor)}">{m.esc(title)}</a> ({m.esc(name)})')
    span = f"{m.timestamp(row.get('start_ts'))} – {m.timestamp(row.get('end_ts'))}"
    cause = f" · {m.esc(row['cause'])}" if row.get("cause") else ""
    evidence = f"<br><small>evidence: {', '.join(links)}</small>" if links else ""
    return (
        f'<li class="finding {m.esc(row["severity"])}"><b>{m.esc(row["severity"])}</b>'
        f" {m.esc(row['kind'])}{cause} <small>{m.esc(span)}</small><br>"
        f"{m.esc(row['explanation'])}{evidence}</li>"
    )
