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
    from ..stats import CaptureStats

if not cython.compiled:
    from .cursor import Cursor

MAX_DATAGRAMS = 1024
MAX_BYTES = 8 << 20
MAX_PER_PAIR = 64
MAX_PIECES = 512
MAX_LENGTH = 65535 + 8  # the largest payload a fragment header can describe, and then some
TIMEOUT_US = 30_000_000
# C constants when compiled: a module global is a dict lookup at every fragment.
_MAX_DATAGRAMS = cython.declare(cython.Py_ssize_t, MAX_DATAGRAMS)
_MAX_BYTES = cython.declare(cython.Py_ssize_t, MAX_BYTES)
_MAX_PER_PAIR = cython.declare(cython.Py_ssize_t, MAX_PER_PAIR)
_MAX_PIECES = cython.declare(cython.Py_ssize_t, MAX_PIECES)
_MAX_LENGTH = cython.declare(cython.Py_ssize_t, MAX_LENGTH)
_TIMEOUT_US = cython.declare(cython.longlong, TIMEOUT_US)


@cython.cclass
class _Pair:
    """A pair of addresses (in their tunnel) and its datagrams waiting, oldest first (so
    the one to give up its place is found at once, whatever else waits)."""

    def __init__(self, key: tuple) -> None:
        self.key = key
        self.waiting: dict[_Datagram, None] = {}  # a datagram hashes by identity: cheap


@cython.cclass
class _Datagram:
    """The fragments of one datagram so far: their (start, end) ranges, sorted, apart.

    Compiled, a C struct whose methods are C calls (``fragments.pxd``)."""

    def __init__(self, key: tuple, pair: _Pair, ts: cython.longlong) -> None:
        self.key = key
        self.pair = pair
        self.first_ts = ts
        self.starts: list[int] = []
        self.pieces: list[bytes] = []  # in the order of ``starts``
        self.size = 0
        self.length = -1  # known once the last fragment came
        self.protocol = -1  # what it carries (IPv6: from the first fragment's header)
        self.doomed = False  # a piece was cut: it can never be completed
        self.gone = False  # no longer waiting (completed or dropped)

    @cython.cfunc
    @cython.exceptval(-1, check=False)
    def add(self, start: cython.Py_ssize_t, piece: bytes, last: cython.bint) -> cython.bint:
        """Place a fragment; false when it overlaps another (the datagram is invalid)."""
        end: cython.Py_ssize_t = start + len(piece)
        starts: list = self.starts
        count: cython.Py_ssize_t = len(starts)
        if last:
            if (self.length >= 0 and self.length != end) or (count and self._end(count - 1) > end):
                return False
            self.length = end
        elif self.length >= 0 and end > self.length:
            return False
        index: cython.Py_ssize_t = count
        if count and starts[count - 1] > start:  # out of order: find its place
            index = bisect.bisect_right(starts, start)
        if index and self._end(index - 1) > start:
            return starts[index - 1] == start and self.pieces[index - 1] == piece
        if index < count and starts[index] < end:
            return False
        if index == count:
            starts.append(start)
            self.pieces.append(piece)
        else:
            starts.insert(index, start)
            self.pieces.insert(index, piece)
        self.size += len(piece)
        return True

    @cython.cfunc
    @cython.exceptval(-1, check=True)
    def _end(self, index: cython.Py_ssize_t) -> cython.Py_ssize_t:
        start: cython.Py_ssize_t = self.starts[index]
        return start + len(self.pieces[index])

    @cython.cfunc
    def whole(self) -> bytes:
        if self.length < 0 or self.size != self.length:
            return None
        return b"".join(self.pieces)


