# cython: annotation_typing=True
"""Link layer, IPv4/IPv6 and TCP headers of one captured record, read in place.

One call per record and no per-layer objects: :meth:`PacketParser.parse` reads the
headers straight out of the record's bytes (a slice of the reader's chunk, given by its
bounds, so no object is made per record) and keeps the handful of TCP fields reassembly
needs in its own fields. Every read is checked against the record's captured length
first: a record too short for a header it announces is counted as malformed, never read
past. IPv4 fragments of TCP are put back together (bounded); other fragments are counted
and skipped.

Compiled by Cython, the parser is a C struct and its reads are C byte loads; interpreted,
the same code runs on Python integers and finds the same segments.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import cython

if TYPE_CHECKING:
    from .stats import CaptureStats

ETHERNET, NULL, RAW, RAW_ALT, LOOP, LINUX_SLL, RAW_IPV4, RAW_IPV6, LINUX_SLL2 = (
    1, 0, 101, 12, 108, 113, 228, 229, 276
)  # fmt: skip
RAW_OPENBSD = 14
_RAW_LINKS = frozenset({RAW, RAW_ALT, RAW_OPENBSD, RAW_IPV4, RAW_IPV6})
_VLAN_TYPES = frozenset({0x8100, 0x88A8, 0x9100, 0x9200})
_IPV6_EXTENSIONS = frozenset({0, 43, 60, 135, 139, 140})  # skipped by their length byte
# C constants when compiled: a module global is a dict lookup at every packet.
_ETHERNET = cython.declare(cython.long, ETHERNET)
_LINUX_SLL = cython.declare(cython.long, LINUX_SLL)
_LINUX_SLL2 = cython.declare(cython.long, LINUX_SLL2)
_IPV4 = cython.declare(cython.long, 0x0800)
_IPV6 = cython.declare(cython.long, 0x86DD)
_TCP = cython.declare(cython.long, 6)
_IPV4_HEADER = cython.declare(cython.Py_ssize_t, 20)  # without options
_IPV6_HEADER = cython.declare(cython.Py_ssize_t, 40)
_TCP_FIXED = cython.declare(cython.Py_ssize_t, 14)  # ports, numbers, offset and flags
_SYN_FLAG = cython.declare(cython.long, 0x02)
_WINDOW_SCALE = cython.declare(cython.long, 3)  # the TCP option kind (RFC 7323)

MAX_FRAGMENT_DATAGRAMS = 256  # pending IPv4 datagrams being put back together
MAX_FRAGMENT_BYTES = 1 << 22


@cython.cfunc
@cython.inline
def _u16(buf: bytes, at: cython.Py_ssize_t) -> cython.long:
    """The big-endian 16-bit field at ``buf[at]`` (the caller checked the length)."""
    return buf[at] << 8 | buf[at + 1]


@cython.cfunc
@cython.inline
def _u32(buf: bytes, at: cython.Py_ssize_t) -> cython.longlong:
    """The big-endian 32-bit field at ``buf[at]`` (the caller checked the length)."""
    return (
        cython.cast(cython.longlong, buf[at]) << 24
        | buf[at + 1] << 16
        | buf[at + 2] << 8
        | buf[at + 3]
    )


@cython.cfunc
@cython.exceptval(-2, check=False)
def _window_scale(buf: bytes, at: cython.Py_ssize_t, stop: cython.Py_ssize_t) -> cython.long:
    """The window scale option among the TCP options ``buf[at:stop]`` (a SYN's), or -1.
    Options are walked by their length bytes, each checked to end within ``stop``."""
    kind: cython.long
    length: cython.long
    while at < stop:
        kind = buf[at]
        if kind == 0:  # end of the option list
            return -1
        if kind == 1:  # no-operation: a byte of padding
            at += 1
            continue
        if at + 1 >= stop:
            return -1
        length = buf[at + 1]
        if length < 2 or at + length > stop:
            return -1  # a length no option can have: the rest cannot be trusted
        if kind == _WINDOW_SCALE and length == 3:
            return min(buf[at + 2], 14)  # RFC 7323: a larger shift is taken as 14
        at += length
    return -1


@cython.cfunc
def _within(
    buf: bytes,
    base: cython.Py_ssize_t,
    size: cython.Py_ssize_t,
    lo: cython.Py_ssize_t,
    hi: cython.longlong,
) -> bytes:
    """The record's bytes ``lo:hi`` (``lo``, ``hi`` >= 0) cut at its captured ``size``, as
    a slice of the record would be. Compiled, copied straight from the bytes' buffer (no
    slice object): :meth:`PacketParser.parse` checked that the record lies within it."""
    lo = max(lo, 0)
    if hi > size:
        hi = size
    if lo >= hi:
        return b""
    data: cython.p_const_char = buf
    return data[base + lo : base + hi]


@cython.cclass
class PacketParser:
    """Finds the TCP segment in each record; holds the (bounded) IPv4 fragment state.

    After :meth:`parse` returns true, the segment is in ``src``, ``sport``, ``dst``,
    ``dport``, ``seq``, ``ack``, ``flags``, ``window`` (the advertised window as sent,
    unscaled), ``wscale`` (a SYN's window scale option; -1 when absent or not a SYN),
    ``payload`` and ``cut`` (payload bytes the snaplen removed), until the next call. Its
    fields' C types are in ``packets.pxd``.
    """

    def __init__(self, stats: CaptureStats) -> None:
        self.stats = stats
        self._fragments: dict[tuple[bytes, bytes, int], _Datagram] = {}
        self._fragment_bytes = 0
        self.src = self.dst = self.payload = b""
        self.sport = self.dport = self.seq = self.ack = self.flags = self.cut = 0
        self.window = 0
        self.wscale = -1

    @cython.ccall
    @cython.exceptval(-1, check=False)
    def parse(
        self,
        buf: bytes,
        start: cython.Py_ssize_t,
        stop: cython.Py_ssize_t,
        linktype: cython.long,
        orig_len: cython.longlong,
    ) -> cython.bint:
        """Whether the record ``buf[start:stop]`` (``orig_len`` bytes on the wire) is a TCP
        segment; anything else is counted in the stats."""
        if start < 0 or start > stop or stop > len(buf):
            raise ValueError(f"record {start}:{stop} is not within the {len(buf)} bytes given")
        size: cython.Py_ssize_t = stop - start
        ip: cython.Py_ssize_t = -1
        at: cython.Py_ssize_t = 0  # where the link header keeps the ethertype
        if linktype == _ETHERNET:
            ip, at = 14, 12
        elif linktype == _LINUX_SLL:
            ip, at = 16, 14
        elif linktype == _LINUX_SLL2:
            ip, at = 20, 0
        if ip >= 0 and size >= ip + _IPV4_HEADER + _TCP_FIXED:
            # The usual packet first: IPv4 without options or fragmentation, TCP, whole.
            base: cython.Py_ssize_t = start + ip
            if (
                _u16(buf, start + at) == _IPV4
                and buf[base] == 0x45
                and not _u16(buf, base + 6) & 0x3FFF
                and buf[base + 9] == _TCP
            ):
                total: cython.long = _u16(buf, base + 2)
                end: cython.longlong = ip + total if total else orig_len
                if end <= size:
                    self.src = _within(buf, start, size, ip + 12, ip + 16)
                    self.dst = _within(buf, start, size, ip + 16, ip + 20)
                    return self._tcp(buf, start, size, ip + _IPV4_HEADER, end)
        return self._link(buf, start, size, linktype, orig_len)

    @cython.cfunc
    @cython.exceptval(-1, check=False)
    def _link(
        self,
        buf: bytes,
        start: cython.Py_ssize_t,
        size: cython.Py_ssize_t,
        linktype: cython.long,
        orig_len: cython.longlong,
    ) -> cython.bint:
        """Any other record: the link header, then the IP layer it carries."""
        ethertype: cython.long
        offset: cython.Py_ssize_t
        if linktype == _ETHERNET:
            if size < 14:
                return self._malformed()
            ethertype, offset = _u16(buf, start + 12), 14
            while ethertype in _VLAN_TYPES:
                if size < offset + 4:
                    return self._malformed()
                ethertype, offset = _u16(buf, start + offset + 2), offset + 4
        elif linktype == _LINUX_SLL:
            if size < 16:
                return self._malformed()
            ethertype, offset = _u16(buf, start + 14), 16
        elif linktype == _LINUX_SLL2:
            if size < 2:
                return self._malformed()
            ethertype, offset = _u16(buf, start), 20
        elif linktype in _RAW_LINKS or linktype in (NULL, LOOP):
            offset = 0 if linktype in _RAW_LINKS else 4  # NULL, LOOP: an address family
            if size <= offset:
                return self._malformed()
            ethertype = _IPV4 if buf[start + offset] >> 4 == 4 else _IPV6
        else:
            self.stats.unsupported_link += 1
            self.stats.unsupported_links[linktype] += 1
            return False
        if ethertype == _IPV4:
            return self._ipv4(buf, start, size, offset, orig_len)
        if ethertype == _IPV6:
            return self._ipv6(buf, start, size, offset, orig_len)
        return self._non_tcp()

    @cython.cfunc
    @cython.exceptval(-1, check=False)
    def _ipv4(
        self,
        buf: bytes,
        base: cython.Py_ssize_t,
        size: cython.Py_ssize_t,
        offset: cython.Py_ssize_t,
        orig_len: cython.longlong,
    ) -> cython.bint:
        if size < offset + 10:
            return self._malformed()
        at: cython.Py_ssize_t = base + offset
        version_ihl: cython.long = buf[at]
        if version_ihl >> 4 != 4:
            return self._malformed()
        if buf[at + 9] != _TCP:
            return self._non_tcp()
        total: cython.long = _u16(buf, at + 2)
        fragment: cython.long = _u16(buf, at + 6)
        header: cython.Py_ssize_t = (version_ihl & 0x0F) * 4
        self.src = _within(buf, base, size, offset + 12, offset + 16)
        self.dst = _within(buf, base, size, offset + 16, offset + 20)
        if fragment & 0x3FFF:  # more-fragments flag or a non-zero fragment offset
            self.stats.ip_fragments += 1
            record = buf[base : base + size]
            whole = self._defragment(_u16(buf, at + 4), fragment, record, offset, header, total)
            if whole is None:
                return False
            return self._tcp(whole, 0, len(whole), 0, len(whole))
        end: cython.longlong = offset + total if total else orig_len  # 0: segmentation offload
        return self._tcp(buf, base, size, offset + header, end)

    @cython.cfunc
    @cython.exceptval(-1, check=False)
    def _ipv6(
        self,
        buf: bytes,
        base: cython.Py_ssize_t,
        size: cython.Py_ssize_t,
        offset: cython.Py_ssize_t,
        orig_len: cython.longlong,
    ) -> cython.bint:
        if size < offset + 7:
            return self._malformed()
        payload_len: cython.long = _u16(buf, base + offset + 4)
        proto: cython.long = buf[base + offset + 6]
        self.src = _within(buf, base, size, offset + 8, offset + 24)
        self.dst = _within(buf, base, size, offset + 24, offset + 40)
        end: cython.longlong = offset + _IPV6_HEADER + payload_len if payload_len else orig_len
        offset += _IPV6_HEADER
        while proto != _TCP:
            if proto in _IPV6_EXTENSIONS or proto == 51:
                if size < offset + 2:
                    return self._malformed()
                # its length: the authentication header's in 4-byte units minus 2, the
                # others' in 8-byte units minus 1
                length: cython.Py_ssize_t = buf[base + offset + 1]
                length = (length + 2) * 4 if proto == 51 else (length + 1) * 8
                proto = buf[base + offset]
                offset += length
            elif proto == 44:  # fragment header: not reassembled for IPv6, counted
                self.stats.ip_fragments += 1
                if size < offset + 4:
                    return self._malformed()
                if _u16(buf, base + offset + 2) & 0xFFF9:  # a fragment, not an atomic one
                    return False
                proto, offset = buf[base + offset], offset + 8
            else:
                return self._non_tcp()
        return self._tcp(buf, base, size, offset, end)

    @cython.cfunc
    @cython.exceptval(-1, check=False)
    def _tcp(
        self,
        buf: bytes,
        base: cython.Py_ssize_t,
        size: cython.Py_ssize_t,
        offset: cython.Py_ssize_t,
        end: cython.longlong,
    ) -> cython.bint:
        """The TCP header at ``offset`` of the record; its payload runs to ``end``, which
        the snaplen may have cut."""
        if size < offset + _TCP_FIXED:
            return self._malformed()
        at: cython.Py_ssize_t = base + offset
        self.sport = _u16(buf, at)
        self.dport = _u16(buf, at + 2)
        self.seq = _u32(buf, at + 4)
        self.ack = _u32(buf, at + 8)
        self.flags = buf[at + 13]
        self.window = _u16(buf, at + 14) if size >= offset + 16 else 0
        start: cython.Py_ssize_t = offset + (buf[at + 12] >> 4) * 4
        self.wscale = -1
        if self.flags & _SYN_FLAG:
            self.wscale = _window_scale(buf, at + 20, base + min(start, size))
        self.cut = 0
        if end > size:  # a header running past both ends leaves nothing missing
            self.cut = max(0, end - max(start, size))
            self.stats.truncated += 1
            end = size
        self.payload = _within(buf, base, size, start, end)
        return True

    @cython.cfunc
    @cython.exceptval(-1, check=False)
    def _malformed(self) -> cython.bint:
        self.stats.malformed += 1
        return False

    @cython.cfunc
    @cython.exceptval(-1, check=False)
    def _non_tcp(self) -> cython.bint:
        self.stats.non_tcp += 1
        return False

    def _defragment(
        self, ident: int, fragment: int, data: bytes, offset: int, header: int, total: int
    ) -> bytes | None:
        """Add one IPv4 fragment (``data``: its record); the whole TCP segment once every
        piece has arrived."""
        key = (self.src, self.dst, ident)
        datagram = self._fragments.get(key)
        if datagram is None:
            if len(self._fragments) >= MAX_FRAGMENT_DATAGRAMS:
                self._drop(next(iter(self._fragments)))
            datagram = self._fragments[key] = _Datagram()
        piece = data[offset + header : offset + total]
        if offset + total > len(data):  # cut by the snaplen: it can never be completed
            self._drop(key)
            return None
        datagram.add((fragment & 0x1FFF) * 8, piece, not fragment & 0x2000)
        self._fragment_bytes += len(piece)
        while self._fragment_bytes > MAX_FRAGMENT_BYTES:
            self._drop(next(iter(self._fragments)))
        whole = datagram.whole()
        if whole is not None:
            self._fragment_bytes -= datagram.size
            del self._fragments[key]
            self.stats.fragments_reassembled += 1
        return whole

    def _drop(self, key: tuple[bytes, bytes, int]) -> None:
        datagram = self._fragments.pop(key, None)
        if datagram is not None:
            self._fragment_bytes -= datagram.size
            self.stats.fragments_dropped += 1


class _Datagram:
    """The pieces of one fragmented IPv4 datagram, by offset."""

    __slots__ = ("length", "pieces", "size")

    def __init__(self) -> None:
        self.pieces: dict[int, bytes] = {}
        self.length = -1  # known once the last fragment arrived
        self.size = 0

    def add(self, offset: int, piece: bytes, last: bool) -> None:
        if offset not in self.pieces:
            self.pieces[offset] = piece
            self.size += len(piece)
        if last:
            self.length = offset + len(piece)

    def whole(self) -> bytes | None:
        if self.length < 0:
            return None
        joined = bytearray()
        for offset in sorted(self.pieces):
            if offset > len(joined):
                return None
            joined += self.pieces[offset][len(joined) - offset :]
        return bytes(joined) if len(joined) >= self.length else None
