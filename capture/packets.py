# cython: annotation_typing=True
"""The headers of one captured record down to its TCP segment, read in place.

One call per record and no object per header: :meth:`PacketParser.parse` reads the
headers straight out of the record's bytes (a slice of the reader's chunk, given by its
bounds) and keeps the handful of TCP fields reassembly needs in its own fields. The usual
packet (Ethernet or Linux cooked, IPv4 without options or fragments, TCP) is read here in
one step; any other walks the layers of :mod:`pwcap.capture.layers` (VLAN and MPLS
stacks, GRE, ERSPAN, VXLAN, Geneve, IP in IP, IPv6 extension headers, fragments), each
checking the bytes it reads are there. A record too short for a header it announces is
skipped and counted by its reason, never read past; the tunnel ids met on the way are the
segment's ``tunnel`` (its ``encapsulation`` label), part of its flow's identity. A segment
captured twice (:mod:`pwcap.capture.duplicates`) is taken once.

Compiled by Cython, the parser is a C struct and its reads are C byte loads; interpreted,
the same code runs on Python integers and finds the same segments.
"""

from __future__ import annotations

from array import array
from collections.abc import Iterable
from typing import TYPE_CHECKING

import cython

from .layers import codes
from .layers.codes import (
    ERSPAN_2,
    ERSPAN_3,
    ETHERNET,
    GENEVE,
    GENEVE_PORT,
    GRE,
    HELD,
    IPV4,
    IPV6,
    MALFORMED,
    MAX_LAYERS,
    MAX_TAGS,
    MPLS,
    NON_TCP,
    TCP,
    TOO_DEEP,
    TRUNCATED,
    UDP,
    UDP_NOT_TUNNEL,
    VLAN,
    VXLAN,
    VXLAN_PORTS,
)

if TYPE_CHECKING:
    from .stats import CaptureStats

if cython.compiled:  # the C declarations of the layers (.pxd)
    from cython.cimports.pwcap.capture.duplicates import Duplicates, fingerprint
    from cython.cimports.pwcap.capture.layers.cursor import Cursor
    from cython.cimports.pwcap.capture.layers.erspan import erspan2, erspan3
    from cython.cimports.pwcap.capture.layers.ethernet import ethernet, vlan
    from cython.cimports.pwcap.capture.layers.fragments import Fragments
    from cython.cimports.pwcap.capture.layers.geneve import geneve
    from cython.cimports.pwcap.capture.layers.gre import gre
    from cython.cimports.pwcap.capture.layers.ipv4 import ipv4
    from cython.cimports.pwcap.capture.layers.ipv6 import ipv6
    from cython.cimports.pwcap.capture.layers.link import link
    from cython.cimports.pwcap.capture.layers.mpls import mpls
    from cython.cimports.pwcap.capture.layers.udp import udp
    from cython.cimports.pwcap.capture.layers.vxlan import vxlan
else:
    from .duplicates import Duplicates, fingerprint
    from .layers.cursor import Cursor
    from .layers.erspan import erspan2, erspan3
    from .layers.ethernet import ethernet, vlan
    from .layers.fragments import Fragments
    from .layers.geneve import geneve
    from .layers.gre import gre
    from .layers.ipv4 import ipv4
    from .layers.ipv6 import ipv6
    from .layers.link import link
    from .layers.mpls import mpls
    from .layers.udp import udp
    from .layers.vxlan import vxlan

# C constants when compiled: a module global is a dict lookup at every packet.
_ETHERNET_LINK = cython.declare(cython.long, 1)
_LINUX_SLL = cython.declare(cython.long, 113)
_LINUX_SLL2 = cython.declare(cython.long, 276)
_IPV4_TYPE = cython.declare(cython.long, 0x0800)
_TCP_PROTOCOL = cython.declare(cython.long, 6)
_IPV4_HEADER = cython.declare(cython.Py_ssize_t, 20)  # without options
_TCP_FIXED = cython.declare(cython.Py_ssize_t, 14)  # ports, numbers, offset and flags
_SYN_FLAG = cython.declare(cython.long, 0x02)
_WINDOW_SCALE = cython.declare(cython.long, 3)  # the TCP option kind (RFC 7323)
_TCP = cython.declare(cython.int, TCP)
_HELD = cython.declare(cython.int, HELD)
_ETHERNET = cython.declare(cython.int, ETHERNET)
_VLAN = cython.declare(cython.int, VLAN)
_IPV4 = cython.declare(cython.int, IPV4)
_IPV6 = cython.declare(cython.int, IPV6)
_UDP = cython.declare(cython.int, UDP)
_GRE = cython.declare(cython.int, GRE)
_MPLS = cython.declare(cython.int, MPLS)
_VXLAN = cython.declare(cython.int, VXLAN)
_GENEVE = cython.declare(cython.int, GENEVE)
_ERSPAN_2 = cython.declare(cython.int, ERSPAN_2)
_ERSPAN_3 = cython.declare(cython.int, ERSPAN_3)
_NON_TCP = cython.declare(cython.int, NON_TCP)
_UDP_NOT_TUNNEL = cython.declare(cython.int, UDP_NOT_TUNNEL)
_TRUNCATED = cython.declare(cython.int, TRUNCATED)
_MALFORMED = cython.declare(cython.int, MALFORMED)
_TOO_DEEP = cython.declare(cython.int, TOO_DEEP)
_MAX_LAYERS = cython.declare(cython.int, MAX_LAYERS)
MAX_LABELS = 4096  # encapsulation labels remembered (their text made once each)
MAX_COUNTED = 10_000  # encapsulations counted one by one in the stats; the rest as "other"


