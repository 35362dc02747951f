"""Damaged captures made from the sample captures, deterministically from a seed.

``mutant(seed, index)`` always returns the same bytes: a failure found by a long run is
reproduced by its index alone. Each mutant is one sample capture with one to four
mutations, each aimed at a layer pwcap reads:

- the file: bit flips, bytes set to boundary values, truncation, junk or zeros appended,
  gzip (sound, cut, or with a damaged trailer);
- the records: pcap record lengths, pcapng block lengths and EPB lengths, timestamps
  (backwards, beyond any calendar), pcapng block types, interfaces and options, the pcap
  file header's link type, magic and snap length;
- the packets: records dropped, duplicated, reordered, spliced in from another capture;
  TCP headers (sequence numbers, flags, ports, a land packet, header length); segments
  re-cut into small or overlapping pieces; IP packets cut into fragments (reordered,
  repeated, overlapping, one lost);
- the headers before TCP: any byte or 16-bit field of the link, tunnel and IP headers
  (lengths, flags, ids, option lengths), or the record cut inside them; besides the
  sample captures, the mutants start from ``pulsar_plain`` wrapped in every encapsulation
  ``tests/tunnels.py`` knows (VLAN, MPLS, GRE, ERSPAN, VXLAN, Geneve, IP in IP, the
  collectors' link types), so every header pwcap reads is damaged;
- the streams: length fields inside TCP payloads (Pulsar totalSize and commandSize, Kafka
  request, response and message sizes: any big-endian word that looks like a length);
  TLS records (their type, version and length, a byte of their ciphertext, the type and
  length of a handshake message). The campaign decodes with the samples' key logs, so
  a TLS sample's mutants reach decryption.
"""

from __future__ import annotations

import gzip
import random
import struct
import tempfile
from collections.abc import Callable
from dataclasses import dataclass
from functools import cache
from pathlib import Path

from fuzz.layout import EPB, EPB_DATA, IDB, Layout, Part, Tcp, parse, tcp

SAMPLES = Path(__file__).resolve().parent.parent / "sample_pcaps"
MAX_FRAME = 5 * 1024 * 1024  # pwcap's default --max-frame-size: both sides of it matter
TCP_MIN_HEADER = 20  # bytes: a TCP header without options


@dataclass(frozen=True)
class Mutant:
    """One damaged capture: a file name that says where it came from, its bytes, and the
    mutations applied (to say what a failing input is)."""

    name: str
    data: bytes
    mutations: tuple[str, ...]


@cache
def samples() -> tuple[tuple[str, bytes, Layout], ...]:
    """Every sample capture: its stem, bytes and layout."""
    found = []
    for path in sorted(SAMPLES.iterdir()):
        if path.suffix in (".pcap", ".pcapng"):
            data = path.read_bytes()
            layout = parse(data)
            assert layout is not None, f"{path} is not a well-formed capture"
            found.append((path.stem, data, layout))
    return tuple(found)


WRAPPED_FROM = "pulsar_plain"
WRAPPED_SHARE = 0.3  # of the mutants, made from a wrapped sample


@cache
def wrapped_samples() -> tuple[tuple[str, bytes, Layout], ...]:
    """``pulsar_plain`` in every encapsulation of ``tests/tunnels.py``: its stem, bytes
    and layout."""
    from fuzz.pcapfile import write_pcap
    from tests import tunnels  # scapy, loaded only by a campaign that uses it

    bare = tunnels.load(SAMPLES / f"{WRAPPED_FROM}.pcap")
    found = []
    with tempfile.TemporaryDirectory(prefix="pwcap-fuzz-") as folder:
        for wrapping in tunnels.WRAPPINGS:
            path = Path(folder) / f"{wrapping.name}.pcap"
            write_pcap(path, tunnels.wrapped(bare, wrapping))
            data = path.read_bytes()
            layout = parse(data)
            assert layout is not None
            found.append((f"{WRAPPED_FROM}-in-{wrapping.name}", data, layout))
    return tuple(found)


