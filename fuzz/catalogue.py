"""The catalogue of bad inputs in ``docs/robustness.md``: each made here, decoded by the
``pwcap decode`` command, and its answer written down as pwcap gave it.

    python -m fuzz.catalogue > docs/robustness.md

Each entry says what answer it expects (refused, cut off, a kind of anomaly, or a clean
decode); :func:`answers` decodes them all and a test checks both that every answer is the
one expected and that the document is the one this module writes.
"""

from __future__ import annotations

import contextlib
import gzip
import io
import struct
import sys
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from tempfile import TemporaryDirectory

import pyarrow.parquet as pq

from fuzz.layout import Layout, tcp
from fuzz.mutate import SAMPLES, samples
from fuzz.pcapfile import read_pcap, write_pcapng
from pwcap.cli import main as pwcap

REFUSED = "refused"  # exit 1, one error line, no dataset
CUT = "cut"  # exit 3, a warning line, the dataset written with a truncated_capture row
CLEAN = "clean"  # exit 0, no anomaly


@dataclass(frozen=True)
class Entry:
    layer: str
    what: str
    build: Callable[[], bytes]
    expect: str  # REFUSED, CUT, CLEAN or an anomaly kind


@dataclass(frozen=True)
class Answer:
    status: int
    lines: tuple[str, ...]  # what pwcap wrote to standard error, the file named FILE
    kinds: tuple[str, ...]  # anomaly kinds in the dataset, sorted

    def meets(self, expect: str) -> bool:
        if expect == REFUSED:
            return self.status == 1 and len(self.lines) == 1 and "error" in self.lines[0]
        if expect == CUT:
            return self.status == 3 and "truncated_capture" in self.kinds
        if expect == CLEAN:
            return self.status == 0 and not self.kinds
        return self.status in (0, 3) and expect in self.kinds


def sample(stem: str) -> Layout:
    return next(layout for name, _, layout in samples() if name == stem).copy()


def edited(stem: str, edit: Callable[[Layout], object]) -> Callable[[], bytes]:
    """A sample capture with ``edit`` applied to its layout."""

    def build() -> bytes:
        layout = sample(stem)
        edit(layout)
        return layout.to_bytes()

    return build


def in_payload(index: int, at: int, value: bytes) -> Callable[[Layout], None]:
    """Bytes written at ``at`` into the TCP payload of part ``index`` (negative: from its
    end)."""

    def edit(layout: Layout) -> None:
        part = layout.parts[index]
        base = part.packet_at or 0
        where = tcp(part.packet, layout.linktype)
        assert where is not None
        start = base + (where.payload if at >= 0 else where.end) + at
        part.raw[start : start + len(value)] = value

    return edit


def flipped(index: int, at: int) -> Callable[[Layout], None]:
    def edit(layout: Layout) -> None:
        part = layout.parts[index]
        where = tcp(part.packet, layout.linktype)
        assert where is not None
        base = (part.packet_at or 0) + (where.payload if at >= 0 else where.end)
        part.raw[base + at] ^= 0xFF

    return edit


def record_field(index: int, at: int, value: int) -> Callable[[Layout], None]:
    def edit(layout: Layout) -> None:
        struct.pack_into(layout.endian + "I", layout.parts[index].raw, at, value)

    return edit


def header_field(at: int, value: int) -> Callable[[Layout], None]:
    def edit(layout: Layout) -> None:
        struct.pack_into(layout.endian + "I", layout.head, at, value)

    return edit


def raw(stem: str, change: Callable[[bytes], bytes]) -> Callable[[], bytes]:
    return lambda: change(next(data for name, data, _ in samples() if name == stem))


def land(layout: Layout) -> None:
    """The first packet (a SYN) sent from an endpoint to itself."""
    part = layout.parts[0]
    where = tcp(part.packet, layout.linktype)
    assert where is not None
    ip, header = (part.packet_at or 0) + where.ip, (part.packet_at or 0) + where.header
    part.raw[ip + 16 : ip + 20] = part.raw[ip + 12 : ip + 16]
    part.raw[header + 2 : header + 4] = part.raw[header : header + 2]


def backwards(layout: Layout) -> None:
    """Every second record timed an hour before the one it follows."""
    for part in layout.parts[1::2]:
        seconds = struct.unpack_from(layout.endian + "I", part.raw)[0]
        struct.pack_into(layout.endian + "I", part.raw, 0, seconds - 3600)


def lose(index: int, count: int = 1) -> Callable[[Layout], None]:
    def edit(layout: Layout) -> None:
        del layout.parts[index : index + count]

    return edit


