"""HTML building blocks: escaping, number and time formatting, tables, sections.

Every string that came from a capture (topic names, error messages, client versions) is
attacker-controlled, so nothing reaches the page without going through ``esc``; the
builders here take plain values and escape them themselves, which keeps the sections
free of escaping decisions.
"""

from __future__ import annotations

import html
from collections.abc import Callable, Sequence
from datetime import datetime
from typing import Any

MAX_TEXT = 80  # characters of one cell before it is cut (the full text stays in a tooltip)

Formatter = Callable[[Any], str]


# C0 controls other than tab and newline are not allowed in HTML text; shown as U+FFFD.
_CONTROLS = {c: "\ufffd" for c in range(32) if chr(c) not in "\t\n"} | {127: "\ufffd"}


def esc(value: Any) -> str:
    """Text safe inside an element or a quoted attribute."""
    return html.escape("" if value is None else str(value), quote=True).translate(_CONTROLS)


def short(value: Any, limit: int = MAX_TEXT) -> str:
    """A name from the capture as a heading or a card shows it: cut to ``limit``
    characters with an ellipsis (unescaped: the builders escape). A name can be 10,000
    characters long, and a heading has no tooltip to hold the rest."""
    raw = "" if value is None else str(value)
    return raw if len(raw) <= limit else raw[: limit - 1] + "…"


def text(value: Any) -> str:
    """A value as cell text: long strings cut, full value in a tooltip, escaped."""
    if value is None:
        return '<span class="null">–</span>'
    if isinstance(value, datetime):
        return esc(timestamp(value))
    if isinstance(value, bool):
        return "yes" if value else "no"
    if isinstance(value, int):
        return f"{value:,}"
    if isinstance(value, float):
        return f"{value:,.3g}" if abs(value) < 1000 else f"{value:,.0f}"
    raw = str(value)
    if len(raw) <= MAX_TEXT:
        return esc(raw)
    return f'<span title="{esc(raw)}">{esc(raw[:MAX_TEXT])}…</span>'


def timestamp(value: datetime | None) -> str:
    """Capture times are UTC (the page header says so); microseconds matter, except on
    round times (window starts), where they would only widen the column."""
    if value is None:
        return ""
    return value.strftime("%Y-%m-%d %H:%M:%S" + (".%f" if value.microsecond else ""))


def micros(value: float | None) -> str:
    """A duration in microseconds as a person reads it: 850 µs, 12.3 ms, 4.56 s, 3 h 41 min."""
    if value is None:
        return "–"
    if abs(value) < 1000:
        return f"{value:,.0f} µs"
    if abs(value) < 1_000_000:
        return f"{value / 1000:,.3g} ms"
    if abs(value) < 60_000_000:
        return f"{value / 1_000_000:,.3g} s"
    minutes = round(value / 60_000_000)
    return f"{minutes // 60} h {minutes % 60:02d} min" if minutes >= 60 else f"{minutes} min"


def table(
    rows: Sequence[dict[str, Any]],
    columns: Sequence[tuple[str, str]],
    formats: dict[str, Formatter] | None = None,
) -> str:
    """An HTML table of ``rows``; ``columns`` are (key, heading) pairs."""
    if not rows:
        return '<p class="empty">No rows.</p>'
    formats = formats or {}
    head = "".join(f"<th>{esc(heading)}</th>" for _, heading in columns)
    body = []
    for row in rows:
        cells = []
        for key, _ in columns:
            value = row.get(key)
            if key in formats and value is not None:
                shown = formats[key](value)
            elif key.endswith("_id") and isinstance(value, int):
                shown = str(value)  # an id is a name: no thousands separators
            else:
                shown = text(value)
            numeric = isinstance(value, int | float) and not isinstance(value, bool)
            css = "num" if numeric else "time" if isinstance(value, datetime) else ""
            cells.append(f'<td class="{css}">{shown}</td>' if css else f"<td>{shown}</td>")
        body.append(f"<tr>{''.join(cells)}</tr>")
    return (
        f'<div class="scroll"><table><thead><tr>{head}</tr></thead>'
        f"<tbody>{''.join(body)}</tbody></table></div>"
    )


def note(message: str) -> str:
    """A remark in plain text; it is escaped here, so callers pass raw text."""
    return f'<p class="note">{esc(message)}</p>'


def section(anchor: str, title: str, parts: Sequence[str]) -> str:
    return f'<section id="{esc(anchor)}"><h2>{esc(title)}</h2>{"".join(parts)}</section>'


