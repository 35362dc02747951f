# cython: annotation_typing=True
"""The same TCP segment captured twice: counted once.

A SPAN port that mirrors a link's ingress and egress, or a mirror's copy beside the
host's own capture, gives each packet twice, microseconds apart, perhaps with another
encapsulation (or none), another TTL, or a checksum the sending host's capture never saw
filled in (offload). A segment is a copy when everything its sender put in it that a
hop does not change (addresses, IPv4 identification, the TCP header but its checksum,
the payload's length and its first bytes) is the same as a segment seen within
:data:`WINDOW_US`: a 64-bit
fingerprint of those fields, looked up in a table of :data:`SLOTS` (fixed memory, no
allocation per packet). A retransmission differs from its original (its IPv4
identification, TCP timestamps); one that does not is dropped here instead of by
reassembly, which would drop its bytes anyway.

A copy in another encapsulation than the first (a mirror beside a host capture) makes
its flow an alias of the first's: its later segments join the first copy's connection,
so the two captures of one conversation are one connection, never two halves.
"""

from __future__ import annotations

from array import array
from typing import TYPE_CHECKING

import cython

if TYPE_CHECKING:
    from .stats import CaptureStats

WINDOW_US = 100_000  # copies of one packet come microseconds apart; retransmissions later
PAYLOAD_BYTES = 16  # of the payload, hashed: two tenants' headers alike still differ here
SLOTS = 1 << 14
MAX_ALIASES = 1 << 12
MAX_TUNNELS = 1 << 12
_PAYLOAD_BYTES = cython.declare(cython.Py_ssize_t, PAYLOAD_BYTES)
_SLOT_MASK = cython.declare(cython.ulonglong, SLOTS - 1)
_WINDOW_US = cython.declare(cython.longlong, WINDOW_US)
_FNV_OFFSET = cython.declare(cython.ulonglong, 0xCBF29CE484222325)
_FNV_PRIME = cython.declare(cython.ulonglong, 0x100000001B3)
# 64 bits: interpreted, the products' high bits must go; compiled, C's wrap-around does it
# (a C constant: the literal alone would make Cython compute the hash with Python ints)
_BITS64 = cython.declare(cython.ulonglong, 0xFFFFFFFFFFFFFFFF)
_BITS32 = cython.declare(cython.ulonglong, 0xFFFFFFFF)


@cython.cfunc
def _mix(
    hash: cython.ulonglong, data: bytes, lo: cython.Py_ssize_t, hi: cython.Py_ssize_t
) -> cython.ulonglong:
    """FNV-1a over ``data[lo:hi]`` (cut to the bytes there are), a 32-bit word at a time
    then byte by byte: a TCP header is whole words. Compiled, a loop over the bytes'
    buffer, its bounds checked once."""
    lo = max(lo, 0)
    hi = min(hi, len(data))
    raw: cython.p_const_char = data
    index: cython.Py_ssize_t
    word: cython.ulonglong
    byte: cython.uchar
    while lo + 4 <= hi:
        word = 0
        for index in range(lo, lo + 4):
            byte = raw[index]
            word = word << 8 | byte
        hash = ((hash ^ word) * _FNV_PRIME) & _BITS64
        lo += 4
    while lo < hi:
        byte = raw[lo]
        hash = ((hash ^ byte) * _FNV_PRIME) & _BITS64
        lo += 1
    return hash


@cython.ccall
def fingerprint(
    buf: bytes,
    header: cython.Py_ssize_t,
    payload: cython.Py_ssize_t,
    captured: cython.Py_ssize_t,
    src: bytes,
    dst: bytes,
    ident: cython.long,
    length: cython.longlong,
) -> cython.ulonglong:
    """The fingerprint of a segment whose TCP header is ``buf[header:payload]`` and whose
    payload was captured up to ``captured``, sent from ``src`` to ``dst`` with IPv4
    identification ``ident`` (-1 for IPv6), ``length`` payload bytes on the wire. Never 0
    (an empty slot)."""
    hash: cython.ulonglong = _mix(_FNV_OFFSET, src, 0, len(src))
    hash = _mix(hash, dst, 0, len(dst))
    hash = ((hash ^ (cython.cast(cython.ulonglong, ident) & _BITS32)) * _FNV_PRIME) & _BITS64
    hash = ((hash ^ (cython.cast(cython.ulonglong, length) & _BITS32)) * _FNV_PRIME) & _BITS64
    hash = _mix(hash, buf, header, min(header + 16, payload))  # up to the checksum
    hash = _mix(hash, buf, header + 18, payload)  # urgent pointer, options
    hash = _mix(hash, buf, payload, min(payload + _PAYLOAD_BYTES, captured))
    return hash | 1


@cython.cclass
class Duplicates:
    """Fingerprints of the segments seen lately, and the flows that are aliases.

    Its fields' C types are in ``duplicates.pxd``."""

    def __init__(self, stats: CaptureStats) -> None:
        self.stats = stats
        self._prints = array("Q", bytes(8 * SLOTS))
        self._times = array("q", bytes(8 * SLOTS))
        self._tunnels = array("l", bytes(array("l").itemsize * SLOTS))  # index in _names
        self._names: list[str] = [""]
        self._numbers: dict[str, int] = {"": 0}
        self.aliases: dict[tuple, str] = {}

    @cython.ccall
    @cython.exceptval(-1, check=False)
    def first_copy(
        self,
        fingerprint: cython.ulonglong,
        ts: cython.longlong,
        tunnel: str,
        src: bytes,
        sport: cython.long,
        dst: bytes,
        dport: cython.long,
    ) -> cython.bint:
        """Whether this segment is no copy of one seen within the window (it is then
        remembered). A copy in another encapsulation makes its flow an alias."""
        slot: cython.Py_ssize_t = fingerprint & _SLOT_MASK
        number: cython.long = self._number(tunnel)
        if self._prints[slot] == fingerprint and abs(ts - self._times[slot]) <= _WINDOW_US:
            self.stats.duplicates += 1
            first: cython.long = self._tunnels[slot]
            if first != number and len(self.aliases) < MAX_ALIASES:
                self.aliases[_flow(tunnel, src, sport, dst, dport)] = self._names[first]
            return False
        self._prints[slot] = fingerprint
        self._times[slot] = ts
        self._tunnels[slot] = number
        return True

    @cython.ccall
    def alias(
        self, tunnel: str, src: bytes, sport: cython.long, dst: bytes, dport: cython.long
    ) -> str:
        """The encapsulation this flow's segments join: the first copy's (or its own)."""
        return self.aliases.get(_flow(tunnel, src, sport, dst, dport), tunnel)

    @cython.cfunc
    def _number(self, tunnel: str) -> cython.long:
        if not tunnel:
            return 0
        number = self._numbers.get(tunnel)
        if number is None:
            if len(self._names) >= MAX_TUNNELS:
                return 0
            number = self._numbers[tunnel] = len(self._names)
            self._names.append(tunnel)
        return number


def _flow(tunnel: str, src: bytes, sport: int, dst: bytes, dport: int) -> tuple:
    """A flow's key, the same in both directions."""
    one, other = (src, sport), (dst, dport)
    return (tunnel, one, other) if one <= other else (tunnel, other, one)
