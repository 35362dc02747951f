"""Link layer, IPv4/IPv6 and TCP headers of one captured record, with ``struct`` only.

One function call per record and no per-layer objects: the parse returns the handful of
TCP fields reassembly needs, or ``None`` for anything that is not TCP. IPv4 fragments of
TCP are put back together (bounded); other fragments are counted and skipped.
"""

from __future__ import annotations

import struct
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from pwcap.capture.stats import CaptureStats

# (src ip, src port, dst ip, dst port, seq, ack, flags, payload, bytes cut by the snaplen)
Segment = tuple[bytes, int, bytes, int, int, int, int, memoryview, int]

ETHERNET, NULL, RAW, RAW_ALT, LOOP, LINUX_SLL, RAW_IPV4, RAW_IPV6, LINUX_SLL2 = (
    1, 0, 101, 12, 108, 113, 228, 229, 276
)  # fmt: skip
RAW_OPENBSD = 14
_VLAN_TYPES = frozenset({0x8100, 0x88A8, 0x9100, 0x9200})
_IPV4, _IPV6 = 0x0800, 0x86DD
_IPV6_EXTENSIONS = frozenset({0, 43, 60, 135, 139, 140})  # skipped by their length byte
_TCP = 6

_u16 = struct.Struct(">H").unpack_from
_tcp = struct.Struct(">HHIIBB").unpack_from
_ipv4 = struct.Struct(">BxHHHxB").unpack_from  # version/ihl, total length, id, frag, proto

_IPV4_TCP = "BxHxxHxB2x4s4sHHIIBB"  # version/ihl, length, fragment, protocol, addresses; TCP
_FAST_PATHS = {  # link type -> one struct from the link header through the TCP flags
    ETHERNET: struct.Struct(">12xH" + _IPV4_TCP),
    LINUX_SLL: struct.Struct(">14xH" + _IPV4_TCP),
    LINUX_SLL2: struct.Struct(">H18x" + _IPV4_TCP),
}

MAX_FRAGMENT_DATAGRAMS = 256  # pending IPv4 datagrams being put back together
MAX_FRAGMENT_BYTES = 1 << 22


