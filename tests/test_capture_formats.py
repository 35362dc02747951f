"""Every container, link type and IP variant pwcap.capture reads gives the same streams.

One real sample (``pulsar_plain.pcap``: Ethernet, little-endian microsecond pcap) is
rewritten here into other files (pcap byte orders and resolutions, pcapng blocks, gzip,
link layers, IPv6 with extension headers, IPv4 fragments), and each must read back into
exactly the streams, segment timestamps and close reasons of the original (whose own
bytes and timestamps ``test_capture_samples`` checks against dpkt and the broker journal).
The writers are small and follow the format specifications, not the reader.
"""

from __future__ import annotations

import gzip
import io
import random
import struct
import zlib
from collections.abc import Callable
from functools import cache
from pathlib import Path

import pytest

from fuzz.pcapfile import read_pcap
from fuzz.stream_sink import RecordingSink
from pwcap.capture import CaptureError, CaptureStats, read_streams, records
from tests.conftest import SAMPLES

SAMPLE = SAMPLES / "pulsar_plain.pcap"
Source = str | Path | io.BytesIO | bytes

# -- the sample, as (timestamp in µs, IP packet) -------------------------------------------


@cache
def ip_packets() -> tuple[tuple[int, bytes], ...]:
    packets = []
    for record in read_pcap(SAMPLE).records:
        assert record.data[12:14] == b"\x08\x00" and record.orig_len == len(record.data)
        packets.append((record.ts_us, record.data[14:]))
    return tuple(packets)


def read(source: Source) -> tuple[RecordingSink, CaptureStats]:
    sink = RecordingSink()
    stats = read_streams(source, sink)
    return sink, stats


def streams(sink: RecordingSink) -> dict[tuple[int, int], tuple]:
    """Per connection (client port, server port): its close reason, and per direction the
    delivered pieces with their offsets and timestamps. IP addresses are left out so an
    IPv6 rewrite compares too."""
    summary = {}
    for recorded in sink.connections.values():
        conn = recorded.conn
        summary[conn.client_port, conn.server_port] = (
            recorded.close_reason,
            [(s.pieces, s.timestamps) for s in recorded.streams],
        )
    return summary


@cache
def original() -> dict[tuple[int, int], tuple]:
    return streams(read(SAMPLE)[0])


def without_timestamps(summary: dict[tuple[int, int], tuple]) -> dict[tuple[int, int], tuple]:
    return {
        key: (reason, [(pieces, [(o, n) for o, n, _ in stamps]) for pieces, stamps in dirs])
        for key, (reason, dirs) in summary.items()
    }


# -- link layers ----------------------------------------------------------------------------

MACS = bytes.fromhex("020000000002020000000001")


def ethertype(ip: bytes) -> int:
    return 0x0800 if ip[0] >> 4 == 4 else 0x86DD


def ethernet(ip: bytes, tags: tuple[int, ...] = ()) -> bytes:
    """An Ethernet frame; ``tags`` are the TPIDs of the VLAN tags, outermost first."""
    vlans = b"".join(struct.pack(">HH", tpid, 100 + i) for i, tpid in enumerate(tags))
    return MACS + vlans + struct.pack(">H", ethertype(ip)) + ip


def null(ip: bytes, order: str) -> bytes:
    """BSD loopback: the address family in the byte order of the host that wrote it."""
    family = 2 if ip[0] >> 4 == 4 else 30
    return struct.pack(order + "I", family) + ip


def sll(ip: bytes) -> bytes:
    """Linux cooked v1: packet type, ARPHRD, address length, 8 address bytes, protocol."""
    return struct.pack(">HHH8sH", 0, 772, 6, b"\x00" * 6, ethertype(ip)) + ip


def sll2(ip: bytes) -> bytes:
    """Linux cooked v2: protocol, reserved, interface index, ARPHRD, type, address."""
    return struct.pack(">HHIHBB8s", ethertype(ip), 0, 1, 772, 0, 6, b"\x00" * 6) + ip