def repeat(index: int) -> Callable[[Layout], None]:
    def edit(layout: Layout) -> None:
        layout.parts.insert(index + 1, layout.parts[index])

    return edit


def swap(index: int) -> Callable[[Layout], None]:
    def edit(layout: Layout) -> None:
        parts = layout.parts
        parts[index], parts[index + 1] = parts[index + 1], parts[index]

    return edit


def headers_only(layout: Layout) -> None:
    """Every pcap record cut after its first 66 bytes (Ethernet, IPv4 and a TCP header
    with options), as ``tcpdump -s 66`` captures."""
    for part in layout.parts:
        if part.packet_at is not None and len(part.packet) > 66:
            del part.raw[part.packet_at + 66 :]
            struct.pack_into(layout.endian + "I", part.raw, 8, 66)


def short_last_block(layout: Layout) -> None:
    layout.parts.append(layout.parts[-1])
    layout.parts[-1] = type(layout.parts[-1])(bytearray(struct.pack("<III", 6, 12, 12)), None)


def gzip_bad_crc(data: bytes) -> bytes:
    packed = bytearray(gzip.compress(data, mtime=0))
    packed[-8] ^= 0xFF
    return bytes(packed)


def with_secrets(build: Callable[[], bytes], keylog: str) -> Callable[[], bytes]:
    """The pcap ``build`` makes, as pcapng with the key log ``keylog`` (of sample_pcaps/)
    in a Decryption Secrets Block: pwcap decrypts it with no option."""

    def make() -> bytes:
        with TemporaryDirectory(prefix="pwcap-catalogue-") as tmp:
            pcap, pcapng = Path(tmp) / "in.pcap", Path(tmp) / "out.pcapng"
            pcap.write_bytes(build())
            write_pcapng(pcapng, read_pcap(pcap), secrets=(SAMPLES / keylog).read_bytes())
            return pcapng.read_bytes()

    return make


def _payloads(layout: Layout, start: bytes) -> list[tuple[int, int]]:
    """(part, offset in its raw bytes) of each TCP payload that begins with ``start``."""
    found = []
    for index in layout.packets():
        part = layout.parts[index]
        where = tcp(part.packet, layout.linktype)
        if where is not None:
            at = (part.packet_at or 0) + where.payload
            if part.raw[at : at + len(start)] == start:
                found.append((index, at))
    return found


def in_tls_record(nth: int, at: int, value: bytes) -> Callable[[Layout], None]:
    """Bytes written at ``at`` into the ``nth`` segment that starts with an application
    data record (its header is bytes 0-4)."""

    def edit(layout: Layout) -> None:
        index, start = _payloads(layout, b"\x17\x03\x03")[nth]
        layout.parts[index].raw[start + at : start + at + len(value)] = value

    return edit


def lose_tls_record(nth: int) -> Callable[[Layout], None]:
    def edit(layout: Layout) -> None:
        del layout.parts[_payloads(layout, b"\x17\x03\x03")[nth][0]]

    return edit


def client_hello_extensions(layout: Layout) -> None:
    """The ClientHello's extensions said to run 64 KiB, past their message."""
    index, at = _payloads(layout, b"\x16\x03\x01")[0]
    raw = layout.parts[index].raw
    at += 5 + 4 + 2 + 32  # record header, message header, version, random
    at += 1 + raw[at]  # session id
    at += 2 + int.from_bytes(raw[at : at + 2], "big")  # cipher suites
    at += 1 + raw[at]  # compression methods
    raw[at : at + 2] = b"\xff\xff"


PULSAR, KAFKA, PCAPNG = "pulsar_plain", "kafka07_plain", "pulsar_derived_pcapng"
IPV6 = "pulsar_ipv6"
TLS13, TLS12 = "tls13_aes_gcm", "tls12_cbc_mte_mutual"


def tunnelled(
    wrapping: str, edit: Callable[[bytearray], object] | None = None
) -> Callable[[], bytes]:
    """``pulsar_plain`` in an encapsulation of ``fuzz/tunnels.py``, every record's bytes
    given to ``edit`` (the record header's lengths kept)."""

    def build() -> bytes:
        from fuzz.mutate import wrapped_samples

        layout = next(
            found for name, _, found in wrapped_samples() if name.endswith(f"-in-{wrapping}")
        )
        layout = layout.copy()
        if edit is not None:
            for part in layout.parts:
                packet = bytearray(part.packet)
                edit(packet)
                part.raw[part.packet_at or 0 :] = packet
                struct.pack_into(layout.endian + "I", part.raw, 8, len(packet))
        return layout.to_bytes()

    return build


