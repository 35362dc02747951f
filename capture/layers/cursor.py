# cython: annotation_typing=True
"""Where the walk through one record's headers stands, and its bounds-checked reads.

A record's bytes are a slice of the reader's chunk (``buf[base:]``), or, after IP
fragments were put back together, the whole datagram. Offsets are counted from
``base``. ``size`` is how many of the bytes from there are this packet's and were
captured: it shrinks as a header declares a shorter length (an Ethernet trailer is no
part of the IP packet it pads). ``end`` is where the current packet ends on the wire; a
packet cut by the snaplen, or by a mirror that truncates, has ``end > size``, and the TCP
layer turns the difference into bytes lost.

A layer asks :meth:`Cursor.room` before it reads a header and reads it with
:meth:`u8`, :meth:`u16`, :meth:`u32` at offsets inside what it asked for (compiled,
Cython checks each index against the buffer too).
"""

from __future__ import annotations

from array import array

import cython

from .codes import MAX_TAGS

_MAX_TAG_SLOTS = cython.declare(cython.Py_ssize_t, 2 * MAX_TAGS)


@cython.cclass
class Cursor:
    """One record's walk: its bytes, the header being read, the tunnel ids met so far
    (kind, id, kind, id... in ``tags[:count]``: a C array, no object per packet) and the
    addresses of the innermost IP header.

    Its fields' C types are in ``cursor.pxd``."""

    def __init__(self) -> None:
        self.buf = b""
        self.base = self.at = self.size = 0
        self.end = self.ts = 0
        self.tags = array("q", bytes(8 * 2 * MAX_TAGS))
        self.count = 0
        self.src = self.dst = b""
        self.ident = -1
        self.port = 0

    @cython.ccall
    @cython.exceptval(-1, check=False)
    def start(
        self,
        buf: bytes,
        base: cython.Py_ssize_t,
        size: cython.Py_ssize_t,
        end: cython.longlong,
        ts: cython.longlong,
    ) -> cython.int:
        """A new record: ``size`` captured bytes at ``buf[base]``, ``end`` on the wire."""
        self.buf = buf
        self.base = base
        self.at = 0
        self.size = size
        self.end = end
        self.ts = ts
        self.count = 0
        self.ident = -1
        return 0

    @cython.ccall
    @cython.exceptval(-1, check=False)
    def replace(self, whole: bytes) -> cython.int:
        """Read on in ``whole`` (a datagram put back together from its fragments)."""
        self.buf = whole
        self.base = self.at = 0
        self.size = len(whole)
        self.end = self.size
        return 0

    @cython.cfunc
    def room(self, count: cython.Py_ssize_t) -> cython.bint:
        """Whether ``count`` bytes from the current header on are there to read."""
        return self.at + count <= self.size

    @cython.cfunc
    def u8(self, offset: cython.Py_ssize_t) -> cython.long:
        return self.buf[self.base + self.at + offset]

    @cython.cfunc
    def u16(self, offset: cython.Py_ssize_t) -> cython.long:
        """The big-endian 16-bit field ``offset`` bytes into the current header."""
        at: cython.Py_ssize_t = self.base + self.at + offset
        return self.buf[at] << 8 | self.buf[at + 1]

    @cython.cfunc
    def u32(self, offset: cython.Py_ssize_t) -> cython.longlong:
        """The big-endian 32-bit field ``offset`` bytes into the current header."""
        at: cython.Py_ssize_t = self.base + self.at + offset
        buf: bytes = self.buf
        return (
            cython.cast(cython.longlong, buf[at]) << 24
            | buf[at + 1] << 16
            | buf[at + 2] << 8
            | buf[at + 3]
        )

    @cython.cfunc
    def copy(self, lo: cython.Py_ssize_t, hi: cython.Py_ssize_t) -> bytes:
        """The bytes ``lo:hi`` of the current header, which must be there to read.
        Compiled, copied straight from the buffer (a slice of bytes goes through Python's
        generic slicing and costs ten times as much)."""
        if lo < 0 or lo > hi or self.at + hi > self.size or self.base + self.size > len(self.buf):
            raise IndexError(f"bytes {lo}:{hi} of a header at {self.at} of {self.size}")
        at: cython.Py_ssize_t = self.base + self.at
        data: cython.p_const_char = self.buf
        return data[at + lo : at + hi]

    @cython.cfunc
    def carry(self, length: cython.longlong) -> cython.void:
        """What follows the current position is ``length`` bytes on the wire: bytes
        past them (a trailer) are not its, bytes missing before them were cut."""
        self.end = self.at + length
        if self.end < self.size:
            self.size = self.end

    @cython.cfunc
    @cython.exceptval(-1, check=False)
    def tag(self, kind: cython.int, ident: cython.longlong) -> cython.bint:
        """Add a tunnel id; false when the packet already has as many as an identity holds."""
        if self.count >= _MAX_TAG_SLOTS:
            return False
        self.tags[self.count] = kind
        self.tags[self.count + 1] = ident
        self.count += 2
        return True

    @cython.ccall
    def key(self) -> tuple:
        """The tags met so far: (kind, id, kind, id...)."""
        return tuple([self.tags[index] for index in range(self.count)])
