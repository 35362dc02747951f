# cython: annotation_typing=True
"""IPv4 and IPv6 datagrams put back together from their fragments, within bounds.

A datagram is keyed as its receiver keys it (addresses, identification, and for IPv4
the protocol) plus the tunnel ids around it: the same fragments of two tenants never
meet. What may wait is bounded: :data:`MAX_DATAGRAMS` datagrams and
:data:`MAX_BYTES` bytes for the whole capture, :data:`MAX_PER_PAIR` datagrams per pair of
addresses, :data:`MAX_PIECES` fragments per datagram, and :data:`TIMEOUT_US` of capture
time (Linux's ``ipfrag_time``) from its first fragment. A datagram that breaks a bound,
or is never completed, is dropped and counted (``fragments_dropped``: a capture anomaly).

Overlaps: a fragment seen again (the same offset and bytes: a duplicated packet) is
ignored; fragments that overlap otherwise make the whole datagram invalid and it is
dropped, as RFC 5722 has IPv6 receivers do and Linux does for IPv4 as well: the receiver
never took it, so neither does pwcap (``fragments_overlapping``). A fragment cut by the
snaplen dooms its datagram: the rest of it is awaited and dropped with it.
"""

from __future__ import annotations

import bisect
from typing import TYPE_CHECKING

import cython

if TYPE_CHECKING:
    from pwcap.capture.stats import CaptureStats

if not cython.compiled:
    from .cursor import Cursor

MAX_DATAGRAMS = 1024
MAX_BYTES = 8 << 20
MAX_PER_PAIR = 64
MAX_PIECES = 512
MAX_LENGTH = 65535 + 8  # the largest payload a fragment header can describe, and then some
TIMEOUT_US = 30_000_000

_Key = tuple


class _Datagram:
    """The fragments of one datagram so far: their (start, end) ranges, sorted, apart."""

    __slots__ = ("bytes", "doomed", "first_ts", "length", "pair", "pieces", "protocol", "starts")

    def __init__(self, ts: int, pair: tuple) -> None:
        self.first_ts = ts
        self.pair = pair
        self.starts: list[int] = []
        self.pieces: list[bytes] = []  # in the order of ``starts``
        self.bytes = 0
        self.length = -1  # known once the last fragment came
        self.protocol = -1  # what it carries (IPv6: from the first fragment's header)
        self.doomed = False  # a piece was cut: it can never be completed

    def add(self, start: int, piece: bytes, last: bool) -> bool:
        """Place a fragment; false when it overlaps another (the datagram is invalid)."""
        end = start + len(piece)
        if last:
            if (self.length >= 0 and self.length != end) or (
                self.starts and self.starts[-1] + len(self.pieces[-1]) > end
            ):
                return False
            self.length = end
        elif self.length >= 0 and end > self.length:
            return False
        index = bisect.bisect_right(self.starts, start)
        if index and self.starts[index - 1] + len(self.pieces[index - 1]) > start:
            return self.starts[index - 1] == start and self.pieces[index - 1] == piece
        if index < len(self.starts) and self.starts[index] < end:
            return False
        self.starts.insert(index, start)
        self.pieces.insert(index, piece)
        self.bytes += len(piece)
        return True

    def whole(self) -> bytes | None:
        if self.length < 0 or self.bytes != self.length:
            return None
        return b"".join(self.pieces)


@cython.cclass
class Fragments:
    """The datagrams waiting for fragments; :meth:`add` takes one fragment.

    Its fields' C types are in ``fragments.pxd``."""

    def __init__(self, stats: CaptureStats) -> None:
        self.stats = stats
        self._pending: dict[_Key, _Datagram] = {}  # oldest first
        self._pairs: dict[tuple, int] = {}  # datagrams pending per pair of addresses
        self._bytes = 0
        self.protocol = -1

    @cython.ccall
    def add(
        self,
        c: Cursor,
        version: cython.int,
        ident: cython.longlong,
        offset: cython.long,
        more: cython.long,
        protocol: cython.long,
    ) -> bytes:
        """The fragment at the cursor (its payload runs to the packet's end): the whole
        payload of its datagram when this fragment completes it (its protocol then in
        :attr:`protocol`), else None."""
        self.stats.ip_fragments += 1
        ts = c.ts
        self._expire(ts)
        pair = (tuple(c.tags), c.src, c.dst)
        key = (pair, ident, protocol if version == 4 else -1)
        datagram = self._pending.get(key)
        if datagram is None:
            while len(self._pending) >= MAX_DATAGRAMS or self._pairs.get(pair, 0) >= MAX_PER_PAIR:
                self._drop_oldest(pair if len(self._pending) < MAX_DATAGRAMS else None)
            datagram = self._pending[key] = _Datagram(ts, pair)
            self._pairs[pair] = self._pairs.get(pair, 0) + 1
            if version == 4:
                datagram.protocol = protocol
        if datagram.doomed:
            return None
        if c.end > c.size or c.at > c.end or offset + (c.end - c.at) > MAX_LENGTH:
            self._doom(datagram)  # cut by the snaplen, shorter than its headers, too long
            return None
        piece = c.copy(0, c.size - c.at)
        if offset == 0 and version == 6:
            datagram.protocol = protocol
        before = datagram.bytes
        if not datagram.add(offset, piece, not more) or len(datagram.starts) > MAX_PIECES:
            self.stats.fragments_overlapping += 1
            self._drop(key)
            return None
        self._bytes += datagram.bytes - before
        while self._bytes > MAX_BYTES:
            self._drop_oldest(None)
        if key not in self._pending:
            return None
        whole = datagram.whole()
        if whole is not None:
            self._remove(key)
            self.stats.fragments_reassembled += 1
            self.protocol = datagram.protocol
        return whole

    def finish(self) -> None:
        """The capture ended: what is still waiting was never completed."""
        while self._pending:
            self._drop(next(iter(self._pending)))

    def _expire(self, ts: int) -> None:
        while self._pending:
            oldest = next(iter(self._pending))
            if ts - self._pending[oldest].first_ts <= TIMEOUT_US:
                return
            self._drop(oldest)

    def _drop_oldest(self, pair: tuple | None) -> None:
        """The oldest datagram (of ``pair``, when given) gives up its place."""
        for key, datagram in self._pending.items():
            if pair is None or datagram.pair == pair:
                self._drop(key)
                return

    def _doom(self, datagram: _Datagram) -> None:
        self._bytes -= datagram.bytes
        datagram.doomed = True
        datagram.starts, datagram.pieces, datagram.bytes = [], [], 0

    def _drop(self, key: _Key) -> None:
        self.stats.fragments_dropped += 1
        self._remove(key)

    def _remove(self, key: _Key) -> None:
        datagram = self._pending.pop(key)
        self._bytes -= datagram.bytes
        left = self._pairs[datagram.pair] - 1
        if left:
            self._pairs[datagram.pair] = left
        else:
            del self._pairs[datagram.pair]