def with_ip_options(ip: bytes) -> bytes:
    """The IPv4 packet with 8 bytes of options (NOPs, then end of list) in its header."""
    header = (ip[0] & 0x0F) * 4
    (total,) = struct.unpack_from(">H", ip, 2)
    head = bytearray(ip[:header] + b"\x01" * 7 + b"\x00")
    head[0] = 0x40 | (header + 8) // 4
    struct.pack_into(">H", head, 2, total + 8)
    return bytes(head) + ip[header:]


LINKS: dict[str, tuple[int, Callable[[bytes], bytes]]] = {
    "ethernet_with_trailer": (1, lambda ip: ethernet(ip) + b"\xee" * 6),  # padding, FCS
    "ethernet_ipv4_options": (1, lambda ip: ethernet(with_ip_options(ip))),
    "ethernet_802.1q": (1, lambda ip: ethernet(ip, (0x8100,))),
    "ethernet_qinq": (1, lambda ip: ethernet(ip, (0x88A8, 0x8100))),
    "null_little_endian": (0, lambda ip: null(ip, "<")),
    "null_big_endian": (0, lambda ip: null(ip, ">")),
    "loop": (108, lambda ip: null(ip, ">")),
    "raw_101": (101, bytes),
    "raw_12": (12, bytes),  # DLT_RAW's number on some BSDs
    "raw_14": (14, bytes),  # ... and on OpenBSD
    "raw_ipv4_228": (228, bytes),
    "linux_sll": (113, sll),
    "linux_sll2": (276, sll2),
}

# -- classic pcap -----------------------------------------------------------------------------


def pcap(
    frames: list[tuple[int, bytes]], linktype: int, order: str = "<", nanos: bool = False
) -> bytes:
    """A classic pcap. Nanosecond files get 999 ns past each microsecond, which a reader
    must drop (floor), not round."""
    magic = 0xA1B23C4D if nanos else 0xA1B2C3D4
    parts = [struct.pack(order + "IHHiIII", magic, 2, 4, 0, 0, 262144, linktype)]
    for ts, frame in frames:
        sec, frac = divmod(ts, 1_000_000)
        if nanos:
            frac = frac * 1000 + 999
        parts.append(struct.pack(order + "IIII", sec, frac, len(frame), len(frame)) + frame)
    return b"".join(parts)


def framed(link: Callable[[bytes], bytes]) -> list[tuple[int, bytes]]:
    return [(ts, link(ip)) for ts, ip in ip_packets()]


@pytest.mark.parametrize("order", ["<", ">"], ids=["little_endian", "big_endian"])
@pytest.mark.parametrize("nanos", [False, True], ids=["microsecond", "nanosecond"])
def test_pcap_byte_orders_and_resolutions(order: str, nanos: bool) -> None:
    data = pcap(framed(ethernet), 1, order, nanos)
    assert streams(read(data)[0]) == original()


@pytest.mark.parametrize("name", list(LINKS))
def test_link_types(name: str) -> None:
    linktype, link = LINKS[name]
    sink, stats = read(pcap(framed(link), linktype))
    assert streams(sink) == original()
    assert stats.malformed == stats.unsupported_link == stats.non_tcp == 0


def test_traffic_other_than_tcp_is_skipped() -> None:
    arp = MACS + b"\x08\x06" + bytes(28)
    udp = bytes.fromhex("4500001c000000004011000008080808c0a80001") + bytes(8)
    icmp6 = struct.pack(">IHBB", 6 << 28, 8, 58, 64) + bytes(32) + bytes(8)
    frames = []
    for ts, frame in framed(ethernet):
        frames += [(ts, arp), (ts, ethernet(udp)), (ts, frame), (ts, ethernet(icmp6))]
    sink, stats = read(pcap(frames, 1))
    assert streams(sink) == original()
    assert stats.non_tcp == 2 * len(ip_packets())  # ARP and ICMPv6
    assert stats.udp_not_tunnel == len(ip_packets())  # counted apart, by port
    assert stats.udp_ports == {0: len(ip_packets())}
    assert stats.malformed == 0


# -- IPv6 -------------------------------------------------------------------------------------

HOP_BY_HOP, DESTINATION_OPTIONS, TCP = 0, 60, 6


