"""What reading a capture saw, skipped and gave up on: the counters behind "lost nothing"."""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass, field, fields


@dataclass(slots=True)
class CaptureStats:
    """Counters for one run of the reader and reassembler over a capture.

    Everything that is not delivered as stream bytes is counted somewhere here, so a
    summary can say what was skipped (not TCP), repaired (fragments, reordering) or lost.
    """

    records: int = 0  # capture records read
    record_bytes: int = 0  # captured bytes of those records
    tcp_segments: int = 0
    non_tcp: int = 0  # records that carry something other than TCP (skipped)
    unsupported_link: int = 0  # records of a link type the parser does not know
    malformed: int = 0  # records too short or inconsistent to parse (a land packet too)
    bad_blocks: int = 0  # pcapng blocks too damaged to read, skipped one by one
    bad_timestamps: int = 0  # records timed beyond any calendar, given the previous time
    padding_bytes: int = 0  # zero bytes after the last record (a preallocated file)
    truncated: int = 0  # TCP segments cut short by the snaplen
    ip_fragments: int = 0
    fragments_reassembled: int = 0
    fragments_dropped: int = 0  # incomplete datagrams evicted from the bounded buffer
    connections: int = 0
    delivered_bytes: int = 0
    retransmitted_bytes: int = 0  # bytes seen again after delivery (delivered once)
    reordered_segments: int = 0  # segments held because they arrived early
    gaps: int = 0
    gap_bytes: int = 0
    hold_overflows: int = 0  # gaps declared early because a hold buffer was full
    after_close: int = 0  # segments of a connection already closed (late, or past a FIN)
    evicted: int = 0  # connections closed because too many were open at once

    # link type -> records of it the parser does not know (the counter above, by type)
    unsupported_links: Counter[int] = field(default_factory=Counter)

    def as_dict(self) -> dict[str, int]:
        """The counters, by name (the link types apart)."""
        return {f.name: getattr(self, f.name) for f in fields(self) if f.type == "int"}