def mutant(seed: int, index: int) -> Mutant:
    """The ``index``-th mutant of the campaign ``seed``."""
    rng = random.Random(f"pwcap-fuzz:{seed}:{index}")
    pool = wrapped_samples() if rng.random() < WRAPPED_SHARE else samples()
    stem, _, original = pool[rng.randrange(len(pool))]
    layout = original.copy()
    done = []
    for _ in range(1 + min(3, int(rng.expovariate(1.0)))):
        name, operation = rng.choices(OPERATIONS, WEIGHTS)[0]
        if name in LAYOUT_OPERATIONS:
            done.append(f"{name}({operation(rng, layout)})")
        else:
            done.append(name)
            layout = _Raw(operation(rng, layout.to_bytes()))
    data = layout.to_bytes()
    gzipped = data[:2] == b"\x1f\x8b"
    suffix = ".pcap.gz" if gzipped else ".pcapng" if original.kind == "pcapng" else ".pcap"
    return Mutant(f"{index:07d}-{stem}{suffix}", data, tuple(done))


class _Raw(Layout):
    """Bytes that are no longer a parseable layout: later layout mutations act on the
    bytes of the sample as a last parse found them, and raw ones on these bytes."""

    def __init__(self, data: bytes) -> None:
        parsed = parse(data)
        if parsed is not None:
            super().__init__(parsed.kind, parsed.endian, parsed.linktype, parsed.head, parsed.parts)
            self._data = None
        else:
            super().__init__("raw", "<", 0, bytearray(), [])
            self._data = data

    def to_bytes(self) -> bytes:
        return self._data if self._data is not None else super().to_bytes()


# -- values --------------------------------------------------------------------------------


def boundary32(rng: random.Random, old: int) -> int:
    """A 32-bit value at an edge a length check must handle."""
    return (
        rng.choice(
            [
                0,
                1,
                max(0, old - 1),
                old + 1,
                old * 2,
                old // 2,
                0x7FFFFFFF,
                0x80000000,
                0xFFFFFFFF,
                MAX_FRAME,
                MAX_FRAME + 1,
                1 << 26,
                (1 << 26) + 1,
                rng.randrange(1 << 32),
                rng.randrange(1 << 16),
            ]
        )
        & 0xFFFFFFFF
    )


def _put32(raw: bytearray, at: int, value: int, endian: str) -> None:
    struct.pack_into(endian + "I", raw, at, value & 0xFFFFFFFF)


def _get32(raw: bytearray | bytes, at: int, endian: str) -> int:
    return struct.unpack_from(endian + "I", raw, at)[0]


def _packet_part(rng: random.Random, layout: Layout) -> int | None:
    packets = layout.packets()
    return rng.choice(packets) if packets else None


# -- the records ---------------------------------------------------------------------------


def record_length(rng: random.Random, layout: Layout) -> str:
    """A pcap record's captured or original length, a pcapng block's leading or trailing
    length, or an EPB's captured or original length."""
    index = _packet_part(rng, layout)
    if index is None:
        return "none"
    raw = layout.parts[index].raw
    fields = [8, 12] if layout.kind == "pcap" else [4, len(raw) - 4, 20, 24]
    at = rng.choice(fields)
    value = boundary32(rng, _get32(raw, at, layout.endian))
    _put32(raw, at, value, layout.endian)
    return f"part {index} @{at} = {value}"


def timestamp(rng: random.Random, layout: Layout) -> str:
    """A record's time: backwards, zero, the largest a field holds, or a flipped bit."""
    index = _packet_part(rng, layout)
    if index is None:
        return "none"
    raw = layout.parts[index].raw
    at = 0 if layout.kind == "pcap" else 12
    old = _get32(raw, at, layout.endian)
    choice = rng.randrange(5)
    value = [
        old - rng.randrange(1, 3600),
        0,
        0xFFFFFFFF,
        old ^ (1 << rng.randrange(32)),
        rng.randrange(1 << 32),
    ][choice]
    if layout.kind == "pcap" and rng.random() < 0.3:
        at, value = 4, rng.choice([1_000_000, 999_999_999, 0xFFFFFFFF])  # the fraction
    _put32(raw, at, value, layout.endian)
    return f"part {index} @{at} = {value & 0xFFFFFFFF}"


