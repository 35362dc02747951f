"""Anomaly rows for damage the capture reader stepped over, one row per kind and capture.

The reader keeps going past a damaged pcapng block, a timestamp no calendar holds or
records of a link layer pwcap does not parse; these rows make sure that is never silent
(they name the capture, not a connection: the damage came before any connection).
"""

from __future__ import annotations

from ..capture import CaptureStats
from ..tables.schema import Row


def capture_anomalies(stats: CaptureStats, capture: str, ts: int | None) -> list[Row]:
    """The rows for what ``stats`` counted while reading ``capture`` (``ts``: its end)."""
    found = []
    if stats.bad_timestamps:
        found.append(
            (
                "bad_timestamp",
                stats.bad_timestamps,
                f"{stats.bad_timestamps} records timed outside the years 1970-9999 were given"
                " the time of the record before them",
            )
        )
    if stats.bad_blocks:
        found.append(
            (
                "bad_block",
                stats.bad_blocks,
                f"{stats.bad_blocks} pcapng blocks too damaged to read were skipped (too short"
                " for their fields, a packet longer than its block, an undeclared interface)",
            )
        )
    for linktype, count in sorted(stats.unsupported_links.items()):
        found.append(
            (
                "unsupported_link_type",
                count,
                f"{count} records of link type {linktype}, which pwcap does not parse, skipped",
            )
        )
    return [
        {"ts": ts, "capture": capture, "kind": kind, "size": count, "detail": detail}
        for kind, count, detail in found
    ]


def link_warnings(stats: CaptureStats, capture: str) -> list[str]:
    """A warning line per link type whose records were skipped: a capture of a link layer
    pwcap does not parse decodes to nothing, which must not pass for a quiet capture."""
    return [
        f"{capture}: {count:,} records of link type {linktype} skipped"
        " (a link layer pwcap does not parse)"
        for linktype, count in sorted(stats.unsupported_links.items())
    ]
