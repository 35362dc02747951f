"""A capture file taken apart into the pieces a mutation aims at.

Mutations that know the format (a record's length field, a TCP header, a Pulsar frame
size) need to find those bytes; this module splits a pcap or pcapng file into its file
header and its records or blocks, and finds the TCP header and payload inside a packet.
It reads only what the sample captures hold and is no second capture reader: anything
it does not recognise is left as an opaque part.
"""

from __future__ import annotations

import struct
from dataclasses import dataclass

PCAP_MAGICS = {
    b"\xd4\xc3\xb2\xa1": "<",
    b"\xa1\xb2\xc3\xd4": ">",
    b"\x4d\x3c\xb2\xa1": "<",
    b"\xa1\xb2\x3c\x4d": ">",
}
SHB = 0x0A0D0D0A
IDB, EPB = 1, 6
PCAP_RECORD_HEADER = 16
EPB_DATA = 28  # block type, length, interface, two timestamp words, two lengths

# link type -> bytes of link-layer header before the IP header
_LINK_HEADER = {1: 14, 113: 16, 276: 20, 101: 0, 228: 0}


@dataclass
class Part:
    """One record (pcap) or block (pcapng), header included, as mutable bytes."""

    raw: bytearray
    packet_at: int | None  # where the captured packet starts in ``raw``; None: no packet

    @property
    def packet(self) -> bytes:
        return bytes(self.raw[self.packet_at :]) if self.packet_at is not None else b""


@dataclass
class Layout:
    """A capture as ``head`` (the pcap file header; empty for pcapng) and its parts."""

    kind: str  # "pcap" or "pcapng"
    endian: str  # struct byte order of the headers: "<" or ">"
    linktype: int
    head: bytearray
    parts: list[Part]

    def to_bytes(self) -> bytes:
        return bytes(self.head) + b"".join(bytes(part.raw) for part in self.parts)

    def packets(self) -> list[int]:
        """Indexes of the parts that carry a packet."""
        return [i for i, part in enumerate(self.parts) if part.packet_at is not None]

    def copy(self) -> Layout:
        parts = [Part(bytearray(p.raw), p.packet_at) for p in self.parts]
        return Layout(self.kind, self.endian, self.linktype, bytearray(self.head), parts)


def parse(data: bytes) -> Layout | None:
    """The layout of a well-formed pcap or pcapng file; None for anything else."""
    if data[:4] in PCAP_MAGICS:
        return _parse_pcap(data)
    if len(data) >= 12 and struct.unpack_from("<I", data)[0] == SHB:
        return _parse_pcapng(data)
    return None


def _parse_pcap(data: bytes) -> Layout | None:
    endian = PCAP_MAGICS[data[:4]]
    if len(data) < 24:
        return None
    linktype = struct.unpack_from(endian + "I", data, 20)[0] & 0x0FFFFFFF
    parts = []
    pos = 24
    while pos + PCAP_RECORD_HEADER <= len(data):
        caplen = struct.unpack_from(endian + "I", data, pos + 8)[0]
        end = pos + PCAP_RECORD_HEADER + caplen
        if end > len(data):
            return None
        parts.append(Part(bytearray(data[pos:end]), PCAP_RECORD_HEADER))
        pos = end
    return Layout("pcap", endian, linktype, bytearray(data[:24]), parts)


def _parse_pcapng(data: bytes) -> Layout | None:
    bom = data[8:12]
    endian = "<" if bom == b"\x4d\x3c\x2b\x1a" else ">"
    parts = []
    linktype = 1
    pos = 0
    while pos + 12 <= len(data):
        block, length = struct.unpack_from(endian + "II", data, pos)
        if length < 12 or pos + length > len(data):
            return None
        raw = bytearray(data[pos : pos + length])
        if block == IDB and len(parts) < 2:
            linktype = struct.unpack_from(endian + "H", raw, 8)[0]
        parts.append(Part(raw, EPB_DATA if block == EPB else None))
        pos += length
    return Layout("pcapng", endian, linktype, bytearray(), parts)


@dataclass(frozen=True)
class Tcp:
    """Where a packet's IP header, TCP header and payload are, as offsets into it."""

    ip: int
    header: int
    payload: int
    end: int  # the end of the payload (captured bytes, IP length permitting)


def tcp(packet: bytes, linktype: int) -> Tcp | None:
    """The TCP header and payload of an Ethernet, SLL, SLL2 or raw IP packet."""
    at = _LINK_HEADER.get(linktype)
    if at is None:
        return None
    if linktype == 1 and packet[12:14] == b"\x81\x00":
        at += 4
    if len(packet) < at + 20:
        return None
    version = packet[at] >> 4
    if version == 4:
        header = at + (packet[at] & 0x0F) * 4
        protocol = packet[at + 9]
        end = at + struct.unpack_from(">H", packet, at + 2)[0]
    elif version == 6 and len(packet) >= at + 40:
        header = at + 40
        protocol = packet[at + 6]
        end = header + struct.unpack_from(">H", packet, at + 4)[0]
    else:
        return None
    if protocol != 6 or len(packet) < header + 20:
        return None
    payload = header + (packet[header + 12] >> 4) * 4
    end = min(end, len(packet))
    return Tcp(at, header, payload, end) if payload <= end else None