class PacketParser:
    """Turns records into TCP segments; holds the (bounded) IPv4 fragment state."""

    def __init__(self, stats: CaptureStats) -> None:
        self.stats = stats
        self._fragments: dict[tuple[bytes, bytes, int], _Datagram] = {}
        self._fragment_bytes = 0

    def parse(self, linktype: int, data: memoryview, orig_len: int) -> Segment | None:
        """The TCP segment in one record, or None (counted in the stats) for anything else."""
        fast = _FAST_PATHS.get(linktype)
        if fast is not None and len(data) >= fast.size:
            # One unpack for the usual packet: link header, IPv4 without options, TCP.
            ethertype, version_ihl, total, fragment, proto, src, dst, *tcp = fast.unpack_from(data)
            whole = ethertype == _IPV4 and version_ihl == 0x45 and not fragment & 0x3FFF
            if whole and proto == _TCP:
                ip = fast.size - 34  # where the IPv4 header starts
                end = ip + total if total else orig_len
                start = ip + 20 + (tcp[4] >> 4) * 4
                if end <= len(data):
                    sport, dport, seq, ack, _, flags = tcp
                    return src, sport, dst, dport, seq, ack, flags, data[start:end], 0
        try:
            if linktype == ETHERNET:
                ethertype = _u16(data, 12)[0]
                offset = 14
                while ethertype in _VLAN_TYPES:
                    ethertype = _u16(data, offset + 2)[0]
                    offset += 4
            elif linktype == LINUX_SLL:
                ethertype = _u16(data, 14)[0]
                offset = 16
            elif linktype == LINUX_SLL2:
                ethertype = _u16(data, 0)[0]
                offset = 20
            elif linktype in (RAW, RAW_ALT, RAW_OPENBSD, RAW_IPV4, RAW_IPV6):
                ethertype = _IPV4 if data[0] >> 4 == 4 else _IPV6
                offset = 0
            elif linktype in (NULL, LOOP):  # 4-byte address family, in whichever byte order
                ethertype = _IPV4 if data[4] >> 4 == 4 else _IPV6
                offset = 4
            else:
                self.stats.unsupported_link += 1
                self.stats.unsupported_links[linktype] += 1
                return None
            if ethertype == _IPV4:
                return self._ipv4(data, offset, orig_len)
            if ethertype == _IPV6:
                return self._ipv6(data, offset, orig_len)
        except (struct.error, IndexError):
            self.stats.malformed += 1
            return None
        self.stats.non_tcp += 1
        return None

    def _ipv4(self, data: memoryview, offset: int, orig_len: int) -> Segment | None:
        version_ihl, total, ident, fragment, proto = _ipv4(data, offset)
        if version_ihl >> 4 != 4:
            self.stats.malformed += 1
            return None
        if proto != _TCP:
            self.stats.non_tcp += 1
            return None
        header = (version_ihl & 0x0F) * 4
        src = bytes(data[offset + 12 : offset + 16])
        dst = bytes(data[offset + 16 : offset + 20])
        if fragment & 0x3FFF:  # more-fragments flag or a non-zero fragment offset
            self.stats.ip_fragments += 1
            whole = self._defragment(src, dst, ident, fragment, data, offset, header, total)
            if whole is None:
                return None
            return self._tcp(src, dst, memoryview(whole), 0, len(whole), len(whole))
        end = offset + total if total else orig_len  # total 0: segmentation offload
        return self._tcp(src, dst, data, offset + header, end, len(data))

    def _ipv6(self, data: memoryview, offset: int, orig_len: int) -> Segment | None:
        payload_len = _u16(data, offset + 4)[0]
        proto = data[offset + 6]
        src = bytes(data[offset + 8 : offset + 24])
        dst = bytes(data[offset + 24 : offset + 40])
        end = offset + 40 + payload_len if payload_len else orig_len
        offset += 40
        while proto != _TCP:
            if proto in _IPV6_EXTENSIONS:
                proto, offset = data[offset], offset + (data[offset + 1] + 1) * 8
            elif proto == 51:  # authentication header: length in 4-byte units, minus 2
                proto, offset = data[offset], offset + (data[offset + 1] + 2) * 4
            elif proto == 44:  # fragment header: not reassembled for IPv6, counted
                self.stats.ip_fragments += 1
                if _u16(data, offset + 2)[0] & 0xFFF9:  # a fragment, not an atomic one
                    return None
                proto, offset = data[offset], offset + 8
            else:
                self.stats.non_tcp += 1
                return None
        return self._tcp(src, dst, data, offset, end, len(data))

    def _tcp(
        self, src: bytes, dst: bytes, data: memoryview, offset: int, end: int, captured: int
    ) -> Segment | None:
        sport, dport, seq, ack, data_offset, flags = _tcp(data, offset)
        start = offset + (data_offset >> 4) * 4
        cut = 0
        if end > captured:  # a header running past both ends leaves nothing missing
            cut = max(0, end - max(start, captured))
            self.stats.truncated += 1
            end = captured
        return src, sport, dst, dport, seq, ack, flags, data[start:end], cut

    def _defragment(
        self,
        src: bytes,
        dst: bytes,
        ident: int,
        fragment: int,
        data: memoryview,
        offset: int,
        header: int,
        total: int,
    ) -> bytes | None:
        """Add one IPv4 fragment; the whole TCP segment once every piece has arrived."""
        key = (src, dst, ident)
        datagram = self._fragments.get(key)
        if datagram is None:
            if len(self._fragments) >= MAX_FRAGMENT_DATAGRAMS:
                self._drop(next(iter(self._fragments)))
            datagram = self._fragments[key] = _Datagram()
        piece = bytes(data[offset + header : offset + total])
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