def block_damage(rng: random.Random, layout: Layout) -> str:
    """pcapng: a block's type, a block cut to its bare header, a junk block, a second
    interface with odd options, an EPB naming another interface. pcap: the file header's
    link type, magic, snap length or version."""
    if layout.kind == "pcap":
        at, value = rng.choice(
            [
                (20, rng.choice([0, 2, 9, 105, 127, 0xFFFF, rng.randrange(1 << 32)])),
                (16, rng.choice([0, 1, 64, 0xFFFFFFFF])),
                (4, rng.randrange(1 << 32)),
                (0, 0xA1B23C4D if layout.endian == "<" else 0x4D3CB2A1),
            ]
        )
        struct.pack_into(layout.endian + "I", layout.head, at, value)
        if at == 0:  # the nanosecond magic, in the file's own byte order
            layout.head[:4] = b"\x4d\x3c\xb2\xa1" if layout.endian == "<" else b"\xa1\xb2\x3c\x4d"
        return f"header @{at} = {value}"
    if not layout.parts:
        return "none"
    index = rng.randrange(len(layout.parts))
    raw = layout.parts[index].raw
    endian = layout.endian
    what = rng.randrange(5)
    if what == 0:
        value = rng.choice([0, 2, 3, 5, 7, IDB, EPB, 0x0A0D0D0A, rng.randrange(1 << 32)])
        _put32(raw, 0, value, endian)
        return f"type of part {index} = {value}"
    if what == 1:
        kind = _get32(raw, 0, endian)
        layout.parts[index] = Part(bytearray(struct.pack(endian + "III", kind, 12, 12)), None)
        return f"part {index} cut to 12 bytes"
    if what == 2:
        body = bytes(rng.randrange(256) for _ in range(rng.randrange(0, 64, 4)))
        kind = rng.choice([0x80000001, 0xBAD, 4, 5, 0x0BAD])
        block = struct.pack(endian + "II", kind, 12 + len(body)) + body
        block += struct.pack(endian + "I", 12 + len(body))
        layout.parts.insert(index, Part(bytearray(block), None))
        return f"junk block {kind} before part {index}"
    if what == 3:
        options = b""
        if rng.random() < 0.7:
            options += struct.pack(endian + "HH", 9, 1) + bytes([rng.randrange(256)]) + b"\0" * 3
        if rng.random() < 0.5:
            wild = rng.randrange(-(1 << 63), 1 << 63)
            offset = rng.choice([1 << 62, -(1 << 62), -(1 << 40), wild])
            options += struct.pack(endian + "HHq", 14, 8, offset)
        if rng.random() < 0.2:
            options += struct.pack(endian + "HH", rng.randrange(1, 20), 0xFFF0)  # runs past
        body = struct.pack(endian + "HHI", layout.linktype, 0, 0) + options + b"\0" * 4
        block = struct.pack(endian + "II", IDB, 12 + len(body)) + body
        block += struct.pack(endian + "I", 12 + len(body))
        layout.parts.insert(index, Part(bytearray(block), None))
        return f"interface before part {index}: {options.hex()}"
    packet = _packet_part(rng, layout)
    if packet is None:
        return "none"
    value = rng.choice([1, 2, 255, 0xFFFFFFFF])
    _put32(layout.parts[packet].raw, 8, value, endian)
    return f"interface of part {packet} = {value}"


# -- the packets ---------------------------------------------------------------------------


def drop(rng: random.Random, layout: Layout) -> str:
    if not layout.parts:
        return "none"
    index = rng.randrange(len(layout.parts))
    count = rng.choice([1, 1, 1, 2, 5])
    del layout.parts[index : index + count]
    return f"{count} from part {index}"