def at(offset: int, value: bytes) -> Callable[[bytearray], None]:
    """Bytes written at ``offset`` of every packet."""

    def edit(packet: bytearray) -> None:
        packet[offset : offset + len(value)] = value

    return edit


def cut_at(keep: int) -> Callable[[bytearray], None]:
    def edit(packet: bytearray) -> None:
        del packet[keep:]

    return edit


def doubled(layout: Layout) -> None:
    """Every record twice, as a SPAN port mirroring both directions gives it."""
    layout.parts[:] = [copy for part in layout.parts for copy in (part, part)]


def fragmented(lose: bool, overlap: bool) -> Callable[[Layout], None]:
    """Each packet's IP payload (IPv4, or IPv6 without extension headers) in 64-byte
    fragments; the last of each lost, or the second overlapping the first."""

    def edit(layout: Layout) -> None:
        from fuzz.mutate import _fragment

        parts = []
        for index, part in enumerate(layout.parts):
            packet = part.packet
            if packet[14] >> 4 == 4:
                header = (packet[14] & 0x0F) * 4
                total = struct.unpack_from(">H", packet, 16)[0]
            else:
                header = 40
                total = header + struct.unpack_from(">H", packet, 18)[0]
            ip = packet[14 : 14 + total]
            payload = ip[header:]
            pieces = []
            for start in range(0, len(payload), 64):
                more = start + 64 < len(payload)
                piece = payload[start : start + 64]
                if overlap and start == 64:
                    piece, start = payload[56:128], 56
                pieces.append(packet[:14] + _fragment(ip[:header], start, piece, more, index))
            if lose and len(pieces) > 1:
                pieces.pop()
            for piece in pieces:
                raw = bytearray(part.raw[:16]) + piece
                struct.pack_into(layout.endian + "II", raw, 8, len(piece), len(piece))
                parts.append(type(part)(raw, 16))
        layout.parts[:] = parts

    return edit


TUNNEL = "tunnels"
# Offsets of pulsar_plain's packets wrapped (fuzz/tunnels.py): Ethernet, IPv4, then
VXLAN_AT = 14 + 20 + 8  # the VXLAN header after UDP
GRE_AT = 14 + 20  # the GRE header
MPLS_AT = 14  # the label stack
IPIP_AT = 14 + 20  # the inner IPv4 header
INNER_PAYLOAD_AT = VXLAN_AT + 8 + 14 + 20 + 32  # the TCP payload in VXLAN (timestamps on)