def subsection(title: str, parts: Sequence[str]) -> str:
    return f"<h3>{esc(title)}</h3>{''.join(parts)}"


STYLE = """
:root { --fg:#1d2330; --muted:#5b6475; --line:#d9dde5; --bg:#f6f7f9; --accent:#2f6fbd; }
* { box-sizing: border-box; }
body { margin:0; font:14px/1.45 system-ui,-apple-system,"Segoe UI",Roboto,sans-serif;
  color:var(--fg); background:var(--bg); }
header { background:#1d2330; color:#fff; padding:14px 24px; }
header h1 { margin:0; font-size:20px; }
header p { margin:4px 0 0; color:#c5cbd6; font-size:13px; overflow-wrap:anywhere; }
nav { padding:8px 24px; background:#fff; border-bottom:1px solid var(--line);
  position:sticky; top:0; z-index:1; }
nav a { margin-right:16px; color:var(--accent); text-decoration:none; }
main { max-width:1360px; margin:0 auto; padding:8px 24px 40px; }
section { background:#fff; border:1px solid var(--line); border-radius:6px;
  padding:4px 18px 14px; margin:16px 0; }
h2 { font-size:17px; margin:12px 0 8px; }
h3 { font-size:14px; margin:16px 0 6px; color:var(--muted); }
.scroll { overflow-x:auto; max-height:480px; overflow-y:auto; }
table { border-collapse:collapse; font-size:12.5px; width:100%; }
th, td { border-bottom:1px solid var(--line); padding:3px 8px; text-align:left;
  vertical-align:top; }
td { overflow-wrap:anywhere; }
th { position:sticky; top:0; background:#eef1f5; font-weight:600; }
td.num { text-align:right; font-variant-numeric:tabular-nums; white-space:nowrap; }
.null { color:#aab; }
.note, .empty { color:var(--muted); margin:6px 0; }
.missing { color:#8a5a00; background:#fff7e0; border:1px solid #f0dca0; border-radius:4px;
  padding:6px 10px; margin:8px 0; }
.answers { display:grid; grid-template-columns:repeat(3, 1fr); gap:10px; margin:8px 0; }
.answer { border:1px solid var(--line); border-radius:6px; padding:8px 12px; color:var(--fg);
  text-decoration:none; }
.answer:hover { border-color:var(--accent); }
.answer span { color:var(--muted); font-size:12px; }
.answer b { display:block; font-size:20px; margin:2px 0; }
.answer ul { margin:0; padding-left:16px; font-size:12px; color:var(--muted); }
.answer li { overflow-wrap:anywhere; }
svg { display:block; max-width:100%; height:auto; margin:6px 0; }
svg text { font:11px system-ui,sans-serif; fill:#1d2330; }
svg .axis { stroke:#9aa3b2; stroke-width:1; }
svg .grid { stroke:#e6e9ef; stroke-width:1; }
svg .break { stroke:#9aa3b2; stroke-width:1; stroke-dasharray:3 3; }
ol.findings { margin:6px 0; padding-left:22px; }
ol.findings li { margin:6px 0; overflow-wrap:anywhere; }
li.finding.high b { color:#b3261e; }
li.finding.medium b { color:#8a5a00; }
li.finding.low b { color:var(--muted); }
.legend span { display:inline-block; margin-right:14px; font-size:12px; }
.legend i { display:inline-block; width:10px; height:10px; margin-right:4px; }
"""


def page(title: str, subtitle: str, nav: Sequence[tuple[str, str]], body: Sequence[str]) -> str:
    links = "".join(f'<a href="#{esc(anchor)}">{esc(label)}</a>' for anchor, label in nav)
    return (
        "<!DOCTYPE html>\n"
        '<html lang="en"><head><meta charset="utf-8">'
        '<meta name="viewport" content="width=device-width, initial-scale=1">'
        # No script, no remote loads: the page is inert even if escaping were ever bypassed.
        '<meta http-equiv="Content-Security-Policy" content="default-src \'none\'; '
        "style-src 'unsafe-inline'; img-src data:\">"
        f"<title>{esc(title)}</title><style>{STYLE}</style></head>"
        f"<body><header><h1>{esc(title)}</h1><p>{esc(subtitle)}</p></header>"
        f"<nav>{links}</nav><main>{''.join(body)}</main></body></html>\n"
    )