def ipv6(ip: bytes, extensions: bool) -> bytes:
    """The IPv4 packet's TCP segment in IPv6 (2001:db8::/96 + the IPv4 address), behind a
    hop-by-hop and a destination-options header (padded with PadN) when ``extensions``."""
    header = (ip[0] & 0x0F) * 4
    (total,) = struct.unpack_from(">H", ip, 2)
    tcp = ip[header:total]
    chain = b""
    first = TCP
    if extensions:
        hop = struct.pack(">BBBB4s", DESTINATION_OPTIONS, 0, 1, 4, b"\x00" * 4)
        dest = struct.pack(">BBBB12s", TCP, 1, 1, 12, b"\x00" * 12)
        chain, first = hop + dest, HOP_BY_HOP
    prefix = bytes.fromhex("20010db8") + bytes(8)
    fixed = struct.pack(">IHBB", 6 << 28, len(chain) + len(tcp), first, 64)
    return fixed + prefix + ip[12:16] + prefix + ip[16:20] + chain + tcp


@pytest.mark.parametrize(
    ("linktype", "link", "extensions"),
    [
        (229, bytes, False),
        (229, bytes, True),
        (1, ethernet, True),
        (0, lambda ip: null(ip, "<"), True),
    ],
    ids=[
        "raw_ipv6_229",
        "raw_ipv6_extension_headers",
        "ethernet_ipv6_extension_headers",
        "null_ipv6",
    ],
)
def test_ipv6(linktype: int, link: Callable[[bytes], bytes], extensions: bool) -> None:
    frames = [(ts, link(ipv6(ip, extensions))) for ts, ip in ip_packets()]
    sink, _ = read(pcap(frames, linktype))
    assert streams(sink) == original()
    (recorded,) = sink.connections.values()
    assert recorded.conn.client_ip == "2001:db8::7f00:1"


def without_ip_length(ip: bytes) -> bytes:
    """The packet as captured before segmentation offload split it: IP length 0."""
    field = 2 if ip[0] >> 4 == 4 else 4
    return ip[:field] + b"\x00\x00" + ip[field + 2 :]


@pytest.mark.parametrize(
    ("linktype", "link"),
    [
        (1, lambda ip: ethernet(without_ip_length(ip))),
        (276, lambda ip: sll2(without_ip_length(ipv6(ip, extensions=True)))),
    ],
    ids=["ethernet_ipv4", "linux_sll2_ipv6"],
)
def test_an_ip_length_of_zero_means_up_to_the_end_of_the_frame(
    linktype: int, link: Callable[[bytes], bytes]
) -> None:
    sink, stats = read(pcap(framed(link), linktype))
    assert streams(sink) == original()
    assert stats.truncated == stats.gaps == 0


# -- IPv4 fragments -----------------------------------------------------------------------