ENTRIES = [
    Entry("file", "an empty file", lambda: b"", REFUSED),
    Entry("file", "a text file", lambda: b"this is not a capture\n", REFUSED),
    Entry("file", "a pcap file header cut short (10 bytes)", raw(PULSAR, lambda d: d[:10]), CUT),
    Entry("file", "a pcap file header and no record", raw(PULSAR, lambda d: d[:24]), CLEAN),
    Entry("file", "a capture cut in the middle of a record", raw(PULSAR, lambda d: d[:-9]), CUT),
    Entry(
        "file", "zero padding after the last record", raw(PULSAR, lambda d: d + bytes(4096)), CLEAN
    ),
    Entry("file", "junk after the last record", raw(PULSAR, lambda d: d + b"\xde\xad" * 40), CUT),
    Entry(
        "file",
        "a gzip capture cut short",
        raw(PULSAR, lambda d: gzip.compress(d, mtime=0)[:-40]),
        CUT,
    ),
    Entry("file", "a gzip capture whose CRC trailer is damaged", raw(PULSAR, gzip_bad_crc), CUT),
    Entry(
        "records",
        "a pcap link type pwcap does not parse (147)",
        edited(PULSAR, header_field(20, 147)),
        "unsupported_link_type",
    ),
    Entry(
        "records",
        "a pcap record length of 4 GiB",
        edited(PULSAR, record_field(30, 8, 0xFFFFFFFF)),
        CUT,
    ),
    Entry(
        "records",
        "a pcapng block too short for its fields, last in the file",
        edited(PCAPNG, short_last_block),
        "bad_block",
    ),
    Entry(
        "records",
        "a pcapng packet of an interface never declared",
        edited(PCAPNG, record_field(30, 8, 5)),
        "bad_block",
    ),
    Entry(
        "records",
        "a pcapng timestamp beyond the year 9999",
        edited(PCAPNG, record_field(30, 12, 1 << 30)),
        "bad_timestamp",
    ),
    Entry(
        "records",
        "a pcapng block length not a multiple of 4",
        edited(PCAPNG, record_field(30, 4, 30)),
        CUT,
    ),
    Entry("packets", "a land packet (from an endpoint to itself)", edited(PULSAR, land), CLEAN),
    Entry("packets", "records timed backwards", edited(PULSAR, backwards), CLEAN),
    Entry(
        "packets",
        "records cut to their headers (a snaplen of 66)",
        edited(PULSAR, headers_only),
        "gap",
    ),
    Entry(
        "packets", "a record lost (a segment the capture missed)", edited(PULSAR, lose(21)), "gap"
    ),
    Entry("packets", "a record duplicated (a retransmission)", edited(PULSAR, repeat(21)), CLEAN),
    Entry("packets", "two records swapped (out of order)", edited(PULSAR, swap(21)), CLEAN),
    Entry(
        "packets", "a capture that starts mid-connection", edited(PULSAR, lose(0, 22)), "midstream"
    ),
    Entry(
        "Pulsar",
        "a totalSize of 4 GiB",
        edited(PULSAR, in_payload(11, 0, b"\xff\xff\xff\xff")),
        "oversize_frame",
    ),
    Entry(
        "Pulsar",
        "a totalSize over --max-frame-size (6 MiB)",
        edited(PULSAR, in_payload(11, 0, (6 << 20).to_bytes(4, "big"))),
        "oversize_frame",
    ),
    Entry(
        "Pulsar",
        "a commandSize larger than its frame",
        edited(PULSAR, in_payload(11, 4, b"\x00\x00\x10\x00")),
        "bad_frame_header",
    ),
    Entry(
        "Pulsar",
        "a command that is not protobuf",
        edited(PULSAR, in_payload(3, 8, b"\xff\xff\xff")),
        "bad_protobuf",
    ),
    Entry("Pulsar", "a SEND payload byte changed", edited(PULSAR, flipped(21, -1)), "bad_checksum"),
    Entry(
        "Kafka 0.7",
        "a request size of 4 GiB",
        edited(KAFKA, in_payload(3, 0, b"\xff\xff\xff\xff")),
        "bad_frame_header",
    ),
    Entry(
        "Kafka 0.7",
        "a message magic byte of 7",
        edited(KAFKA, in_payload(7, 4, b"\x07")),
        "bad_magic",
    ),
    Entry(
        "Kafka 0.7", "a message payload byte changed", edited(KAFKA, flipped(7, 12)), "bad_checksum"
    ),
    Entry(
        TUNNEL,
        "every packet in VXLAN, cut inside the VXLAN header",
        tunnelled("vxlan", cut_at(VXLAN_AT + 5)),
        "truncated_header",
    ),
    Entry(
        TUNNEL,
        "VXLAN packets without the flag that says a VNI is there",
        tunnelled("vxlan", at(VXLAN_AT, b"\x00")),
        CLEAN,
    ),
    Entry(TUNNEL, "VXLAN to a port pwcap is not told of", tunnelled("vxlan_other_port"), CLEAN),
    Entry(
        TUNNEL,
        "Geneve options longer than the header says",
        tunnelled("geneve", at(VXLAN_AT + 8 + 3, b"\x1f")),
        CLEAN,
    ),
    Entry(
        TUNNEL,
        "GRE with the (deprecated) routing flag",
        tunnelled("gre_checksum_key_sequence", at(GRE_AT, b"\xf0")),
        CLEAN,
    ),
    Entry(
        TUNNEL,
        "GRE version 1 (PPTP) carrying the packets",
        tunnelled("gretap", at(GRE_AT + 1, b"\x01")),
        CLEAN,
    ),
    Entry(
        TUNNEL,
        "an ERSPAN type II header of another version",
        tunnelled("erspan_type_2", at(GRE_AT + 8, b"\x30")),
        CLEAN,
    ),
    Entry(
        TUNNEL,
        "an MPLS label stack whose bottom-of-stack bit is cleared",
        tunnelled("mpls", at(MPLS_AT + 6, b"\x10")),
        CLEAN,
    ),
    Entry(TUNNEL, "VLAN tags 40 deep", lambda: deep_tags(40), "too_deep"),
    Entry(
        TUNNEL,
        "Geneve packets cut inside their options",
        tunnelled("geneve", cut_at(VXLAN_AT + 8 + 6)),
        "truncated_header",
    ),
    Entry(
        TUNNEL,
        "an ERSPAN type III header whose platform-subheader flag is cleared",
        tunnelled("erspan_type_3", at(GRE_AT + 4 + 11, b"\x00")),
        CLEAN,
    ),
    Entry(
        TUNNEL,
        "an MPLS pseudowire control word of an associated channel (first nibble 1)",
        tunnelled("mpls_pseudowire_control_word", at(MPLS_AT + 4, b"\x10")),
        CLEAN,
    ),
    Entry(
        TUNNEL,
        "IP in IP whose inner header says it is 16 bytes long",
        tunnelled("ip_in_ipv4", at(IPIP_AT, b"\x44")),
        CLEAN,
    ),
    Entry(
        TUNNEL,
        "VXLAN over IPv6 whose payload length runs past the record",
        tunnelled("vxlan_over_ipv6", at(14 + 4, b"\xff\xff")),
        CLEAN,
    ),
    Entry(
        TUNNEL,
        "an NFLOG record whose TLV length runs past the record",
        tunnelled("nflog_collector", at(4, b"\xff\x7f")),
        CLEAN,
    ),
    Entry(
        TUNNEL,
        "every packet in VXLAN cut 10 bytes into its inner TCP payload (a mirror that truncates)",
        tunnelled("vxlan", cut_at(INNER_PAYLOAD_AT + 10)),
        "gap",
    ),
    Entry(
        TUNNEL,
        "every packet captured twice (a SPAN of both directions)",
        edited(PULSAR, doubled),
        CLEAN,
    ),
    *(
        Entry(TUNNEL, f"{name} fragments{what}", edited(stem, fragmented(lose, overlap)), expect)
        for name, stem in (("IP", PULSAR), ("IPv6", IPV6))
        for what, lose, overlap, expect in (
            (", the last of each datagram lost", True, False, "incomplete_datagram"),
            (" that overlap", False, True, "incomplete_datagram"),
            (", each datagram whole", False, False, CLEAN),
        )
    ),
    Entry(
        TUNNEL,
        "Linux cooked (v1) records cut inside their 16-byte header",
        tunnelled("linux_cooked_collector", cut_at(10)),
        "truncated_header",
    ),
    Entry(
        TUNNEL,
        "Linux cooked v2 records naming ARP as their protocol",
        tunnelled("linux_cooked_v2_collector", at(0, b"\x08\x06")),
        CLEAN,
    ),
    Entry(
        TUNNEL,
        "loopback records cut inside their address family",
        tunnelled("loopback_collector", cut_at(2)),
        "truncated_header",
    ),
    Entry(
        TUNNEL,
        "raw IP records of IP version 5",
        tunnelled("raw_ip_collector", at(0, b"\x55")),
        CLEAN,
    ),
    Entry("TLS", "TLS and no key log", raw(TLS13, lambda d: d), "tls_no_keys"),
    Entry(
        "TLS",
        "TLS with a key log whose secrets are wrong",
        with_secrets(raw(TLS13, lambda d: d), f"{TLS13}.wrong.keylog"),
        "tls_auth_failed",
    ),
    Entry(
        "TLS",
        "TLS whose handshake the capture missed (it begins later)",
        with_secrets(raw("tls13_derived_midstream", lambda d: d), f"{TLS13}.keylog"),
        "tls_handshake_missing",
    ),
    Entry(
        "TLS",
        "a ClientHello whose extensions run past it",
        with_secrets(edited(TLS13, client_hello_extensions), f"{TLS13}.keylog"),
        "tls_bad_record",
    ),
    Entry(
        "TLS",
        "a TLS 1.3 record's ciphertext byte changed",
        with_secrets(edited(TLS13, in_tls_record(6, 20, b"\x00\x00")), f"{TLS13}.keylog"),
        "tls_auth_failed",
    ),
    Entry(
        "TLS",
        "a TLS 1.2 CBC record (MAC-then-encrypt) byte changed",
        with_secrets(edited(TLS12, in_tls_record(6, 30, b"\x00\x00")), f"{TLS12}.keylog"),
        "tls_auth_failed",
    ),
    Entry(
        "TLS",
        "a TLS record length over the largest TLS 1.3 allows",
        with_secrets(edited(TLS13, in_tls_record(6, 3, b"\xff\xff")), f"{TLS13}.keylog"),
        "tls_bad_record",
    ),
    Entry(
        "TLS",
        "a TLS record length one byte short",
        with_secrets(edited(TLS13, in_tls_record(6, 4, b"\x20")), f"{TLS13}.keylog"),
        "tls_auth_failed",
    ),
    Entry(
        "TLS",
        "a TLS record lost (a segment the capture missed)",
        with_secrets(edited(TLS13, lose_tls_record(6)), f"{TLS13}.keylog"),
        "gap",
    ),
]


