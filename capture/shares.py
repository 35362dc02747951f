"""Which worker keeps a TCP connection when several read the same capture.

Every worker of ``pwcap decode --jobs N`` (or every Spark task of one large capture) reads
all records and keeps the connections of its share: the share is a hash of the TCP
4-tuple and the tunnel ids around it (two tenants' flows are two connections) that is
the same in both directions, so both halves of a conversation land in the same worker,
and the same in every process (CRC-32, not Python's salted ``hash``), so N workers
together keep every connection exactly once.
"""

from __future__ import annotations

import zlib
from dataclasses import dataclass, field

MAX_REMEMBERED = 1 << 16  # 4-tuples whose decision is cached before the cache restarts


def flow_hash(src: bytes, sport: int, dst: bytes, dport: int, tunnel: str = "") -> int:
    """A 32-bit hash of a TCP 4-tuple in its encapsulation (its tunnel ids' label), the
    same whichever endpoint sent the segment."""
    one = src + sport.to_bytes(2, "big")
    other = dst + dport.to_bytes(2, "big")
    low, high = (one, other) if one <= other else (other, one)
    flow = low + b"|" + high
    return zlib.crc32(flow + b"|" + tunnel.encode() if tunnel else flow)


@dataclass(slots=True)
class FlowShare:
    """Share ``index`` of ``count``: the connections whose flow hash is ``index`` modulo
    ``count``. Share 0 also counts what belongs to no connection (records that are not
    TCP, damaged blocks), so those are counted once across the workers."""

    index: int
    count: int
    _kept: dict[tuple[bytes, int, bytes, int, str], bool] = field(default_factory=dict, repr=False)

    def __post_init__(self) -> None:
        if not 0 <= self.index < self.count:
            raise ValueError(f"share {self.index} of {self.count} does not exist")

    @property
    def counts_records(self) -> bool:
        """Whether this share counts per-record statistics (exactly one share does)."""
        return self.index == 0

    def keeps(self, src: bytes, sport: int, dst: bytes, dport: int, tunnel: str = "") -> bool:
        """Whether a segment of this flow belongs to this share (cached per flow: a
        connection's segments ask again and again)."""
        key = (src, sport, dst, dport, tunnel)
        kept = self._kept.get(key)
        if kept is None:
            if len(self._kept) >= MAX_REMEMBERED:
                self._kept.clear()  # bounded memory over a capture of many connections
            hashed = flow_hash(src, sport, dst, dport, tunnel)
            kept = self._kept[key] = hashed % self.count == self.index
        return kept
