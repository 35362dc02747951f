"""Inline SVG charts, generated as text: no plotting library, no script, no remote loads.

Each function takes plain numbers and labels and returns one ``<svg>`` element; labels go
through ``esc`` because they come from the capture. Callers bound the number of bars and
points (top-N, downsampled timelines), so the page size does not grow with the capture.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from datetime import UTC, datetime

from .markup import esc
from .timeaxis import BrokenAxis

PALETTE = ("#2f6fbd", "#d9822b", "#3a9e5c", "#c23b4e", "#7d5ab5", "#2aa3a8", "#8c6d31", "#5b6475")
WIDTH = 960
LABEL_WIDTH = 300
ROW = 20

Point = tuple[float, float]


def _svg(height: float, body: Sequence[str], label: str) -> str:
    return (
        f'<svg xmlns="http://www.w3.org/2000/svg" viewBox="0 0 {WIDTH} {height:.0f}" '
        f'width="{WIDTH}" height="{height:.0f}" role="img" aria-label="{esc(label)}">'
        f"{''.join(body)}</svg>"
    )


def _clip(label: str, limit: int = 44) -> str:
    return label if len(label) <= limit else label[: limit - 1] + "…"


def _label(x: float, y: float, value: str, anchor: str = "start", full: str | None = None) -> str:
    tip = f"<title>{esc(full)}</title>" if full and full != value else ""
    return f'<text x="{x:.1f}" y="{y:.1f}" text-anchor="{anchor}">{tip}{esc(value)}</text>'


def bars(items: Sequence[tuple[str, float]], fmt: Callable[[float], str], title: str) -> str:
    """Horizontal bars, one per (label, value), longest scaled to the plot width."""
    if not items:
        return ""
    top = max(value for _, value in items) or 1
    plot = WIDTH - LABEL_WIDTH - 110
    body = []
    for i, (label, value) in enumerate(items):
        y = 6 + i * ROW
        length = max(1.0, plot * value / top) if value else 0.0
        body.append(_label(LABEL_WIDTH - 8, y + 13, _clip(label), "end", label))
        body.append(
            f'<rect x="{LABEL_WIDTH}" y="{y + 3}" width="{length:.1f}" height="{ROW - 6}" '
            f'fill="{PALETTE[0]}"><title>{esc(label)}: {esc(fmt(value))}</title></rect>'
        )
        body.append(_label(LABEL_WIDTH + length + 6, y + 13, fmt(value)))
    return _svg(12 + len(items) * ROW, body, title)


def _log_scale(low: float, high: float, start: float, end: float) -> Callable[[float], float]:
    lo, hi = math.log10(max(low, 1.0)), math.log10(max(high, low * 10, 10.0))
    return lambda v: start + (end - start) * (math.log10(max(v, 1.0)) - lo) / (hi - lo or 1)


def _decades(low: float, high: float) -> list[float]:
    first = math.floor(math.log10(max(low, 1.0)))
    last = math.ceil(math.log10(max(high, 10.0)))
    return [10.0**e for e in range(first, last + 1)]


def percentile_bars(
    rows: Sequence[tuple[str, dict[str, float | None]]],
    keys: Sequence[str],
    fmt: Callable[[float], str],
    title: str,
) -> str:
    """Per label, overlaid bars for increasing percentiles on a log axis (the widest is the
    largest percentile), so a long tail shows as a long light bar behind a short dark one."""
    values = [v for _, d in rows for k in keys if (v := d.get(k)) is not None and v > 0]
    if not values:
        return ""
    ticks = _decades(min(values), max(values))
    x = _log_scale(ticks[0], ticks[-1], LABEL_WIDTH, WIDTH - 20)
    height = 30 + len(rows) * ROW
    body = []
    for tick in ticks:
        body.append(
            f'<line class="grid" x1="{x(tick):.1f}" x2="{x(tick):.1f}" y1="4" y2="{height - 22}"/>'
        )
        body.append(_label(x(tick), height - 8, fmt(tick), "middle"))
    shades = ["#c9dbf2", "#8fb4e3", "#4f86c6", "#1f4f8c"][-len(keys) :]
    for i, (label, values_by_key) in enumerate(rows):
        y = 4 + i * ROW
        body.append(_label(LABEL_WIDTH - 8, y + 13, _clip(label), "end", label))
        tip = ", ".join(f"{k} {fmt(v)}" for k in keys if (v := values_by_key.get(k)) is not None)
        for key, shade in reversed(list(zip(keys, shades, strict=True))):
            value = values_by_key.get(key)
            if value is None:
                continue
            width = max(1.0, x(value) - LABEL_WIDTH)
            body.append(
                f'<rect x="{LABEL_WIDTH}" y="{y + 3}" width="{width:.1f}" height="{ROW - 6}" '
                f'fill="{shade}"><title>{esc(label)}: {esc(tip)}</title></rect>'
            )
    legend = "".join(
        f'<span><i style="background:{shade}"></i>{esc(key)}</span>'
        for key, shade in zip(keys, shades, strict=True)
    )
    return f'<div class="legend">{legend}</div>' + _svg(height, body, title)


def _when(t: float) -> str:
    return datetime.fromtimestamp(t / 1e6, UTC).strftime("%Y-%m-%d %H:%M:%S.%f")[:-3]


def _time_axis(t0: float, t1: float, left: float, right: float, y: float) -> list[str]:
    """Start, middle and end times under a time axis, in UTC."""
    out = [f'<line class="axis" x1="{left}" x2="{right}" y1="{y}" y2="{y}"/>']
    for fraction, anchor in ((0.0, "start"), (0.5, "middle"), (1.0, "end")):
        t = t0 + (t1 - t0) * fraction
        out.append(_label(left + (right - left) * fraction, y + 14, _when(t), anchor))
    return out


def _broken_time_axis(
    axis: BrokenAxis, x: Callable[[float], float], top: float, y: float
) -> list[str]:
    """The axis line, a dashed break where idle time was cut, and the time each recorded
    stretch starts (a label too close to the previous one is left out)."""
    out = [f'<line class="axis" x1="{x(0)}" x2="{x(axis.length)}" y1="{y}" y2="{y}"/>']
    last_label = -1e9
    for i, (start, _, place, _) in enumerate(axis.segments):
        at = x(place)
        if i:
            out.append(f'<line class="break" x1="{at:.1f}" x2="{at:.1f}" y1="{top}" y2="{y + 4}"/>')
        room = x(axis.length) - at
        if at - last_label > 170 and room > 170:
            out.append(_label(at + (3 if i else 0), y + 14, _when(start), "start"))
            last_label = at
    if x(axis.length) - last_label > 340:
        out.append(_label(x(axis.length), y + 14, _when(axis.time_at(axis.length)), "end"))
    return out


def _unit(text: str, top: float, bottom: float) -> str:
    """The y axis' unit, written upwards along it."""
    middle = (top + bottom) / 2
    return (
        f'<text transform="rotate(-90)" x="{-middle:.1f}" y="12" '
        f'text-anchor="middle">{esc(text)}</text>'
    )