def duplicate(rng: random.Random, layout: Layout) -> str:
    if not layout.parts:
        return "none"
    index = rng.randrange(len(layout.parts))
    to = rng.randrange(index, len(layout.parts) + 1)
    part = layout.parts[index]
    layout.parts.insert(to, Part(bytearray(part.raw), part.packet_at))
    return f"part {index} at {to}"


def reorder(rng: random.Random, layout: Layout) -> str:
    if len(layout.parts) < 2:
        return "none"
    one = rng.randrange(len(layout.parts) - 1)
    other = min(len(layout.parts) - 1, one + rng.choice([1, 1, 2, 5, 50]))
    parts = layout.parts
    parts[one], parts[other] = parts[other], parts[one]
    return f"parts {one} and {other}"


def splice(rng: random.Random, layout: Layout) -> str:
    """Packets of another sample capture (of the same file format) in the middle."""
    donors = [s for s in samples() if s[2].kind == layout.kind]
    if not donors or not layout.parts:
        return "none"
    stem, _, donor = rng.choice(donors)
    packets = donor.packets()
    start = rng.choice(packets)
    taken = [p for p in donor.parts[start : start + rng.randrange(1, 20)] if p.packet_at]
    at = rng.randrange(len(layout.parts))
    layout.parts[at:at] = [Part(bytearray(p.raw), p.packet_at) for p in taken]
    return f"{len(taken)} packets of {stem} at {at}"


def tcp_header(rng: random.Random, layout: Layout) -> str:
    """Sequence or acknowledgement numbers, flags, ports (a land packet), header length."""
    found = _tcp_part(rng, layout)
    if found is None:
        return "none"
    index, part, where = found
    raw, base = part.raw, part.packet_at or 0
    header = base + where.header
    field = rng.randrange(5)
    if field == 0:
        at = header + rng.choice([4, 8])
        old = _get32(raw, at, ">")
        _put32(raw, at, old + rng.choice([1, -1, 1 << 31, rng.randrange(1 << 32)]), ">")
        return f"part {index} seq/ack @{at}"
    if field == 1:
        wild = rng.randrange(256)
        raw[header + 13] = rng.choice([0x02, 0x12, 0x04, 0x01, 0x11, 0x14, 0x03, wild])
        return f"part {index} flags = {raw[header + 13]:#x}"
    if field == 2:  # a land packet: from an endpoint to itself
        raw[header + 2 : header + 4] = raw[header : header + 2]
        ip = base + where.ip
        if raw[ip] >> 4 == 4:
            raw[ip + 16 : ip + 20] = raw[ip + 12 : ip + 16]
        else:
            raw[ip + 24 : ip + 40] = raw[ip + 8 : ip + 24]
        return f"part {index} land"
    if field == 3:
        raw[header + 12] = (rng.randrange(16) << 4) | (raw[header + 12] & 0x0F)
        return f"part {index} data offset = {raw[header + 12] >> 4}"
    raw[header : header + 2], raw[header + 2 : header + 4] = (
        raw[header + 2 : header + 4],
        raw[header : header + 2],
    )
    return f"part {index} ports swapped"


def resegment(rng: random.Random, layout: Layout) -> str:
    """One segment re-cut into smaller ones, some overlapping with other content (a
    retransmission that disagrees), sent in a shuffled order or not."""
    found = _tcp_part(rng, layout, payload=True)
    if found is None:
        return "none"
    index, part, where = found
    if where.payload - where.header < TCP_MIN_HEADER:  # an earlier mutation shrank it:
        return "none"  # its pieces would have no room for their sequence numbers
    base = part.packet_at or 0
    packet = bytes(part.raw[base:])
    payload = packet[where.payload : where.end]
    pieces = []
    pos = 0
    while pos < len(payload):
        size = rng.choice([1, 1, 2, 3, 7, 100])
        start = max(0, pos - rng.choice([0, 0, 0, 1, 4]))  # overlaps now and then
        piece = bytearray(payload[start : pos + size])
        if start < pos and rng.random() < 0.5:
            piece[0] ^= 0xFF  # the overlap says something else
        pieces.append((start, bytes(piece)))
        pos += size
    if rng.random() < 0.3:
        rng.shuffle(pieces)
    seq = _get32(packet, where.header + 4, ">")
    new_parts = []
    for start, piece in pieces[:2000]:
        head = bytearray(packet[: where.payload])
        _put32(head, where.header + 4, seq + start, ">")
        _set_ip_length(head, where, len(piece))
        new_parts.append(_with_packet(layout, part, bytes(head) + piece))
    layout.parts[index : index + 1] = new_parts
    return f"part {index} into {len(new_parts)}"