@cython.cclass
class Fragments:
    """The datagrams waiting for fragments; :meth:`add` takes one fragment.

    Its fields' C types are in ``fragments.pxd``: the counts of every fragment are C
    integers, added to the stats by :meth:`count`."""

    def __init__(self, stats: CaptureStats) -> None:
        self.stats = stats
        self._pending: dict[tuple, _Datagram] = {}  # oldest first
        self._pairs: dict[tuple, _Pair] = {}  # the pairs with datagrams waiting
        self._bytes = 0
        self._oldest_ts = 0  # no later than the first fragment of the oldest waiting
        self._fragments = self._reassembled = 0
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
        self._fragments += 1
        ts: cython.longlong = c.ts
        if ts - self._oldest_ts > _TIMEOUT_US:
            self._expire(ts)
        tags = c.key()
        key = (ident, protocol if version == 4 else -1, c.src, c.dst, tags)
        datagram: _Datagram = self._pending.get(key)
        if datagram is None:
            datagram = self._open(key, (c.src, c.dst, tags), ts)
            if version == 4:
                datagram.protocol = protocol
        if datagram.doomed:
            return None
        if c.end > c.size or c.at > c.end or offset + (c.end - c.at) > _MAX_LENGTH:
            self._doom(datagram)  # cut by the snaplen, shorter than its headers, too long
            return None
        piece = c.copy(0, c.size - c.at)
        if offset == 0 and version == 6:
            datagram.protocol = protocol
        before: cython.Py_ssize_t = datagram.size
        placed: cython.bint = datagram.add(offset, piece, not more)
        self._bytes += datagram.size - before
        if not placed or len(datagram.starts) > _MAX_PIECES:
            if not placed:
                self.stats.fragments_overlapping += 1
            self._drop(datagram)
            return None
        while self._bytes > _MAX_BYTES:
            self._drop(self._pending[next(iter(self._pending))])
        if datagram.gone:
            return None
        whole = datagram.whole()
        if whole is not None:
            self._remove(datagram)
            self._reassembled += 1
            self.protocol = datagram.protocol
        return whole

    @cython.ccall
    @cython.returns(cython.void)
    def count(self) -> None:
        """Add the fragments and datagrams counted since the last call to the stats."""
        self.stats.ip_fragments += self._fragments
        self.stats.fragments_reassembled += self._reassembled
        self._fragments = self._reassembled = 0

    def finish(self) -> None:
        """The capture ended: what is still waiting was never completed."""
        while self._pending:
            self._drop(self._pending[next(iter(self._pending))])
        self.count()

    @cython.cfunc
    def _open(self, key: tuple, pair_key: tuple, ts: cython.longlong) -> _Datagram:
        """A new datagram waits, once the bounds leave room for it."""
        while len(self._pending) >= _MAX_DATAGRAMS:
            self._drop(self._pending[next(iter(self._pending))])
        pair: _Pair = self._pairs.get(pair_key)
        if pair is None:
            pair = self._pairs[pair_key] = _Pair(pair_key)
        elif len(pair.waiting) >= _MAX_PER_PAIR:  # its oldest datagram gives up its place
            self._drop(next(iter(pair.waiting)))
            pair = self._pairs.setdefault(pair_key, pair)  # gone with its last datagram
        created = _Datagram(key, pair, ts)
        pair.waiting[created] = None
        if not self._pending:
            self._oldest_ts = ts
        self._pending[key] = created
        return created

    @cython.cfunc
    @cython.exceptval(check=True)
    def _expire(self, ts: cython.longlong) -> cython.void:
        """Drop the datagrams waiting longer than the time-out."""
        datagram: _Datagram
        while self._pending:
            datagram = self._pending[next(iter(self._pending))]
            if ts - datagram.first_ts <= _TIMEOUT_US:
                self._oldest_ts = datagram.first_ts
                return
            self._drop(datagram)

    @cython.cfunc
    @cython.exceptval(check=True)
    def _doom(self, datagram: _Datagram) -> cython.void:
        self._bytes -= datagram.size
        datagram.doomed = True
        datagram.starts, datagram.pieces, datagram.size = [], [], 0

    @cython.cfunc
    @cython.exceptval(check=True)
    def _drop(self, datagram: _Datagram) -> cython.void:
        self.stats.fragments_dropped += 1
        self._remove(datagram)

    @cython.cfunc
    @cython.exceptval(check=True)
    def _remove(self, datagram: _Datagram) -> cython.void:
        del self._pending[datagram.key]
        datagram.gone = True
        self._bytes -= datagram.size
        pair: _Pair = datagram.pair
        del pair.waiting[datagram]
        if not pair.waiting:
            del self._pairs[pair.key]