def time_series(
    series: Sequence[tuple[str, Sequence[Point]]],
    axis: BrokenAxis,
    fmt: Callable[[float], str],
    unit: str,
    title: str,
) -> str:
    """Points (place on ``axis`` in µs, value) per series on a log y axis, because
    latencies span orders of magnitude. No lines join the points: a line would bridge
    the stretches with nothing to show."""
    points = [p for _, s in series for p in s]
    if not points:
        return ""
    left, right, top, bottom = 80.0, WIDTH - 20.0, 10.0, 230.0
    low, high = min(p[1] for p in points), max(p[1] for p in points)
    body: list[str] = [_unit(unit, top, bottom)]
    ticks = _decades(low, high)
    y = _log_scale(ticks[0], ticks[-1], bottom, top)
    for tick in ticks:
        body.append(
            f'<line class="grid" x1="{left}" x2="{right}" y1="{y(tick):.1f}" y2="{y(tick):.1f}"/>'
        )
        body.append(_label(left - 6, y(tick) + 4, fmt(tick), "end"))

    def x(position: float) -> float:
        return left + (right - left) * position / axis.length

    body += _broken_time_axis(axis, x, top, bottom)
    legend = []
    for i, (name, pts) in enumerate(series):
        color = PALETTE[i % len(PALETTE)]
        body += [
            f'<circle cx="{x(t):.1f}" cy="{y(v):.1f}" r="2.5" fill="{color}"/>' for t, v in pts
        ]
        legend.append(f'<span><i style="background:{color}"></i>{esc(name)}</span>')
    return f'<div class="legend">{"".join(legend)}</div>' + _svg(bottom + 24, body, title)


def _linear(low: float, high: float, start: float, end: float) -> Callable[[float], float]:
    span = (high - low) or 1.0
    return lambda v: start + (end - start) * (v - low) / span


def step_chart(
    points: Sequence[Point],
    spans: Sequence[tuple[float, float]],
    unit: str,
    title: str,
) -> str:
    """A balance over time as a step line (it holds until the next event), with the
    ``spans`` (start, end in µs) shaded behind it and the zero line drawn."""
    if not points:
        return ""
    left, right, top, bottom = 80.0, WIDTH - 20.0, 8.0, 120.0
    t0, t1 = points[0][0], points[-1][0]
    span = (t1 - t0) or 1.0
    low = min(0.0, *(p[1] for p in points))
    high = max(1.0, *(p[1] for p in points))
    y = _linear(low, high, bottom, top)

    def x(t: float) -> float:
        return left + (right - left) * (min(max(t, t0), t1) - t0) / span

    body = [_unit(unit, top, bottom)]
    for start, end in spans:
        body.append(
            f'<rect x="{x(start):.1f}" y="{top}" width="{max(1.0, x(end) - x(start)):.1f}" '
            f'height="{bottom - top}" fill="#f4c7cd" opacity="0.8"/>'
        )
    near = 0.08 * (high - low)  # a zero label this close to another would overlap it
    ticks = {low, high} | ({0.0} if min(abs(low), abs(high)) > near else set())
    for tick in sorted(ticks):
        body.append(
            f'<line class="grid" x1="{left}" x2="{right}" y1="{y(tick):.1f}" y2="{y(tick):.1f}"/>'
        )
        body.append(_label(left - 6, y(tick) + 4, f"{tick:,.0f}", "end"))
    path = []
    for i, (t, v) in enumerate(points):
        if i:
            path.append(f"{x(t):.1f},{y(points[i - 1][1]):.1f}")
        path.append(f"{x(t):.1f},{y(v):.1f}")
    path.append(f"{right:.1f},{y(points[-1][1]):.1f}")
    body.append(
        f'<polyline points="{" ".join(path)}" fill="none" stroke="{PALETTE[0]}" '
        f'stroke-width="1.4"/>'
    )
    body += _time_axis(t0, t1, left, right, bottom)
    return _svg(bottom + 22, body, title)
