"""``pwcap report``: one self-contained HTML page over a decoded dataset and its analytics.

The page carries its CSS and SVG charts inline and loads nothing, so it can be mailed or
attached to a ticket; its size is bounded (top-N tables, binned and downsampled charts)
whatever the capture size, and every string from the capture is escaped.
"""

from __future__ import annotations

from pathlib import Path

from pwcap.report import analytics, decoded
from pwcap.report.markup import page
from pwcap.report.tables import ANALYTICS_TABLES, DECODED_TABLES, Source

NAV = [
    ("overview", "Overview"),
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
    body = [
        decoded.overview(data, results),
        decoded.connections(data),
        decoded.frames(data),
        decoded.anomalies(data),
        analytics.latency(results),
        analytics.permits(results),
        analytics.redelivery(results),
    ]
    subtitle = f"dataset {dataset}" + (f" · analytics {analytics_dir}" if analytics_dir else "")
    subtitle += " · capture times in UTC"
    return page("pwcap report", subtitle, NAV, body)