def fragments(ip: bytes, ident: int, size: int) -> list[bytes]:
    """The packet split into IPv4 fragments of ``size`` payload bytes (a multiple of 8)."""
    header = (ip[0] & 0x0F) * 4
    (total,) = struct.unpack_from(">H", ip, 2)
    payload = ip[header:total]
    pieces = []
    for start in range(0, len(payload), size):
        piece = payload[start : start + size]
        more = 0x2000 if start + size < len(payload) else 0
        head = bytearray(ip[:header])
        struct.pack_into(">HHH", head, 2, header + len(piece), ident, more | start // 8)
        struct.pack_into(">H", head, 10, 0)
        pieces.append(bytes(head) + piece)
    return pieces


@pytest.mark.parametrize("size", [8, 48], ids=["tcp_header_split", "payload_split"])
def test_ipv4_fragments_are_put_back_together_in_any_order(size: int) -> None:
    frames = []
    split = 0
    for index, (ts, ip) in enumerate(ip_packets()):
        pieces = fragments(ip, ident=index, size=size)
        if len(pieces) > 1:
            split += 1
            if index % 2:
                pieces.reverse()  # the last fragment first: the length is known early
            else:
                pieces.insert(1, pieces[0])  # a fragment seen twice
        frames += [(ts, ethernet(piece)) for piece in pieces]
    sink, stats = read(pcap(frames, 1))
    assert split > 50
    assert stats.fragments_reassembled == split
    assert stats.fragments_dropped == 0
    assert streams(sink) == original()


# -- pcapng -----------------------------------------------------------------------------------

SHB, IDB, PB, SPB, NRB, EPB = 0x0A0D0D0A, 1, 2, 3, 4, 6
MICRO, NANO, BINARY_20 = 6, 9, 0x80 | 20  # if_tsresol codes
EPOCH_2026 = 1_767_225_600  # an if_tsoffset, in seconds


class Pcapng:
    """Writes pcapng blocks of one section at a time, each section in its own byte order."""

    def __init__(self) -> None:
        self.parts: list[bytes] = []
        self.order = "<"
        self.interfaces: list[tuple[int, int]] = []  # per interface: tsresol, tsoffset

    def block(self, kind: int, body: bytes) -> None:
        padded = body + b"\x00" * (-len(body) % 4)
        length = 12 + len(padded)
        self.parts.append(
            struct.pack(self.order + "II", kind, length)
            + padded
            + struct.pack(self.order + "I", length)
        )

    def option(self, code: int, value: bytes) -> bytes:
        return (
            struct.pack(self.order + "HH", code, len(value)) + value + b"\x00" * (-len(value) % 4)
        )

    def section(self, order: str) -> None:
        self.order = order
        self.interfaces = []
        body = struct.pack(order + "IHHq", 0x1A2B3C4D, 1, 0, -1)
        self.block(SHB, body + self.option(4, b"pwcap tests") + self.option(0, b""))

    def interface(self, linktype: int, tsresol: int = MICRO, tsoffset: int = 0) -> int:
        options = self.option(2, b"lo")  # if_name, before the options that matter
        if tsresol != MICRO:
            options += self.option(9, bytes([tsresol]))
        if tsoffset:
            options += self.option(14, struct.pack(self.order + "q", tsoffset))
        self.block(
            IDB, struct.pack(self.order + "HHI", linktype, 0, 0) + options + self.option(0, b"")
        )
        self.interfaces.append((tsresol, tsoffset))
        return len(self.interfaces) - 1

    def units(self, interface: int, ts_us: int) -> int:
        """The timestamp in the interface's units, the smallest that means ``ts_us``."""
        tsresol, tsoffset = self.interfaces[interface]
        ts_us -= tsoffset * 1_000_000
        if tsresol == NANO:
            return ts_us * 1000 + 999
        if tsresol == BINARY_20:
            return -(-ts_us * 2**20 // 10**6)
        return ts_us

    def enhanced(self, interface: int, ts_us: int, frame: bytes, orig_len: int = 0) -> None:
        ts = self.units(interface, ts_us)
        head = struct.pack(
            self.order + "IIIII",
            interface,
            ts >> 32,
            ts & 0xFFFFFFFF,
            len(frame),
            orig_len or len(frame),
        )
        self.block(EPB, head + frame + self.option(1, b"a comment"))

    def obsolete(self, interface: int, ts_us: int, frame: bytes) -> None:
        ts = self.units(interface, ts_us)
        head = struct.pack(
            self.order + "HHIIII", interface, 0, ts >> 32, ts & 0xFFFFFFFF, len(frame), len(frame)
        )
        self.block(PB, head + frame)

    def simple(self, frame: bytes) -> None:
        self.block(SPB, struct.pack(self.order + "I", len(frame)) + frame)

    def name_resolution(self) -> None:
        record = struct.pack(self.order + "HH", 1, 14) + bytes([127, 0, 0, 1]) + b"localhost\x00"
        self.block(NRB, record + b"\x00" * 2 + struct.pack(self.order + "HH", 0, 0))

    def bytes(self) -> bytes:
        return b"".join(self.parts)


def sample_pcapng(order: str = "<", tsresol: int = MICRO) -> tuple[bytes, list[int]]:
    """The sample as one pcapng section of Ethernet enhanced packet blocks, and the file
    offset where each packet block ends."""
    writer = Pcapng()
    writer.section(order)
    writer.interface(1, tsresol)
    ends = []
    for ts, frame in framed(ethernet):
        writer.enhanced(0, ts, frame)
        ends.append(sum(map(len, writer.parts)))
    return writer.bytes(), ends


@pytest.mark.parametrize("order", ["<", ">"], ids=["little_endian", "big_endian"])
@pytest.mark.parametrize("tsresol", [MICRO, NANO, BINARY_20], ids=["us", "ns", "2^-20s"])
def test_pcapng_enhanced_packet_blocks(order: str, tsresol: int) -> None:
    data, _ = sample_pcapng(order, tsresol)
    assert streams(read(data)[0]) == original()


def sectioned_pcapng() -> bytes:
    """The sample in three sections of alternating byte orders; each declares its own two
    interfaces, so interface 0 means a different link type and clock in each."""
    writer = Pcapng()
    packets = ip_packets()
    third = len(packets) // 3
    sections = [packets[:third], packets[third : 2 * third], packets[2 * third :]]
    for number, part in enumerate(sections):
        writer.section("<" if number % 2 == 0 else ">")
        writer.name_resolution()
        if number == 1:
            interfaces = [
                (writer.interface(101, BINARY_20), bytes),
                (writer.interface(113, NANO, EPOCH_2026), sll),
            ]
        else:
            interfaces = [
                (writer.interface(1, NANO), ethernet),
                (writer.interface(228, BINARY_20, EPOCH_2026), bytes),
            ]
        for index, (ts, ip) in enumerate(part):
            interface, link = interfaces[index % 2]
            writer.enhanced(interface, ts, link(ip))
    return writer.bytes()


def test_pcapng_sections_with_interfaces_of_different_link_types_and_resolutions() -> None:
    assert streams(read(sectioned_pcapng())[0]) == original()


@pytest.mark.parametrize("order", ["<", ">"], ids=["little_endian", "big_endian"])
def test_pcapng_obsolete_packet_blocks(order: str) -> None:
    writer = Pcapng()
    writer.section(order)
    writer.interface(1, NANO)
    for ts, frame in framed(ethernet):
        writer.obsolete(0, ts, frame)
    assert streams(read(writer.bytes())[0]) == original()


@pytest.mark.parametrize("order", ["<", ">"], ids=["little_endian", "big_endian"])
def test_pcapng_simple_packet_blocks_carry_no_timestamp_but_the_same_bytes(order: str) -> None:
    writer = Pcapng()
    writer.section(order)
    writer.interface(1)
    for _, frame in framed(ethernet):
        writer.simple(frame)
    assert without_timestamps(streams(read(writer.bytes())[0])) == without_timestamps(original())


def test_pcapng_packets_cut_by_the_snaplen_give_the_same_gaps_as_in_pcap() -> None:
    capture = SAMPLES / "pulsar_snaplen96.pcap"
    writer = Pcapng()
    writer.section(">")
    writer.interface(1, NANO)
    for record in read_pcap(capture).records:
        writer.enhanced(0, record.ts_us, record.data, record.orig_len)
    sink, stats = read(writer.bytes())
    expected_sink, expected_stats = read(capture)
    assert stats.truncated == expected_stats.truncated > 0
    assert streams(sink) == streams(expected_sink)
    (recorded,) = sink.connections.values()
    assert all(stream.gaps for stream in recorded.streams)


# -- sources: path, file object, bytes, gzip --------------------------------------------------


def sources(tmp_path: Path, data: bytes, name: str) -> dict[str, Source]:
    path = tmp_path / name
    path.write_bytes(data)
    return {"str": str(path), "path": path, "fileobj": io.BytesIO(data), "bytes": data}


def test_every_kind_of_source_reads_the_same(tmp_path: Path) -> None:
    data = SAMPLE.read_bytes()
    for kind, source in sources(tmp_path, data, "plain.pcap").items():
        assert streams(read(source)[0]) == original(), kind


def test_gzip_compressed_captures_are_read_transparently(tmp_path: Path) -> None:
    data = SAMPLE.read_bytes()
    half = len(data) // 2
    packed = {
        "pcap": gzip.compress(data),
        "pcapng": gzip.compress(sample_pcapng(">", NANO)[0]),
        "pcap_in_two_members": gzip.compress(data[:half]) + gzip.compress(data[half:]),
    }
    for container, compressed in packed.items():
        for kind, source in sources(tmp_path, compressed, f"{container}.gz").items():
            assert streams(read(source)[0]) == original(), (container, kind)


class Trickle(io.RawIOBase):
    """A stream that cannot seek or peek and returns at most 3 bytes per read (a pipe)."""

    def __init__(self, data: bytes) -> None:
        super().__init__()
        self._data = io.BytesIO(data)

    def readable(self) -> bool:
        return True

    def readinto(self, buffer: bytearray) -> int:  # type: ignore[override]
        piece = self._data.read(min(len(buffer), 3))
        buffer[: len(piece)] = piece
        return len(piece)


def test_a_stream_that_returns_a_few_bytes_per_read() -> None:
    data = SAMPLE.read_bytes()
    for container, source in (("pcap", data), ("pcap.gz", gzip.compress(data))):
        assert streams(read(Trickle(source))[0]) == original(), container


@pytest.mark.parametrize("chunk", [13, 64, 1000])
def test_records_spanning_read_chunks(monkeypatch: pytest.MonkeyPatch, chunk: int) -> None:
    """The reader pulls the file in chunks; a record or block split between two chunks
    (which a 4 MiB chunk leaves to large captures) is read whole."""
    monkeypatch.setattr(records, "CHUNK", chunk)
    data = SAMPLE.read_bytes()
    for container, source in (
        ("pcap", data),
        ("pcapng", sample_pcapng()[0]),
        ("pcapng_sections", sectioned_pcapng()),
        ("pcap.gz", gzip.compress(data)),
    ):
        assert streams(read(source)[0]) == original(), container


# -- errors -----------------------------------------------------------------------------------

NOT_CAPTURES = {
    "text": b"these are not the packets you are looking for\n" * 20,
    "empty": b"",
    "random": random.Random(3).randbytes(4096),
    "gzip_text": gzip.compress(b"plain text, compressed\n" * 50),
}


@pytest.mark.parametrize("content", list(NOT_CAPTURES))
def test_not_a_capture_is_a_one_line_error_and_nothing_delivered(
    tmp_path: Path, content: str
) -> None:
    for kind, source in sources(tmp_path, NOT_CAPTURES[content], "input.pcap").items():
        sink = RecordingSink()
        with pytest.raises(CaptureError) as caught:
            read_streams(source, sink)
        message = str(caught.value)
        assert message and "\n" not in message, kind
        assert not caught.value.truncated, kind
        assert sink.events == 0, kind


def sample_pcap() -> tuple[bytes, list[int]]:
    """The sample's bytes, and the file offset where each record ends."""
    data = SAMPLE.read_bytes()
    ends = []
    offset = 24
    while offset < len(data):
        (caplen,) = struct.unpack_from("<I", data, offset + 8)
        offset += 16 + caplen
        ends.append(offset)
    return data, ends


CUTS = {
    "pcap_in_a_record_header": ("pcap", 6),
    "pcap_in_record_data": ("pcap", 40),
    "pcapng_in_a_block_header": ("pcapng", 6),
    "pcapng_in_block_data": ("pcapng", 40),
    "pcap_gz_in_the_compressed_stream": ("pcap.gz", 0),
}


@pytest.mark.parametrize("case", list(CUTS))
def test_a_capture_cut_mid_record_delivers_everything_before_the_cut_then_fails(
    tmp_path: Path, case: str
) -> None:
    container, into = CUTS[case]
    data, ends = sample_pcapng() if container == "pcapng" else sample_pcap()
    if container == "pcap.gz":
        packed = gzip.compress(data)
        cut = packed[: len(packed) // 2]
        available = len(zlib.decompressobj(wbits=31).decompress(cut))
    else:
        cut = data[: ends[len(ends) * 2 // 3] + into]
        available = len(cut)
    complete = data[: max(end for end in ends if end <= available)]
    assert ends[0] < len(complete) < available < len(data)
    expected = streams(read(complete)[0])
    for kind, source in sources(tmp_path, cut, f"cut.{container}").items():
        sink = RecordingSink()
        with pytest.raises(CaptureError) as caught:
            read_streams(source, sink)
        assert caught.value.truncated, kind
        assert "\n" not in str(caught.value), kind
        assert streams(sink) == expected, kind
        assert {r.close_reason for r in sink.connections.values()} == {"end_of_capture"}, kind