def _set_ip_length(head: bytearray, where: Tcp, payload: int) -> None:
    """The IP header's length field for ``payload`` bytes after the TCP header."""
    if head[where.ip] >> 4 == 4:
        struct.pack_into(">H", head, where.ip + 2, where.payload - where.ip + payload)
    else:
        struct.pack_into(">H", head, where.ip + 4, where.payload - where.header + payload)


def _with_packet(layout: Layout, part: Part, packet: bytes, wire: int | None = None) -> Part:
    """A copy of a record or EPB whose packet is ``packet`` (lengths follow it; ``wire``:
    its length on the wire, when the record was cut)."""
    endian = layout.endian
    raw = part.raw
    wire = len(packet) if wire is None else wire
    if layout.kind == "pcap":
        header = bytearray(raw[:16])
        struct.pack_into(endian + "II", header, 8, len(packet), wire)
        return Part(header + packet, 16)
    padded = packet + b"\0" * (-len(packet) % 4)
    length = EPB_DATA + len(padded) + 4
    head = bytearray(raw[:20])
    struct.pack_into(endian + "I", head, 4, length)
    block = head + struct.pack(endian + "II", len(packet), wire) + padded
    return Part(block + struct.pack(endian + "I", length), EPB_DATA)


def _tcp_part(
    rng: random.Random, layout: Layout, payload: bool = False
) -> tuple[int, Part, Tcp] | None:
    """A random TCP packet of the capture (one with payload if asked), with its offsets."""
    candidates = layout.packets()
    for _ in range(8):
        if not candidates:
            return None
        index = rng.choice(candidates)
        part = layout.parts[index]
        where = tcp(part.packet, layout.linktype)
        if where is not None and (not payload or where.end > where.payload):
            return index, part, where
    return None


HEADER_BYTES = 160  # where the link, tunnel, IP and TCP headers of a packet lie


def headers(rng: random.Random, layout: Layout) -> str:
    """A byte, a bit or a 16-bit field among a packet's first bytes (its link, tunnel and
    IP headers: lengths, flags, ids, option lengths, protocol numbers), or the record cut
    inside them as a snaplen or a truncating mirror cuts it."""
    index = _packet_part(rng, layout)
    if index is None:
        return "none"
    part = layout.parts[index]
    base = part.packet_at or 0
    span = min(len(part.raw) - base, HEADER_BYTES)
    if span < 2:
        return "none"
    at = base + rng.randrange(span - 1)
    what = rng.randrange(4)
    if what == 0:
        part.raw[at] ^= 1 << rng.randrange(8)
        return f"part {index} bit @{at - base}"
    if what == 1:
        part.raw[at] = rng.choice([0, 1, 0x0F, 0x40, 0x45, 0x60, 0x7F, 0x80, 0xFF])
        return f"part {index} byte @{at - base} = {part.raw[at]}"
    if what == 2:
        old = struct.unpack_from(">H", part.raw, at)[0]
        value = rng.choice([0, 1, 7, 8, 0xFFFF, old + 1, max(0, old - 1), old * 2]) & 0xFFFF
        struct.pack_into(">H", part.raw, at, value)
        return f"part {index} word @{at - base} = {value}"
    packet = part.packet
    keep = rng.randrange(1, span)
    layout.parts[index] = _with_packet(layout, part, packet[:keep], len(packet))
    return f"part {index} cut to {keep} of {len(packet)}"


