"""``pwcap report``: one self-contained HTML page over a decoded dataset and its analytics.

The page carries its CSS and SVG charts inline and loads nothing, so it can be mailed or
attached to a ticket; its size is bounded (top-N tables, binned and downsampled charts)
whatever the capture size, and every string from the capture is escaped.
"""

from __future__ import annotations

from datetime import UTC, datetime
from importlib.metadata import version
from pathlib import Path

from . import analytics, decoded
from .answers import answers, capture_spans
from .findings import findings
from .markup import page
from .tables import ANALYTICS_TABLES, DECODED_TABLES, Source

NAV = [
    ("findings", "Findings"),
    ("answers", "Answers"),
    ("connections", "Connections"),
    ("frames", "Frames"),
    ("anomalies", "Anomalies"),
    ("latency", "Latency"),
    ("permits", "Permits"),
    ("redelivery", "Redelivery"),
]


def render(dataset: Path, analytics_dir: Path | None = None) -> str:
    """The report's HTML for the decoded ``dataset`` and, when given, its analytics."""
    data = Source(dataset, DECODED_TABLES)
    results = Source(analytics_dir, ANALYTICS_TABLES)
    spans = capture_spans(data)
    kinds = analytics.latency_kinds(results, spans)  # shared by the answers and its section
    body = [
        findings(results),
        answers(data, results, kinds, spans),
        decoded.connections(data),
        decoded.frames(data),
        decoded.anomalies(data),
        analytics.latency(results, kinds),
        analytics.permits(results),
        analytics.redelivery(results),
    ]
    subtitle = f"dataset {dataset}" + (f" · analytics {analytics_dir}" if analytics_dir else "")
    generated = datetime.now(UTC).strftime("%Y-%m-%d %H:%M UTC")
    subtitle += f" · capture times in UTC · pwcap {version('pwcap')}, generated {generated}"
    return page("pwcap report", subtitle, NAV, body)