def deep_tags(count: int) -> bytes:
    """``pulsar_plain`` with ``count`` 802.1Q tags in every frame."""
    layout = sample(PULSAR)
    for part in layout.parts:
        packet = part.packet
        tags = b"".join(struct.pack(">HH", 0x8100, 7) for _ in range(count))
        packet = packet[:12] + tags + packet[12:]
        raw = bytearray(part.raw[:16]) + packet
        struct.pack_into(layout.endian + "II", raw, 8, len(packet), len(packet))
        part.raw = raw
    return layout.to_bytes()


def answer(data: bytes, folder: Path) -> Answer:
    """What ``pwcap decode FILE -q`` answers: exit status, standard error, anomaly kinds."""
    path = folder / "capture"
    path.write_bytes(data)
    out = folder / "dataset"
    stderr = io.StringIO()
    with contextlib.redirect_stderr(stderr):
        status = pwcap(["decode", str(path), "-o", str(out), "-q", "--overwrite"])
    lines = tuple(line.replace(str(path), "FILE") for line in stderr.getvalue().splitlines())
    kinds: tuple[str, ...] = ()
    if status in (0, 3):
        kinds = tuple(sorted(set(pq.read_table(out / "anomalies")["kind"].to_pylist())))
    return Answer(status, lines, kinds)


