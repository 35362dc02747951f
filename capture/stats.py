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
    # Records skipped, by reason (each record that gives no segment is counted once)
    non_tcp: int = 0  # records that carry something other than TCP (ARP, ICMP...)
    udp_not_tunnel: int = 0  # UDP to a port no tunnel uses (counted by port below)
    unsupported_link: int = 0  # records of a link type the parser does not know
    malformed: int = 0  # records too short or inconsistent to parse (a land packet too)
    truncated_headers: int = 0  # a header before the TCP payload cut by the snaplen
    too_deep: int = 0  # more nested headers or tunnel ids than a packet may have
    duplicates: int = 0  # segments captured twice (a mirror of both directions), taken once
    bad_blocks: int = 0  # pcapng blocks too damaged to read, skipped one by one
    bad_timestamps: int = 0  # records timed beyond any calendar, given the previous time
    padding_bytes: int = 0  # zero bytes after the last record (a preallocated file)
    truncated: int = 0  # TCP segments cut short by the snaplen
    ip_fragments: int = 0  # records that were IP fragments (of any datagram)
    fragments_reassembled: int = 0  # datagrams put back together
    fragments_dropped: int = 0  # datagrams never completed (lost, cut, over the bounds)
    fragments_overlapping: int = 0  # of those, dropped for overlapping fragments
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
    # UDP port (the lower of the two) -> datagrams skipped as no tunnel's
    udp_ports: Counter[int] = field(default_factory=Counter)
    # encapsulation label -> TCP segments carried in it (bare segments are not counted)
    encapsulations: Counter[str] = field(default_factory=Counter)

    def as_dict(self) -> dict[str, int]:
        """The counters, by name (the counters by link type, port and encapsulation apart)."""
        return {f.name: getattr(self, f.name) for f in fields(self) if f.type == "int"}

    def add(self, other: CaptureStats) -> None:
        """Add ``other``'s counts to these (the shares of one capture, or many captures)."""
        for name, value in other.as_dict().items():
            setattr(self, name, getattr(self, name) + value)
        for name in _COUNTERS:
            getattr(self, name).update(getattr(other, name))

    def to_json(self) -> dict:
        """Every count, in a form JSON keeps (keys of its counters as strings)."""
        found: dict = self.as_dict()
        for name in _COUNTERS:
            found[name] = [[key, value] for key, value in getattr(self, name).items()]
        return found

    @classmethod
    def from_json(cls, found: dict) -> CaptureStats:
        """What :meth:`to_json` wrote."""
        stats = cls(**{k: v for k, v in found.items() if k not in _COUNTERS})
        for name in _COUNTERS:
            getattr(stats, name).update({key: value for key, value in found.get(name, [])})
        return stats

    @property
    def skipped(self) -> dict[str, int]:
        """Records that gave no TCP segment, by reason (IP fragments: the records held
        until their datagram was whole; duplicates: segments taken once)."""
        return {
            "udp_not_tunnel": self.udp_not_tunnel,
            "non_tcp": self.non_tcp,
            "unsupported_link": self.unsupported_link,
            "truncated_headers": self.truncated_headers,
            "malformed": self.malformed,
            "too_deep": self.too_deep,
            "ip_fragments": self.ip_fragments,
            "duplicates": self.duplicates,
        }


_COUNTERS = ("unsupported_links", "udp_ports", "encapsulations")
