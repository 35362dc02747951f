"""Anomaly rows for damage the capture reader stepped over, one row per kind and capture,
and the warnings that keep a capture that gave nothing from passing for a quiet one.

The reader keeps going past a damaged pcapng block, a timestamp no calendar holds,
records of a link layer pwcap does not parse, headers the snaplen cut, IP datagrams whose
fragments never all came; these rows make sure that is never silent (they name the
capture, not a connection: the damage came before any connection).
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
    if stats.truncated_headers:
        found.append(
            (
                "truncated_header",
                stats.truncated_headers,
                f"{stats.truncated_headers} records cut by the snaplen (or a mirror's"
                " truncation) before their TCP header were skipped",
            )
        )
    if stats.fragments_dropped:
        overlapping = (
            f", {stats.fragments_overlapping} of them for fragments that overlap (receivers"
            " drop those too)"
            if stats.fragments_overlapping
            else ""
        )
        found.append(
            (
                "incomplete_datagram",
                stats.fragments_dropped,
                f"{stats.fragments_dropped} fragmented IP datagrams were never completed"
                f" (fragments lost or cut, or held past the time and memory bounds){overlapping}",
            )
        )
    if stats.too_deep:
        found.append(
            (
                "too_deep",
                stats.too_deep,
                f"{stats.too_deep} records nested more headers or tunnel ids than pwcap"
                " reads were skipped",
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


def capture_warnings(stats: CaptureStats, capture: str) -> list[str]:
    """A warning line per link type whose records were skipped, and one for a capture
    whose records gave no TCP segment at all, with the reasons: such a capture decodes to
    nothing, which must not pass for a quiet capture."""
    lines = [
        f"{capture}: {count:,} records of link type {linktype} skipped"
        " (a link layer pwcap does not parse)"
        for linktype, count in sorted(stats.unsupported_links.items())
    ]
    if stats.records and not stats.tcp_segments and stats.unsupported_link < stats.records:
        reasons = skip_reasons(stats)
        lines.append(f"{capture}: no TCP segment in {stats.records:,} records: {reasons}")
    return lines


TOP_PORTS = 3
_REASONS = {
    "udp_not_tunnel": "UDP not a tunnel",
    "non_tcp": "not TCP",
    "unsupported_link": "of a link type pwcap does not parse",
    "truncated_headers": "headers cut by the snaplen",
    "malformed": "malformed",
    "too_deep": "nested too deep",
    "ip_fragments": "IP fragments",
    "duplicates": "captured twice",
}


def skip_reasons(stats: CaptureStats) -> str:
    """Why records gave no TCP segment, in a few words: "3 UDP not a tunnel (port
    4790: 3; --vxlan-port names another VXLAN port), 2 not TCP"."""
    parts = []
    for reason, count in stats.skipped.items():
        if not count:
            continue
        part = f"{count:,} {_REASONS[reason]}"
        if reason == "udp_not_tunnel" and stats.udp_ports:
            ports = sorted(stats.udp_ports.items(), key=lambda item: (-item[1], item[0]))
            named = ", ".join(f"{port}: {n:,}" for port, n in ports[:TOP_PORTS])
            part += f" (port {named}; --vxlan-port names another VXLAN port)"
        parts.append(part)
    return ", ".join(parts) or "none skipped"
