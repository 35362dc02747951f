"""Minimal classic-pcap reader/writer and pcapng writer for building derived captures:
the damaged entries of the robustness catalogue (:mod:`fuzz.catalogue`), the corpus
generators' derived samples (``tests/corpus``) and the tests' own captures.

Only what those need: whole files in memory (samples are small), microsecond
timestamps, one interface. It is no capture reader of pwcap's (``capture/`` is).
"""

from __future__ import annotations

import struct
from dataclasses import dataclass
from pathlib import Path

PCAP_MAGIC_US = 0xA1B2C3D4
PCAP_HEADER = struct.Struct("<IHHiIII")
RECORD_HEADER = struct.Struct("<IIII")
LINKTYPE_ETHERNET = 1


@dataclass(frozen=True)
class Record:
    ts_sec: int
    ts_usec: int
    orig_len: int
    data: bytes

    @property
    def ts_us(self) -> int:
        return self.ts_sec * 1_000_000 + self.ts_usec


@dataclass(frozen=True)
class Capture:
    linktype: int
    snaplen: int
    records: list[Record]


def read_pcap(path: Path) -> Capture:
    """Read a little-endian microsecond pcap, as tcpdump writes on this machine."""
    raw = path.read_bytes()
    magic, _major, _minor, _zone, _sigfigs, snaplen, linktype = PCAP_HEADER.unpack_from(raw)
    if magic != PCAP_MAGIC_US:
        raise ValueError(f"{path}: not a little-endian microsecond pcap (magic {magic:#x})")
    records = []
    offset = PCAP_HEADER.size
    while offset < len(raw):
        ts_sec, ts_usec, caplen, orig_len = RECORD_HEADER.unpack_from(raw, offset)
        offset += RECORD_HEADER.size
        records.append(Record(ts_sec, ts_usec, orig_len, raw[offset : offset + caplen]))
        offset += caplen
    return Capture(linktype, snaplen, records)


def write_pcap(path: Path, capture: Capture) -> None:
    parts = [PCAP_HEADER.pack(PCAP_MAGIC_US, 2, 4, 0, 0, capture.snaplen, capture.linktype)]
    for record in capture.records:
        parts.append(
            RECORD_HEADER.pack(record.ts_sec, record.ts_usec, len(record.data), record.orig_len)
        )
        parts.append(record.data)
    path.write_bytes(b"".join(parts))


def _block(block_type: int, body: bytes) -> bytes:
    """A pcapng block: type, total length, body padded to 32 bits, total length again."""
    padded = body + b"\x00" * (-len(body) % 4)
    length = 12 + len(padded)
    return struct.pack("<II", block_type, length) + padded + struct.pack("<I", length)


TLS_KEY_LOG = 0x544C534B  # a Decryption Secrets Block's type for NSS key log lines


def write_pcapng(path: Path, capture: Capture, secrets: bytes | None = None) -> None:
    """Section header, one interface (default microsecond resolution), then a Decryption
    Secrets Block holding ``secrets`` (an NSS key log) if given, enhanced packets."""
    section = _block(0x0A0D0D0A, struct.pack("<IHHq", 0x1A2B3C4D, 1, 0, -1))
    interface = _block(0x00000001, struct.pack("<HHI", capture.linktype, 0, capture.snaplen))
    if secrets is not None:
        header = struct.pack("<II", TLS_KEY_LOG, len(secrets))
        interface += _block(0x0000000A, header + secrets)
    packets = []
    for record in capture.records:
        header = struct.pack(
            "<IIIII",
            0,
            record.ts_us >> 32,
            record.ts_us & 0xFFFFFFFF,
            len(record.data),
            record.orig_len,
        )
        packets.append(_block(0x00000006, header + record.data))
    path.write_bytes(section + interface + b"".join(packets))


@dataclass(frozen=True)
class Segment:
    """The TCP view of one Ethernet/IPv4 record."""

    src: str
    dst: str
    seq: int
    flags: int
    payload_len: int

    @property
    def syn(self) -> bool:
        return bool(self.flags & 0x02)


def tcp_segment(record: Record) -> Segment | None:
    """Parse Ethernet + IPv4 + TCP headers; None for anything else."""
    data = record.data
    if len(data) < 14 + 20 or data[12:14] != b"\x08\x00":
        return None
    ip = data[14:]
    header_len = (ip[0] & 0x0F) * 4
    total_len = int.from_bytes(ip[2:4], "big")
    if ip[9] != 6:
        return None
    tcp = ip[header_len:]
    sport, dport, seq = struct.unpack_from(">HHI", tcp)
    data_offset = (tcp[12] >> 4) * 4
    src = f"{'.'.join(map(str, ip[12:16]))}:{sport}"
    dst = f"{'.'.join(map(str, ip[16:20]))}:{dport}"
    return Segment(src, dst, seq, tcp[13], total_len - header_len - data_offset)