def tunnel_ports(vxlan_ports: Iterable[int] = ()) -> bytes:
    """The UDP layer's table: for each destination port, the tunnel it carries (0: none)."""
    table = bytearray(1 << 16)
    for port in (*VXLAN_PORTS, *vxlan_ports):
        table[port] = VXLAN
    table[GENEVE_PORT] = GENEVE
    return bytes(table)


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
    """Finds the TCP segment in each record; holds the (bounded) state that spans
    records: IP datagrams awaiting fragments, fingerprints of recent segments.

    After :meth:`parse` returns true, the segment is in ``src``, ``sport``, ``dst``,
    ``dport``, ``seq``, ``ack``, ``flags``, ``window`` (the advertised window as sent,
    unscaled), ``wscale`` (a SYN's window scale option; -1 when absent or not a SYN),
    ``payload``, ``cut`` (payload bytes the snaplen or a mirror removed) and ``tunnel``
    (its encapsulation, "" when bare), until the next call. Its fields' C types are in
    ``packets.pxd``.
    """

    def __init__(self, stats: CaptureStats, vxlan_ports: Iterable[int] = ()) -> None:
        self.stats = stats
        self._cursor = Cursor()
        self._fragments = Fragments(stats)
        self._duplicates = Duplicates(stats)
        self._tunnels = tunnel_ports(vxlan_ports)
        self._labels: dict[tuple[int, ...], str] = {}
        self._seen = array("q", bytes(8 * 2 * MAX_TAGS))  # the last segment's tags
        self._seen_count = 0
        self._tunnel_seen = ""
        self._run = ""  # the encapsulation of the last segments, counted in _run_count
        self._run_count = 0
        self.src = self.dst = self.payload = b""
        self.tunnel = ""
        self.sport = self.dport = self.seq = self.ack = self.flags = self.cut = 0
        self.window = 0
        self.wscale = -1
        self._ident = -1
        self._fingerprint = 0

    @cython.ccall
    @cython.exceptval(-1, check=False)
    def parse(
        self,
        buf: bytes,
        start: cython.Py_ssize_t,
        stop: cython.Py_ssize_t,
        linktype: cython.long,
        orig_len: cython.longlong,
        ts: cython.longlong,
    ) -> cython.bint:
        """Whether the record ``buf[start:stop]`` (``orig_len`` bytes on the wire,
        captured at ``ts``) is a TCP segment not seen before; anything else is counted
        in the stats."""
        if start < 0 or start > stop or stop > len(buf):
            raise ValueError(f"record {start}:{stop} is not within the {len(buf)} bytes given")
        size: cython.Py_ssize_t = stop - start
        ip: cython.Py_ssize_t = -1
        at: cython.Py_ssize_t = 0  # where the link header keeps the ethertype
        if linktype == _ETHERNET_LINK:
            ip, at = 14, 12
        elif linktype == _LINUX_SLL:
            ip, at = 16, 14
        elif linktype == _LINUX_SLL2:
            ip, at = 20, 0
        if ip >= 0 and size >= ip + _IPV4_HEADER + _TCP_FIXED:
            # The usual packet first: IPv4 without options or fragmentation, TCP, whole.
            base: cython.Py_ssize_t = start + ip
            if (
                _u16(buf, start + at) == _IPV4_TYPE
                and buf[base] == 0x45
                and not _u16(buf, base + 6) & 0x3FFF
                and buf[base + 9] == _TCP_PROTOCOL
            ):
                total: cython.long = _u16(buf, base + 2)
                end: cython.longlong = ip + total if total else orig_len
                if end <= size:
                    self.src = _within(buf, start, size, ip + 12, ip + 16)
                    self.dst = _within(buf, start, size, ip + 16, ip + 20)
                    self._ident = _u16(buf, base + 4)
                    self.tunnel = ""
                    return self._tcp(buf, start, size, ip + _IPV4_HEADER, end) and self._take(ts)
        return self._walk(buf, start, size, linktype, orig_len, ts)

    @cython.cfunc
    @cython.exceptval(-1, check=False)
    def _walk(
        self,
        buf: bytes,
        start: cython.Py_ssize_t,
        size: cython.Py_ssize_t,
        linktype: cython.long,
        orig_len: cython.longlong,
        ts: cython.longlong,
    ) -> cython.bint:
        """Any other record: header by header, each layer naming the next."""
        c: Cursor = self._cursor
        c.start(buf, start, size, orig_len, ts)
        code: cython.int = link(c, linktype)
        layers: cython.int = 0
        while code > _TCP:
            layers += 1
            if layers > _MAX_LAYERS:
                code = _TOO_DEEP
            elif code == _ETHERNET:
                code = ethernet(c)
            elif code == _IPV4:
                code = ipv4(c, self._fragments)
            elif code == _IPV6:
                code = ipv6(c, self._fragments)
            elif code == _VLAN:
                code = vlan(c)
            elif code == _UDP:
                code = udp(c, self._tunnels)
            elif code == _VXLAN:
                code = vxlan(c)
            elif code == _GENEVE:
                code = geneve(c)
            elif code == _GRE:
                code = gre(c)
            elif code == _ERSPAN_2:
                code = erspan2(c)
            elif code == _ERSPAN_3:
                code = erspan3(c)
            elif code == _MPLS:
                code = mpls(c)
            else:
                raise AssertionError(f"no layer reads code {code}")
        if code == _TCP:
            self.src = c.src
            self.dst = c.dst
            self._ident = c.ident
            self._encapsulation(c)
            return self._tcp(c.buf, c.base, c.size, c.at, c.end) and self._take(ts)
        if code != _HELD:
            self._skip(code, linktype)
        return False

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
            return self._skip(_TRUNCATED, 0)
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
        self._fingerprint = fingerprint(
            buf, at, base + min(start, size), base + end, self.src, self.dst, self._ident,
            len(self.payload) + self.cut,
        )  # fmt: skip
        return True

    @cython.cfunc
    @cython.exceptval(-1, check=False)
    def _take(self, ts: cython.longlong) -> cython.bint:
        """Whether the segment found is the first copy of it (its encapsulation then
        counted): a copy was seen already when a mirror doubled it."""
        duplicates: Duplicates = self._duplicates
        if duplicates.aliases:  # a flow seen in two encapsulations joins the first
            self.tunnel = duplicates.alias(self.tunnel, self.src, self.sport, self.dst, self.dport)
        if not duplicates.first_copy(
            self._fingerprint, ts, self.tunnel, self.src, self.sport, self.dst, self.dport
        ):
            return False
        if self.tunnel:
            if self.tunnel is not self._run:
                self._count_run()
                self._run = self.tunnel
            self._run_count += 1
        return True

    @cython.cfunc
    def _encapsulation(self, c: Cursor) -> cython.void:
        """``tunnel``: the label of the segment's tags, made once per distinct stack (and
        compared in C with the last segment's, which almost always had the same)."""
        count: cython.Py_ssize_t = c.count
        if not count:
            self.tunnel = ""
            return
        index: cython.Py_ssize_t
        same: cython.bint = count == self._seen_count
        if same:
            for index in range(count):
                if c.tags[index] != self._seen[index]:
                    same = False
                    break
        if not same:
            key = c.key()
            label = self._labels.get(key)
            if label is None:
                if len(self._labels) >= MAX_LABELS:
                    self._labels.clear()
                label = self._labels[key] = codes.label(key)
            for index in range(count):
                self._seen[index] = c.tags[index]
            self._seen_count = count
            self._tunnel_seen = label
        self.tunnel = self._tunnel_seen

    @cython.cfunc
    @cython.exceptval(-1, check=False)
    def _skip(self, code: cython.int, linktype: cython.long) -> cython.bint:
        """Count a record that gives no segment, by the reason ``code`` says."""
        stats = self.stats
        if code == _NON_TCP:
            stats.non_tcp += 1
        elif code == _UDP_NOT_TUNNEL:
            stats.udp_not_tunnel += 1
            stats.udp_ports[self._cursor.port] += 1
        elif code == _TRUNCATED:
            stats.truncated_headers += 1
        elif code == _MALFORMED:
            stats.malformed += 1
        elif code == _TOO_DEEP:
            stats.too_deep += 1
        else:
            stats.unsupported_link += 1
            stats.unsupported_links[linktype] += 1
        return False

    @cython.ccall
    @cython.returns(cython.void)
    def count(self) -> None:
        """Add what was counted in C since the last call to the stats: fragments, and
        segments per encapsulation."""
        self._fragments.count()
        self._count_run()

    @cython.cfunc
    @cython.exceptval(check=True)
    def _count_run(self) -> cython.void:
        """The segments of the last encapsulation, counted in C while it stayed the same,
        to ``stats.encapsulations``."""
        if self._run_count:
            counted = self.stats.encapsulations
            if self._run in counted or len(counted) < MAX_COUNTED:
                counted[self._run] += self._run_count
            else:
                counted["other"] += self._run_count
            self._run_count = 0

    def finish(self) -> None:
        """The capture ended: datagrams still awaiting fragments were never completed."""
        self._fragments.finish()
        self.count()