def ip_fragments(rng: random.Random, layout: Layout) -> str:
    """A TCP packet's IP payload cut into fragments (IPv4, or IPv6 with a fragment
    header), then reordered, one repeated, two overlapping or one lost."""
    found = _tcp_part(rng, layout)
    if found is None:
        return "none"
    index, part, where = found
    packet = part.packet
    ip, payload = packet[where.ip : where.end], where.header - where.ip
    if len(ip) - payload < 16:
        return "none"
    size = rng.choice([8, 16, 24, 48, 64])
    ident = rng.randrange(1 << 16)
    pieces = []
    for start in range(0, len(ip) - payload, size):
        piece = ip[payload + start : payload + start + size]
        more = start + size < len(ip) - payload
        pieces.append(_fragment(ip[:payload], start, piece, more, ident))
    what = rng.randrange(4)
    if what == 0:
        rng.shuffle(pieces)
    elif what == 1:
        pieces.insert(rng.randrange(len(pieces) + 1), rng.choice(pieces))
    elif what == 2 and len(pieces) > 1:
        pieces[1] = _fragment(
            ip[:payload], size - 8, ip[payload + size - 8 : payload + 2 * size], True, ident
        )
    else:
        del pieces[rng.randrange(len(pieces))]
    link = packet[: where.ip]
    layout.parts[index : index + 1] = [_with_packet(layout, part, link + p) for p in pieces]
    return f"part {index} into {len(pieces)} fragments of {size} ({what})"