def answers() -> list[tuple[Entry, Answer]]:
    with TemporaryDirectory(prefix="pwcap-catalogue-") as tmp:
        return [(entry, answer(entry.build(), Path(tmp))) for entry in ENTRIES]


def markdown(found: list[tuple[Entry, Answer]]) -> str:
    lines = [
        "# Bad input, and what pwcap answers",
        "",
        "Generated by `python -m fuzz.catalogue > docs/robustness.md` from the inputs in",
        "`fuzz/catalogue.py`, each decoded by `pwcap decode FILE -q`; a test decodes them",
        "again and keeps this page equal to what pwcap answers. Anomaly kinds are explained",
        "in [schema.md](schema.md#anomaly-kinds).",
        "",
        "Exit status: 0 decoded, 1 not a capture (nothing written), 3 decoded up to a cut",
        "(the dataset is written, with a `truncated_capture` row). Damage pwcap steps over",
        "is never silent: it is an `anomalies` row, for the capture or for the connection.",
        "",
        "Beyond this list, a mutation campaign over the sample captures (`python -m",
        "fuzz.campaign`) and coverage-guided fuzzing of the readers and decoders (`python -m",
        "fuzz.atheris_run`) check that no input makes pwcap raise, hang, outgrow 400 MB or",
        "write rows that contradict each other; see `fuzz/__init__.py`.",
        "",
        "| layer | input | exit | pwcap says | anomaly kinds |",
        "|---|---|---|---|---|",
    ]
    for entry, found_answer in found:
        said = "<br>".join(f"`{line}`" for line in found_answer.lines) or "(nothing)"
        kinds = ", ".join(f"`{kind}`" for kind in found_answer.kinds) or "none"
        lines.append(f"| {entry.layer} | {entry.what} | {found_answer.status} | {said} | {kinds} |")
    return "\n".join([*lines, *FUZZING]) + "\n"