def _fragment(header: bytes, start: int, piece: bytes, more: bool, ident: int) -> bytes:
    """One fragment of the datagram whose header (IPv4, or IPv6 without extension
    headers) is ``header``, ``piece`` at ``start`` of its payload."""
    if header[0] >> 4 == 4:
        head = bytearray(header)
        field = (0x2000 if more else 0) | start // 8
        struct.pack_into(">HHH", head, 2, len(head) + len(piece), ident, field)
        return bytes(head) + piece
    head = bytearray(header[:40])
    protocol = head[6]
    head[6] = 44
    struct.pack_into(">H", head, 4, 8 + len(piece))
    extension = struct.pack(">BBHI", protocol, 0, (start // 8) << 3 | more, ident)
    return bytes(head) + extension + piece


# -- the streams ---------------------------------------------------------------------------


def stream_length(rng: random.Random, layout: Layout) -> str:
    """A length field inside a TCP payload: a big-endian word small enough to be one
    (Pulsar totalSize, commandSize, metadata sizes; Kafka sizes and message lengths)."""
    found = _tcp_part(rng, layout, payload=True)
    if found is None:
        return "none"
    index, part, where = found
    base = part.packet_at or 0
    start, end = base + where.payload, base + where.end
    raw = part.raw
    words = [at for at in range(start, end - 3) if 0 < _get32(raw, at, ">") < 1 << 24]
    at = rng.choice(words) if words and rng.random() < 0.8 else start
    if at + 4 > len(raw):
        return "none"
    value = boundary32(rng, _get32(raw, at, ">"))
    _put32(raw, at, value, ">")
    return f"part {index} payload @{at - start} = {value}"


def tls_record(rng: random.Random, layout: Layout) -> str:
    """A TLS record in a TCP payload: its header (type, version, length), a byte of its
    body, or the type and 24-bit length of the handshake message it starts with."""
    records = []
    for index in layout.packets():
        part = layout.parts[index]
        where = tcp(part.packet, layout.linktype)
        if where is None:
            continue
        at = (part.packet_at or 0) + where.payload
        raw = part.raw
        if where.end - where.payload >= 6 and 20 <= raw[at] <= 23 and raw[at + 1] == 3:
            records.append((index, at, (part.packet_at or 0) + where.end))
    if not records:
        return "none"
    index, at, end = rng.choice(records)
    raw = layout.parts[index].raw
    target = rng.choice(["type", "version", "length", "body", "handshake"])
    if target == "type":
        raw[at] = rng.choice([0, 20, 21, 22, 23, 24, 25, 255])
    elif target == "version":
        raw[at + 1 : at + 3] = rng.choice([b"\x03\x05", b"\x02\x00", b"\xff\xff", b"\x03\x01"])
    elif target == "length":
        old = raw[at + 3] << 8 | raw[at + 4]
        new = rng.choice([0, 1, old - 1, old + 1, 16384 + 256, 16384 + 257, 16384 + 2049, 0xFFFF])
        raw[at + 3 : at + 5] = (new & 0xFFFF).to_bytes(2, "big")
    elif target == "body" and end > at + 5:
        raw[rng.randrange(at + 5, end)] ^= 1 << rng.randrange(8)
    elif end >= at + 9:  # a handshake message's type and length (the first in the record)
        raw[at + 5] = rng.choice([raw[at + 5], 0, 1, 2, 4, 8, 11, 20, 24, 255])
        raw[at + 6 : at + 9] = rng.choice([b"\xff\xff\xff", b"\x00\x00\x00", b"\x04\x00\x01"])
    return f"part {index} TLS {target}"


# -- the file ------------------------------------------------------------------------------


def flip_bits(rng: random.Random, data: bytes) -> bytes:
    damaged = bytearray(data)
    for _ in range(rng.choice([1, 1, 2, 4, 8])):
        at = rng.randrange(len(damaged)) if damaged else None
        if at is not None:
            damaged[at] ^= 1 << rng.randrange(8)
    return bytes(damaged)


def set_bytes(rng: random.Random, data: bytes) -> bytes:
    damaged = bytearray(data)
    for _ in range(rng.randrange(1, 5)):
        if damaged:
            damaged[rng.randrange(len(damaged))] = rng.choice([0, 0xFF, 0x7F, 0x80, 1])
    return bytes(damaged)


def truncate(rng: random.Random, data: bytes) -> bytes:
    if rng.random() < 0.5:
        return data[: rng.randrange(len(data) + 1)]
    return data[: max(0, len(data) - rng.randrange(1, 64))]


def append(rng: random.Random, data: bytes) -> bytes:
    """Zero padding, junk, or a part of the file again after its end."""
    size = rng.choice([1, 3, 16, 4096])
    tail = rng.choice([b"\0" * size, rng.randbytes(size), data[-size:]])
    return data + tail


def compress(rng: random.Random, data: bytes) -> bytes:
    """The capture gzipped, now and then cut, with a damaged trailer, or with junk after."""
    packed = bytearray(gzip.compress(data, mtime=0))
    damage = rng.randrange(5)
    if damage == 1:
        return bytes(packed[: rng.randrange(10, len(packed))])
    if damage == 2:
        packed[-8 + rng.randrange(8)] ^= 0xFF  # CRC or size
    if damage == 3:
        packed += rng.choice([b"\0" * 64, rng.randbytes(64), gzip.compress(b"", mtime=0)])
    return bytes(packed)


Operation = Callable[[random.Random, Layout], str] | Callable[[random.Random, bytes], bytes]

_TABLE: list[tuple[str, Operation, int]] = [
    ("record_length", record_length, 8),
    ("timestamp", timestamp, 5),
    ("block_damage", block_damage, 6),
    ("drop", drop, 6),
    ("duplicate", duplicate, 6),
    ("reorder", reorder, 6),
    ("splice", splice, 4),
    ("tcp_header", tcp_header, 6),
    ("resegment", resegment, 4),
    ("headers", headers, 10),
    ("ip_fragments", ip_fragments, 4),
    ("stream_length", stream_length, 14),
    ("tls_record", tls_record, 8),
    ("flip_bits", flip_bits, 12),
    ("set_bytes", set_bytes, 6),
    ("truncate", truncate, 6),
    ("append", append, 2),
    ("compress", compress, 2),
]
OPERATIONS = [(name, operation) for name, operation, _ in _TABLE]
WEIGHTS = [weight for *_, weight in _TABLE]
LAYOUT_OPERATIONS = {
    "record_length",
    "timestamp",
    "block_damage",
    "drop",
    "duplicate",
    "reorder",
    "splice",
    "tcp_header",
    "resegment",
    "headers",
    "ip_fragments",
    "stream_length",
    "tls_record",
}