FUZZING = [
    "",
    "## Fuzzing and sanitizers",
    "",
    "Each of these is one command from the checkout (they take the machine's cores: prefix",
    "`nice -n 10` on a shared machine).",
    "",
    "- `python -m fuzz.campaign --inputs 100000 --jobs 2`: the mutation campaign on the",
    "  normal build. A short run (1,000 mutants) is part of every test run; a failing input",
    "  goes to `fuzz/found/` with a line in `failures.jsonl` saying how to make it again.",
    "- `make sanitize`: the compiled modules built with AddressSanitizer and",
    "  UndefinedBehaviorSanitizer (gcc), in a scratch copy under `build/sanitize/gcc` (the",
    "  normal build is left alone), then the default test suite (but for the tests that",
    "  hold a decode to 400 MB: ASan's shadow memory counts there) and a campaign of",
    "  100,000 mutants on that build (`SANITIZE_INPUTS=N` for another count,",
    '  `SANITIZE_PYTEST="tests/test_x.py"` for fewer tests). Python runs with the ASan',
    "  runtime preloaded and `PYTHONMALLOC=malloc`, so Python objects get red zones too; a",
    "  report stops the process that made it (UBSan's `halt_on_error=1`), and every report",
    "  is kept in `build/sanitize/gcc/reports` and printed at the end. Leak checking is off:",
    "  CPython keeps objects alive to the end by design. The campaign's memory and time",
    "  limits are widened there (ASan's shadow memory is not pwcap's); the normal build's",
    "  campaign checks the promises themselves. CI runs a short version: built at `-O0`,",
    "  three test files and 300 mutants.",
    "- `python -m fuzz.atheris_run TARGET`: coverage-guided fuzzing (atheris, libFuzzer) of",
    "  the interpreted decoder, target `records`, `reassembly`, `pulsar` or `kafka07`.",
    "- `make fuzz-compiled TARGET=pulsar ARGS=-max_total_time=600`: the same targets over",
    "  the compiled modules, built by clang with `-fsanitize=fuzzer-no-link,address,undefined`",
    "  in `build/sanitize/clang`: libFuzzer follows the coverage of the extensions' C, and",
    "  ASan and UBSan watch it. Findings go to `fuzz/work/compiled/TARGET/`. It needs clang",
    "  and its runtime archives (Debian: `apt-get install clang libclang-rt-14-dev`; the",
    "  script names what is missing) and atheris (`make setup` installs it);",
    "  `SANITIZE_KEEP=1` reuses the previous run's instrumented build for the next target.",
    "  libFuzzer's memory limit is 2000 MB there: ASan alone passes 400 MB.",
    "",
    "In the sanitized runs Spark's JVM runs without the ASan runtime (its own SIGSEGV",
    "handling is how it checks for null, which ASan would report as a crash): the `java` on",
    "their PATH drops the preload and the Python workers Spark starts take it back; so does",
    "`ps`, which Spark's launcher runs and which hangs at its start under gcc's preloaded",
    "ASan runtime, and so does the browser of the report tests, which spins under it.",
    "",
    "## What the sanitizer runs measured",
    "",
    "The full runs, on 27 and 28 November 2026, on a 2-core machine shared with other jobs",
    "(load average 5 to 17): wall times are long, CPU times are the ones to compare.",
    "",
    "- The gcc build (`make sanitize`): 14 of the 51 modules at `-O1` took 12.5 minutes of",
    "  wall; the other 37 at `-O0` 6.3 minutes (83 s of CPU). clang's build for `make",
    "  fuzz-compiled`: 10 at `-O1`, then the other 41 at `-O0` in 6.2 minutes (90 s of",
    "  CPU). On a busy machine `SANITIZE_OPT=-O0` is the practical choice.",
    "- The default suite on the gcc build at `-O0`, 28 November (3,276 tests without the",
    "  two 400 MB files; `SANITIZE_INPUTS=0 SANITIZE_OPT=-O0`, at most 1,200 s a test;",
    "  load 5 to 15): the build and the first 3,058 tests in 46 minutes of wall and 17.5 of",
    "  CPU (largest process 5.6 GB): 2,960 passed, 6 skipped, 89 failed, 3 errors; the",
    "  217 tests of the files after the browser tests, run again on the same build, passed",
    "  in 4.2 minutes of wall and 1.9 of CPU (largest process 2.5 GB). The run's one",
    "  sanitizer report was not about pwcap's compiled code. What failed was the scratch",
    "  copy and the tools: 87 tests that compare import paths or copy the checkout did not",
    "  expect its `pwcap/capture` links (the tests follow links now, and pass there: 121 in",
    "  22 s); the five browser tests (3 errors, 1 failure, and the fifth hung: Chromium",
    "  spun under the preloaded runtime, and when that test was cut short ASan stopped the",
    "  test process at the C++ exception Playwright's greenlet threw, the one report); with",
    "  both fixed (below, and in the test) the five passed, with the signal tests 33 in 4.8",
    "  minutes of wall; and one signal test (`pwcap report` sent SIGTERM one second after",
    "  it starts) failed once and passed again on its own. The `--jobs` tests that had hung",
    "  in the first run",
    "  passed, workers started while the suite's Spark gateway ran. The first run, on 27",
    "  November, had been stopped at 21%: a `--jobs` worker forked while another thread of",
    "  the test process (Spark's gateway) held the ASan allocator's lock waited for it",
    "  forever (gcc 12's runtime takes no lock around `fork`); the workers are spawned now.",
    "- The mutation campaign on the gcc build: 110,000 mutants of seed 1, no failure and no",
    "  sanitizer report. The first 10,000 on 27 November (run as 600 and 9,400): 9,995",
    "  decoded and 5 refused as not captures, the largest worker 988 MB, 808 s of wall and",
    "  317 s of CPU. Mutants 10,000 to 109,999 on 28 November, 10,000 at a time beside the",
    "  suite, on the same instrumented modules (14 at `-O1`, 37 at `-O0`; their sources",
    "  unchanged since): 99,927 decoded and 73 refused, the largest worker 1,079 MB (ASan's",
    "  shadow memory and quarantine), 5,012 s of wall and 2,687 s of CPU with two workers,",
    "  about 37 mutants per CPU second (80 a second of wall once the machine was quiet).",
    "- `make fuzz-compiled`, each target from its seeds with ASan and UBSan on: no crash,",
    "  hang, out-of-memory or sanitizer report:",
    "",
    "| target | time | executions | exec/s | edges (cov) | features | corpus added | peak RSS |",
    "|---|---|---|---|---|---|---|---|",
    "| pulsar | 300 s | 3,238 | 10 | 7,842 | 32,000 | 470 | 1,007 MB |",
    "| kafka07 | 240 s | 4,431 | 18 | 5,426 | 19,162 | 396 | 974 MB |",
    "| records | 240 s | 10,291 | 42 | 3,833 | 12,566 | 674 | 816 MB |",
    "| reassembly | 240 s | 73,013 | 302 | 1,261 | 5,348 | 682 | 1,021 MB |",
    "",
    "What they found was in the tools, not in pwcap's compiled code: `ps` hanging every",
    "Spark start under the preloaded ASan runtime (the suite waited 23 minutes on its first",
    "Spark test); `python -m fuzz.atheris_run` fuzzing the compiled build blind instead of",
    "the interpreted one (96 edges instead of 1,234 on the Pulsar seeds); `--compiled`",
    "spending minutes instrumenting 7,000 library functions before the first input; and",
    "libFuzzer's 400 MB limit ending every compiled run before its first input. These four",
    "are fixed, and so are the next two: `--jobs` workers forked while another thread held",
    "ASan's allocator lock hung (they are spawned now), and gcc's ASan runtime preloaded",
    "without the C++ runtime stopped its process at the first C++ exception (`CHECK failed:",
    "... real___cxa_throw`; `make sanitize` preloads libstdc++ with it).",
    "",
    "## What the hostile runs found",
    "",
    "- Kafka 0.7 decompression amplification. A wrapper of a few KB of gzip can hold",
    "  millions of 9-byte messages; every expanded message was held as an object until its",
    "  frame ended, so a 16 MB capture of gzip and snappy sets (both snappy framings,",
    "  nested three deep) peaked at over 2 GB. Message sets are now walked one message at",
    "  a time as their rows are written; a frame's decompression has a budget",
    "  (`--max-decompressed-size`, 64 MiB) shared by its sets and every nesting level, and",
    "  what passes it is a `decompression_failed` row while the decoding goes on; a set's",
    "  damaged messages are listed up to 100, the rest counted in one more row.",
    "- The rare SIGSEGV after SIGINT or SIGTERM. A signal raised while the run waited for",
    "  the background thread to write a row group left that write running, and the",
    "  interrupted run closed the table's Parquet writer under it (`write_table` then used",
    "  freed memory). Stopping a run now waits for the write in progress, drops the queued",
    "  ones, and only then closes the writers.",
    "- A `--jobs` worker killed by SIGKILL (as the out-of-memory killer does) fails the run",
    "  with one line naming the worker and the signal, exit 1, and no dataset.",
    "- The rare exit by SIGINT itself (status -2; 1 run in 300 of the signal test) after",
    "  the one line `interrupted; OUT was not written`. CPython marks the interpreter as",
    "  ended by an unhandled Ctrl-C whenever its own KeyboardInterrupt leaves code that",
    "  `exec` or `eval` runs from a string, even when the program handles it later; a",
    "  program run with `python -m` then, having exited with its own status, kills itself",
    "  with SIGINT. A decode runs such code after it has started writing (namedtuple's",
    "  `eval` when a module is first imported). Ctrl-C now raises pwcap's own interruption",
    "  in every command and job script (`jobs/decode.py` too, which before printed a",
    "  traceback and left its temporary folder), as SIGTERM did: the run exits 128 plus",
    "  the signal's number.",
    "- The rare exit 0 with a traceback after SIGTERM (1 run in 300 of the signal test, in",
    "  CI): the signal's handler ran while a Parquet writer was being finalized (pyarrow's",
    '  `ParquetWriter.__del__`). Python prints an exception raised in a finalizer ("Exception',
    '  ignored in") and drops it, so the decode ran on and wrote its dataset as if never',
    "  asked to stop. While a run answers signals, an interruption a finalizer swallows is",
    "  no longer printed and its signal is sent to the main thread again, where it stops the",
    "  run as any other would (`tests/test_interrupts.py`; a decode whose Parquet writer's",
    "  finalizer gets SIGTERM exits 143 with its one line and leaves nothing).",
    "- `--jobs` workers forked while another thread of the process held a lock (ASan's",
    "  allocator's, held by Spark's gateway thread in the test process; any library's)",
    "  waited for it forever. The workers start as fresh interpreters now (multiprocessing's",
    "  spawn), which inherit no lock.",
]


if __name__ == "__main__":
    sys.stdout.write(markdown(answers()))
