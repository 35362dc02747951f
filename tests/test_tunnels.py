"""Traffic as mirrors and overlays deliver it gives the tables of the traffic itself.

The truth is the bare capture: a real-client sample (``sample_pcaps/pulsar_*.pcap``)
decoded as it is. The same packets wrapped by :mod:`fuzz.tunnels` (VLAN and QinQ, MPLS,
GRE, ERSPAN, VXLAN, Geneve, IP in IP, the collectors' link types), fragmented on the
underlay or inside the tunnel, cut by a mirror's snaplen, captured twice, or mixed with
another tenant's, must decode to the bare capture's tables row for row, apart from
``connections.encapsulation``, which must name the wrapping. A wrapped file keeps its bare
sample's name, so the connection ids are the bare ones too.
"""

from __future__ import annotations

import io
import random
import struct
from collections import Counter
from collections.abc import Callable
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from scapy.contrib.erspan import ERSPAN_II, ERSPAN_III
from scapy.contrib.geneve import GENEVE
from scapy.layers.inet import GRE, IP, TCP, UDP, fragment
from scapy.layers.inet6 import IPv6, IPv6ExtHdrFragment, fragment6
from scapy.layers.l2 import Dot1AD, Dot1Q, Ether
from scapy.layers.vxlan import VXLAN
from scapy.packet import Packet, Raw

from fuzz import tunnels
from fuzz.pcapfile import Capture, Record
from fuzz.stream_sink import RecordingSink
from fuzz.tunnels import BY_NAME, ETHERNET, MACS, WRAPPINGS, Wrapping, load, wrapped, write
from pwcap.capture import CaptureStats, read_streams
from pwcap.capture.layers import fragments
from pwcap.capture.shares import FlowShare, flow_hash
from pwcap.cli import main
from pwcap.decode.api import DecodeOptions
from pwcap.decode.driver import Summary, decode_captures
from pwcap.tables.schema import TABLES
from tests.conftest import SAMPLES

# Plain traffic, IPv6 inside, a capture cut at 96 bytes, one with records repeated
SAMPLED = ("pulsar_plain", "pulsar_ipv6", "pulsar_snaplen96", "pulsar_derived_duplicated")
ALL = tuple(
    path.stem for path in sorted(SAMPLES.glob("pulsar_*.pcap")) if load(path).linktype == ETHERNET
)
WHOLE = ("pulsar_plain", "pulsar_ipv6", "pulsar_derived_duplicated", "pulsar_chunked")  # uncut
VXLAN_OVERHEAD = 14 + 20 + 8 + 8  # Ethernet, IPv4, UDP and VXLAN around the inner frame

Tables = dict[str, list[dict]]


def decode(paths: list[Path], out: Path, vxlan_ports: tuple[int, ...] = ()) -> Summary:
    return decode_captures(paths, out, DecodeOptions(vxlan_ports=vxlan_ports))


def tables(out: Path) -> tuple[Tables, list[str]]:
    """Every table's rows in order, and apart the connections' encapsulations."""
    found = {table: pq.read_table(out / table).to_pylist() for table in TABLES}
    encapsulations = [row.pop("encapsulation") for row in found["connections"]]
    return found, encapsulations


@pytest.fixture(scope="module")
def bare(tmp_path_factory: pytest.TempPathFactory) -> Callable[[tuple[str, ...]], Tables]:
    """The tables of bare samples, decoded once per set of samples."""
    folder = tmp_path_factory.mktemp("bare")
    decoded: dict[tuple[str, ...], Tables] = {}

    def of(stems: tuple[str, ...]) -> Tables:
        if stems not in decoded:
            out = folder / str(len(decoded))
            decode([SAMPLES / f"{stem}.pcap" for stem in stems], out)
            found, encapsulations = tables(out)
            assert set(encapsulations) == {""}
            decoded[stems] = found
        return decoded[stems]

    return of


def samples(stems: tuple[str, ...]) -> list[Path]:
    return [SAMPLES / f"{stem}.pcap" for stem in stems]


def assert_wrapped_like_bare(
    bare: Tables, out: Path, encapsulation: str | set[str], summary: Summary
) -> None:
    found, encapsulations = tables(out)
    for table in TABLES:
        assert found[table] == bare[table], table
    wanted = {encapsulation} if isinstance(encapsulation, str) else encapsulation
    assert set(encapsulations) == wanted
    assert summary.rows["frames"] > 0


# -- every wrapping --------------------------------------------------------------------------


@pytest.mark.parametrize("wrapping", WRAPPINGS, ids=[w.name for w in WRAPPINGS])
def test_a_wrapped_capture_gives_the_bare_capture_s_tables(
    wrapping: Wrapping, bare, tmp_path: Path
) -> None:
    paths = tunnels.wrap_samples(samples(SAMPLED), wrapping, tmp_path / "in")
    ports = (tunnels.CUSTOM_VXLAN_PORT,) if wrapping.options else ()
    summary = decode(paths, tmp_path / "out", ports)
    assert_wrapped_like_bare(bare(SAMPLED), tmp_path / "out", wrapping.encapsulation, summary)
    stats = summary.capture_totals()
    assert stats.encapsulations == {wrapping.encapsulation: stats.tcp_segments}


@pytest.mark.slow
@pytest.mark.parametrize("wrapping", WRAPPINGS, ids=[w.name for w in WRAPPINGS])
def test_every_real_client_sample_wrapped_gives_its_bare_tables(
    wrapping: Wrapping, bare, tmp_path: Path
) -> None:
    paths = tunnels.wrap_samples(samples(ALL), wrapping, tmp_path / "in")
    ports = (tunnels.CUSTOM_VXLAN_PORT,) if wrapping.options else ()
    summary = decode(paths, tmp_path / "out", ports)
    assert_wrapped_like_bare(bare(ALL), tmp_path / "out", wrapping.encapsulation, summary)


def with_flow_label(capture: Capture, label: int) -> Capture:
    """Every IPv6 packet of an Ethernet capture given the flow label ``label``."""
    records = []
    for record in capture.records:
        data = bytearray(record.data)
        first = struct.unpack_from(">I", data, 14)[0]
        struct.pack_into(">I", data, 14, first & 0xFFF00000 | label)
        records.append(Record(record.ts_sec, record.ts_usec, record.orig_len, bytes(data)))
    return Capture(capture.linktype, capture.snaplen, records)


@pytest.mark.parametrize("label", [0x10800, 0x186DD, 0x18100, 0x18847, 0x16558], ids=hex)
@pytest.mark.parametrize("wrapping", ["mpls_pseudowire", "mpls_pseudowire_control_word"])
def test_a_pseudowire_s_control_word_is_told_by_the_frame_it_would_leave(
    label: int, wrapping: str, tmp_path: Path
) -> None:
    """After the label stack, a destination address starting with a 0 nibble looks like a
    control word. Taken for one, the frame would name its EtherType where this frame's
    IPv6 header has the low bits of its flow label (random per flow on Linux): a label
    that reads as an EtherType must not lose the flow, with or without a control word."""
    sample = with_flow_label(load(SAMPLES / "pulsar_ipv6.pcap"), label)
    decode([write(tmp_path / "bare" / "pulsar_ipv6.pcap", sample)], tmp_path / "bare_out")
    expected, _ = tables(tmp_path / "bare_out")
    path = write(tmp_path / "in" / "pulsar_ipv6.pcap", wrapped(sample, BY_NAME[wrapping]))
    summary = decode([path], tmp_path / "out")
    assert_wrapped_like_bare(expected, tmp_path / "out", "mpls", summary)


def test_nflog_logged_by_a_big_endian_host_gives_the_bare_capture_s_tables(
    bare, tmp_path: Path
) -> None:
    """NFLOG's attribute lengths and types are in the logging host's byte order: a
    big-endian host's records read as a little-endian one's."""
    big_endian = Wrapping(
        "nflog_big_endian",
        tunnels.NFLOG,
        lambda f: tunnels.nflog(
            bytes(IP(src="198.18.0.1", dst="198.18.0.2") / tunnels.vxlan(f)), ">"
        ),
        "vxlan:4242",
    )
    paths = tunnels.wrap_samples(samples(SAMPLED), big_endian, tmp_path / "in")
    summary = decode(paths, tmp_path / "out")
    assert_wrapped_like_bare(bare(SAMPLED), tmp_path / "out", "vxlan:4242", summary)


def test_a_vxlan_port_not_named_decodes_nothing_and_says_why(tmp_path: Path, capsys) -> None:
    (path,) = tunnels.wrap_samples(
        samples(("pulsar_plain",)), BY_NAME["vxlan_other_port"], tmp_path / "in"
    )
    status = main(["decode", str(path), "-o", str(tmp_path / "without")])
    captured = capsys.readouterr()
    records = len(load(path).records)
    assert status == 0
    assert f"{records} UDP not a tunnel (port {tunnels.CUSTOM_VXLAN_PORT}: {records}" in (
        captured.out
    )
    assert f"no TCP segment in {records} records" in captured.err
    assert "--vxlan-port" in captured.err
    option = ["--vxlan-port", str(tunnels.CUSTOM_VXLAN_PORT)]
    assert main(["decode", str(path), "-o", str(tmp_path / "with"), "-q", *option]) == 0
    assert pq.read_table(tmp_path / "with" / "frames").num_rows > 0
    assert main(["show", str(path), "--limit", "3", *option]) == 0
    assert len(capsys.readouterr().out.splitlines()) == 3


def test_jobs_split_a_tunnelled_capture_by_inner_flow_as_one_process_decodes_it(
    tmp_path: Path,
) -> None:
    paths = tunnels.wrap_samples(
        samples(("pulsar_shared_two_consumers",)), BY_NAME["vxlan_other_port"], tmp_path / "in"
    )
    option = ["--vxlan-port", str(tunnels.CUSTOM_VXLAN_PORT), "-q"]
    assert main(["decode", *map(str, paths), "-o", str(tmp_path / "one"), *option]) == 0
    assert (
        main(["decode", *map(str, paths), "-o", str(tmp_path / "two"), "--jobs", "2", *option]) == 0
    )
    for table in TABLES:
        one = sorted(map(repr, pq.read_table(tmp_path / "one" / table).to_pylist()))
        two = sorted(map(repr, pq.read_table(tmp_path / "two" / table).to_pylist()))
        assert one == two, table


# -- one pcapng, an interface per link type ---------------------------------------------------

SHB, IDB, EPB = 0x0A0D0D0A, 1, 6


def pcapng_of_interfaces(capture: Capture, wrappings: list[Wrapping]) -> bytes:
    """One section with an interface per wrapping; record i goes out on interface i mod n,
    wrapped for that interface's link type."""

    def block(kind: int, body: bytes) -> bytes:
        body += b"\x00" * (-len(body) % 4)
        return struct.pack("<II", kind, 12 + len(body)) + body + struct.pack("<I", 12 + len(body))

    parts = [block(SHB, struct.pack("<IHHq", 0x1A2B3C4D, 1, 0, -1))]
    parts += [block(IDB, struct.pack("<HHI", w.linktype, 0, 0)) for w in wrappings]
    for index, record in enumerate(capture.records):
        interface = index % len(wrappings)
        data = wrappings[interface].wrap(record.data)
        ts = record.ts_us
        header = struct.pack("<IIIII", interface, ts >> 32, ts & 0xFFFFFFFF, len(data), len(data))
        parts.append(block(EPB, header + data))
    return b"".join(parts)


def test_every_interface_of_a_pcapng_is_read_by_its_own_link_type(bare, tmp_path: Path) -> None:
    """A collector that writes one file from several capture points: raw IP, Linux
    cooked v2, NFLOG, loopback and Ethernet interfaces, all carrying VXLAN 4242."""
    chosen = [
        BY_NAME[name]
        for name in (
            "vxlan",
            "raw_ip_collector",
            "linux_cooked_v2_collector",
            "nflog_collector",
            "loopback_collector",
            "linux_cooked_collector",
        )
    ]
    path = tmp_path / "in" / "pulsar_plain.pcap"
    path.parent.mkdir()
    path.write_bytes(pcapng_of_interfaces(load(SAMPLES / "pulsar_plain.pcap"), chosen))
    summary = decode([path], tmp_path / "out")
    assert_wrapped_like_bare(bare(("pulsar_plain",)), tmp_path / "out", "vxlan:4242", summary)


# -- fragments ---------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("wrapping", "size"),
    [("vxlan", 256), ("vxlan_over_ipv6", 256), ("gre_checksum_key_sequence", 120)],
)
def test_an_overlay_fragmented_on_its_underlay_is_put_back_together(
    wrapping: str, size: int, bare, tmp_path: Path
) -> None:
    """An overlay over a path with a smaller MTU: the outer packets arrive in pieces."""
    chosen = BY_NAME[wrapping]
    paths = []
    for path in samples(WHOLE):
        whole = wrapped(load(path), chosen)
        pieces = tunnels.outer_fragments(whole, size)
        assert len(pieces.records) > len(whole.records)
        paths.append(write(tmp_path / "in" / path.name, pieces))
    summary = decode(paths, tmp_path / "out")
    assert_wrapped_like_bare(bare(WHOLE), tmp_path / "out", chosen.encapsulation, summary)
    stats = summary.capture_totals()
    assert stats.fragments_reassembled > 100
    assert stats.fragments_dropped == 0


def test_fragments_inside_a_tunnel_are_put_back_together_within_it(bare, tmp_path: Path) -> None:
    """The inner packets fragmented, each fragment in its own VXLAN packet, the
    fragments of each datagram in another order."""
    rng = random.Random(5)
    capture = load(SAMPLES / "pulsar_plain.pcap")
    records = []
    for index, record in enumerate(capture.records):
        frame = Ether(record.data)
        frame[IP].id = index
        pieces = fragment(frame[IP], fragsize=64)
        rng.shuffle(pieces)
        for piece in pieces:
            inner = bytes(Ether(src=frame.src, dst=frame.dst) / piece)
            outer = BY_NAME["vxlan"].wrap(inner)
            records.append(Record(record.ts_sec, record.ts_usec, len(outer), outer))
    path = write(tmp_path / "in" / "pulsar_plain.pcap", Capture(ETHERNET, 262144, records))
    summary = decode([path], tmp_path / "out")
    assert_wrapped_like_bare(bare(("pulsar_plain",)), tmp_path / "out", "vxlan:4242", summary)
    assert summary.capture_totals().fragments_reassembled > 50


def read(packets: list) -> tuple[RecordingSink, CaptureStats]:
    buffer = io.BytesIO()
    buffer.write(struct.pack("<IHHiIII", 0xA1B2C3D4, 2, 4, 0, 0, 262144, ETHERNET))
    for index, packet in enumerate(packets):
        data = bytes(packet)
        ts = getattr(packet, "ts_us", 1_700_000_000_000_000 + index)
        buffer.write(struct.pack("<IIII", ts // 1_000_000, ts % 1_000_000, len(data), len(data)))
        buffer.write(data)
    sink = RecordingSink()
    return sink, read_streams(buffer.getvalue(), sink, server_ports={6650})


def segment(payload: bytes, ident: int, seq: int = 1000) -> IP:
    return (
        IP(src="10.9.0.1", dst="10.9.0.2", id=ident)
        / TCP(sport=40000, dport=6650, flags="PA", seq=seq, ack=1)
        / Raw(payload)
    )


def test_overlapping_fragments_drop_their_datagram_as_receivers_do() -> None:
    whole = segment(b"A" * 64, ident=7)
    first, second = fragment(whole, fragsize=40)[:2]
    overlapping = first.copy()
    overlapping.frag = 1  # 8 bytes in: over the first fragment's end
    _, stats = read([Ether() / first, Ether() / overlapping, Ether() / second])
    assert stats.fragments_overlapping == 1
    assert stats.fragments_dropped >= 1
    assert stats.tcp_segments == 0


def test_a_datagram_in_more_pieces_than_are_held_is_dropped_not_called_overlapping() -> None:
    """Fragments of 8 bytes, none overlapping another, more of them than a datagram may
    wait for: the datagram is given up, and not for overlapping."""
    pieces = fragment(segment(b"F" * 8 * (fragments.MAX_PIECES + 8), ident=15), fragsize=8)
    assert len(pieces) > fragments.MAX_PIECES
    _, stats = read([Ether() / piece for piece in pieces])
    assert stats.fragments_overlapping == 0
    assert stats.fragments_dropped >= 1 and stats.tcp_segments == 0


def test_overlapping_ipv6_fragments_drop_their_datagram_too() -> None:
    """RFC 5722: IPv6 fragments that overlap make the whole datagram invalid."""
    whole = (
        IPv6(src="fd00::1", dst="fd00::2")
        / IPv6ExtHdrFragment(id=77)
        / TCP(sport=40000, dport=6650, flags="PA", seq=1000, ack=1)
        / Raw(b"G" * 200)
    )
    pieces = fragment6(whole, 100)
    overlapping = pieces[1].copy()
    overlapping[IPv6ExtHdrFragment].offset -= 1  # 8 bytes over the first fragment's end
    _, stats = read([Ether(**MACS) / piece for piece in (pieces[0], overlapping, *pieces[1:])])
    assert stats.fragments_overlapping == 1
    assert stats.fragments_reassembled == 0 and stats.tcp_segments == 0
    _, whole_stats = read([Ether(**MACS) / piece for piece in reversed(pieces)])
    assert whole_stats.fragments_reassembled == 1 and whole_stats.tcp_segments == 1


def test_a_pair_of_hosts_waits_for_no_more_than_its_share_of_datagrams() -> None:
    """One pair opens more datagrams than a pair may hold while other pairs' wait: its
    oldest give up their places (their last fragments, sent last, then wait alone in
    vain); its latest and the other pairs' are put back together."""
    extra = 36
    others = [fragment(segment(b"H" * 64, ident=index), fragsize=48) for index in range(10)]
    for index, pieces in enumerate(others):
        for piece in pieces:
            piece.src = f"10.9.1.{index}"
    ours = [
        fragment(segment(b"I" * 64, ident=100 + index), fragsize=48)
        for index in range(fragments.MAX_PER_PAIR + extra)
    ]
    assert {len(pieces) for pieces in (*others, *ours)} == {2}
    firsts = [pieces[0] for pieces in (*others, *ours)]
    lasts = [pieces[1] for pieces in (*others, *ours[extra:], *ours[:extra])]
    _, stats = read([Ether() / piece for piece in (*firsts, *lasts)])
    assert stats.fragments_reassembled == stats.tcp_segments == 10 + fragments.MAX_PER_PAIR
    assert stats.fragments_dropped == 2 * extra
    assert stats.fragments_overlapping == 0


def test_a_datagram_never_completed_is_an_anomaly(tmp_path: Path) -> None:
    pieces = fragment(segment(b"B" * 64, ident=9), fragsize=24)
    path = tmp_path / "incomplete.pcap"
    _, stats = read([Ether() / piece for piece in pieces[:-1]])
    assert stats.fragments_dropped == 1 and stats.fragments_reassembled == 0
    write(
        path,
        Capture(
            ETHERNET,
            262144,
            [
                Record(1, i, len(b), b)
                for i, b in enumerate(bytes(Ether() / piece) for piece in pieces[:-1])
            ],
        ),
    )
    assert main(["decode", str(path), "-o", str(tmp_path / "out"), "-q"]) == 0
    kinds = pq.read_table(tmp_path / "out" / "anomalies")["kind"].to_pylist()
    assert "incomplete_datagram" in kinds


def test_a_fragment_waits_no_longer_than_its_timeout() -> None:
    """Thirty seconds of capture time (Linux's ipfrag_time): the late fragment starts a
    datagram of its own, which never completes either."""
    first, second = fragment(segment(b"C" * 64, ident=11), fragsize=40)[:2]
    late = Ether() / second
    late.ts_us = 1_700_000_000_000_000 + 31_000_000
    _, stats = read([Ether() / first, late])
    assert stats.tcp_segments == 0
    assert stats.fragments_dropped == 2


def test_the_same_fragments_in_two_tunnels_are_two_datagrams() -> None:
    """Tenants' fragments with the same addresses and identification never mix."""
    pieces = fragment(segment(b"D" * 64, ident=13), fragsize=40)
    other = fragment(segment(b"E" * 64, ident=13), fragsize=40)
    packets = []
    for vni, parts in ((1, pieces), (2, other)):
        packets += [
            Ether()
            / IP(src="198.18.0.1", dst="198.18.0.2")
            / UDP(dport=4789)
            / VXLAN(vni=vni, flags=0x08)
            / Ether()
            / part
            for part in parts
        ]
    packets = packets[::2] + packets[1::2]  # interleaved
    sink, stats = read(packets)
    assert stats.fragments_reassembled == 2
    delivered = {r.conn.encapsulation: r.stream(0).data for r in sink.connections.values()}
    assert delivered == {"vxlan:1": b"D" * 64, "vxlan:2": b"E" * 64}


# -- mirrors: truncation, copies ----------------------------------------------------------------


def cut(capture: Capture, keep: int) -> Capture:
    """Every record cut after ``keep`` bytes, as a snaplen cuts them (lengths kept)."""
    return Capture(
        capture.linktype,
        keep,
        [Record(r.ts_sec, r.ts_usec, r.orig_len, r.data[:keep]) for r in capture.records],
    )


@pytest.mark.parametrize("keep", [96 + VXLAN_OVERHEAD, 150 + VXLAN_OVERHEAD])
def test_a_mirror_s_snaplen_cuts_the_inner_segment_into_a_gap_of_the_bytes_lost(
    keep: int, tmp_path: Path
) -> None:
    """The inner segment is cut where the bare capture cut at the same inner byte: the
    same gaps (with the bytes lost), never a wrong frame."""
    sample = load(SAMPLES / "pulsar_plain.pcap")
    bare_cut = write(tmp_path / "bare" / "pulsar_plain.pcap", cut(sample, keep - VXLAN_OVERHEAD))
    decode([bare_cut], tmp_path / "bare_out")
    mirrored = cut(wrapped(sample, BY_NAME["vxlan"]), keep)
    path = write(tmp_path / "in" / "pulsar_plain.pcap", mirrored)
    summary = decode([path], tmp_path / "out")
    expected, _ = tables(tmp_path / "bare_out")
    assert_wrapped_like_bare(expected, tmp_path / "out", "vxlan:4242", summary)
    gaps = [row for row in expected["anomalies"] if row["kind"] == "gap"]
    assert gaps and all(row["size"] > 0 for row in gaps)


def test_a_mirror_that_truncates_and_sends_shorter_packets_gives_the_same_gaps(
    tmp_path: Path,
) -> None:
    """A cloud mirror's truncation: the inner frame is cut, and the outer headers give
    the cut packet's lengths (only the inner IP header says how long it was)."""
    sample = load(SAMPLES / "pulsar_plain.pcap")
    keep = 100
    bare_cut = write(tmp_path / "bare" / "pulsar_plain.pcap", cut(sample, keep))
    decode([bare_cut], tmp_path / "bare_out")
    records = []
    for record in sample.records:
        outer = BY_NAME["vxlan"].wrap(record.data[:keep])
        records.append(Record(record.ts_sec, record.ts_usec, len(outer), outer))
    path = write(tmp_path / "in" / "pulsar_plain.pcap", Capture(ETHERNET, 262144, records))
    summary = decode([path], tmp_path / "out")
    expected, _ = tables(tmp_path / "bare_out")
    assert_wrapped_like_bare(expected, tmp_path / "out", "vxlan:4242", summary)


def test_a_span_of_both_directions_counts_each_packet_once(bare, tmp_path: Path) -> None:
    """Every packet twice: as it entered the mirrored port and as it left the other
    one, a hop later (outer TTL one less, another VLAN)."""
    capture = wrapped(load(SAMPLES / "pulsar_plain.pcap"), BY_NAME["vxlan"])
    records = []
    for record in capture.records:
        again = Ether(record.data)
        again[IP].ttl -= 1
        again = bytes(Ether(src=again.src, dst=again.dst) / Dot1Q(vlan=20) / again[IP])
        later = record.ts_usec + 3
        records += [record, Record(record.ts_sec, later, len(again), again)]
    path = write(tmp_path / "in" / "pulsar_plain.pcap", Capture(ETHERNET, 262144, records))
    summary = decode([path], tmp_path / "out")
    assert_wrapped_like_bare(bare(("pulsar_plain",)), tmp_path / "out", "vxlan:4242", summary)
    stats = summary.capture_totals()
    assert stats.duplicates == len(capture.records)
    assert stats.retransmitted_bytes == 0


@pytest.mark.parametrize("mirror_first", ["always", "alternately"])
def test_a_mirror_beside_the_host_s_own_capture_is_one_connection(
    mirror_first: str, bare, tmp_path: Path
) -> None:
    """The host's capture (bare) and a VXLAN mirror of the same packets merged: each
    packet twice, in another encapsulation; its connection is one, labelled as its
    first packet came."""
    sample = load(SAMPLES / "pulsar_plain.pcap")
    mirrored = wrapped(sample, BY_NAME["vxlan"])
    records = []
    for index, (host, mirror) in enumerate(zip(sample.records, mirrored.records, strict=True)):
        first, second = (mirror, host) if mirror_first == "always" or index % 2 else (host, mirror)
        records += [first, Record(second.ts_sec, second.ts_usec + 2, second.orig_len, second.data)]
    path = write(tmp_path / "in" / "pulsar_plain.pcap", Capture(ETHERNET, 262144, records))
    summary = decode([path], tmp_path / "out")
    encapsulation = "vxlan:4242" if mirror_first == "always" else ""
    assert_wrapped_like_bare(bare(("pulsar_plain",)), tmp_path / "out", encapsulation, summary)
    assert summary.capture_totals().duplicates == len(sample.records)


# -- tenants ------------------------------------------------------------------------------------


def as_tenant(capture: Capture, endpoints: dict[int, int], shift_us: int) -> Capture:
    """A capture moved ``shift_us`` in time with its client ports renamed by
    ``endpoints`` (its ports -> another tenant's): the other tenant's addresses."""
    records = []
    for record in capture.records:
        frame = Ether(record.data)
        tcp = frame[TCP]
        tcp.sport, tcp.dport = (
            endpoints.get(tcp.sport, tcp.sport),
            endpoints.get(tcp.dport, tcp.dport),
        )
        del tcp.chksum
        data = bytes(frame)
        ts = record.ts_us + shift_us
        records.append(Record(ts // 1_000_000, ts % 1_000_000, len(data), data))
    return Capture(capture.linktype, capture.snaplen, records)


def client_ports(capture: Capture) -> list[int]:
    """The client ports of a capture's connections, in the order they opened."""
    ports = []
    for record in capture.records:
        tcp = Ether(record.data)[TCP]
        if tcp.flags == "S" and tcp.sport not in ports:
            ports.append(tcp.sport)
    return ports


def without_ids(rows: list[dict]) -> list[str]:
    return sorted(
        repr({k: v for k, v in row.items() if k not in ("conn_id", "capture")}) for row in rows
    )


def test_two_tenants_with_the_same_addresses_in_two_vnis_stay_apart(tmp_path: Path) -> None:
    """Two tenants' clients use the same addresses and ports at the same time, one in
    VNI 1, the other in VNI 2: each connection keeps its own tenant's frames."""
    one, other = (
        load(SAMPLES / f"{stem}.pcap") for stem in ("pulsar_plain", "pulsar_slow_consumer")
    )
    ports_one, ports_other = client_ports(one), client_ports(other)
    renamed = {port: ports_one[i % len(ports_one)] for i, port in enumerate(ports_other)}
    other = as_tenant(other, renamed, one.records[0].ts_us - other.records[0].ts_us + 500)
    for stem, capture in (("pulsar_plain", one), ("pulsar_slow_consumer", other)):
        write(tmp_path / "bare" / stem / "tenant.pcap", capture)
        decode([tmp_path / "bare" / stem / "tenant.pcap"], tmp_path / "bare_out" / stem)
    records = [
        (record.ts_us, vni, record)
        for vni, capture in (
            (1, wrapped(one, BY_NAME["vxlan"])),
            (2, wrapped(other, BY_NAME["vxlan"])),
        )
        for record in capture.records
    ]
    merged = []
    for _, vni, record in sorted(records, key=lambda item: (item[0], item[1])):
        frame = Ether(record.data)
        frame[VXLAN].vni = vni
        data = bytes(frame)
        merged.append(Record(record.ts_sec, record.ts_usec, len(data), data))
    path = write(tmp_path / "in" / "tenant.pcap", Capture(ETHERNET, 262144, merged))
    decode([path], tmp_path / "out")
    found, encapsulations = tables(tmp_path / "out")
    by_conn = {
        row["conn_id"]: enc for row, enc in zip(found["connections"], encapsulations, strict=True)
    }
    assert set(by_conn.values()) == {"vxlan:1", "vxlan:2"}
    shared = Counter(
        (row["client_ip"], row["client_port"], row["server_port"]) for row in found["connections"]
    )
    assert max(shared.values()) == 2  # the same endpoints, once in each VNI
    for vni, stem in ((1, "pulsar_plain"), (2, "pulsar_slow_consumer")):
        expected, _ = tables(tmp_path / "bare_out" / stem)
        for table in ("frames", "messages"):
            mine = [row for row in found[table] if by_conn[row["conn_id"]] == f"vxlan:{vni}"]
            assert without_ids(mine) == without_ids(expected[table]), (stem, table)


def tenant_ids() -> dict[str, tuple[Callable[[int], Packet], str]]:
    """Per kind of tunnel id: the headers around a tenant's inner frame given its id, and
    the ``encapsulation`` label (``{}``: the id) its connections must have."""
    underlay = Ether(**MACS) / IP(src="198.18.0.1", dst="198.18.0.2")
    return {
        "vlan": (lambda i: Ether(**MACS) / Dot1Q(vlan=i), "vlan:{}"),
        "qinq": (lambda i: Ether(**MACS) / Dot1AD(vlan=i) / Dot1Q(vlan=100), "vlan:{}/vlan:100"),
        "gre key": (
            lambda i: underlay / GRE(key_present=1, key=i, proto=0x6558) / Ether(),
            "gre:{}",
        ),
        "erspan ii": (
            lambda i: (
                underlay / GRE(seqnum_present=1, proto=0x88BE) / ERSPAN_II(session_id=i) / Ether()
            ),
            "erspan:{}",
        ),
        "erspan iii": (
            lambda i: underlay / GRE(proto=0x22EB) / ERSPAN_III(session_id=i) / Ether(),
            "erspan:{}",
        ),
        "vxlan": (
            lambda i: underlay / UDP(dport=4789) / VXLAN(vni=i, flags=0x08) / Ether(),
            "vxlan:{}",
        ),
        "geneve": (
            lambda i: underlay / UDP(dport=6081) / GENEVE(vni=i, proto=0x6558) / Ether(),
            "geneve:{}",
        ),
    }


@pytest.mark.parametrize("kind", list(tenant_ids()))
def test_the_same_endpoints_under_two_tunnel_ids_are_two_connections(kind: str) -> None:
    """Two tenants' clients, the same addresses and ports, each sends its own bytes: told
    apart by the VLAN, GRE key, ERSPAN session or VNI around them, never merged."""
    outer, label = tenant_ids()[kind]
    packets = [
        outer(ident) / segment(text * 32, ident=number, seq=1000 + 32 * number)
        for number in range(4)
        for ident, text in ((11, b"a"), (12, b"b"))
    ]
    sink, stats = read(packets)
    delivered = {r.conn.encapsulation: r.stream(0).data for r in sink.connections.values()}
    assert delivered == {label.format(11): b"a" * 128, label.format(12): b"b" * 128}
    assert stats.duplicates == 0


def test_shares_keep_each_tenant_s_flow_whole_and_apart() -> None:
    a, b = bytes([10, 0, 0, 1]), bytes([10, 0, 0, 2])
    assert flow_hash(a, 40000, b, 6650, "vxlan:1") == flow_hash(b, 6650, a, 40000, "vxlan:1")
    assert flow_hash(a, 40000, b, 6650) == flow_hash(a, 40000, b, 6650, "")
    hashes = {flow_hash(a, 40000, b, 6650, f"vxlan:{vni}") for vni in range(64)}
    assert len(hashes) == 64
    shares = [FlowShare(index, 4) for index in range(4)]
    for vni in range(64):
        keepers = [s.keeps(a, 40000, b, 6650, f"vxlan:{vni}") for s in shares]
        assert keepers.count(True) == 1


# -- damage ------------------------------------------------------------------------------------


def vxlan_frame(inner: bytes, vni: int = 5) -> Ether:
    return (
        Ether()
        / IP(src="198.18.0.1", dst="198.18.0.2")
        / UDP(dport=4789)
        / VXLAN(vni=vni, flags=0x08)
        / Raw(inner)
    )


@pytest.mark.parametrize("keep", range(14, 14 + 20 + 8 + 8 + 14 + 20 + 14, 3))
def test_a_tunnel_header_cut_short_is_counted_never_read_past(keep: int) -> None:
    whole = bytes(vxlan_frame(bytes(Ether() / segment(b"x" * 20, 1))))
    _, stats = read([Raw(whole[:keep])])
    assert stats.tcp_segments == 0
    assert stats.truncated_headers == 1


def test_tags_nested_beyond_the_bounds_are_too_deep() -> None:
    deep = Ether(type=0x8100)
    for _ in range(40):
        deep = deep / Dot1Q(vlan=7, type=0x8100)
    deep.lastlayer().type = 0x0800
    _, stats = read([deep / segment(b"y", 1)])
    assert stats.too_deep == 1 and stats.tcp_segments == 0


def test_a_spark_task_of_jobs_decode_takes_the_vxlan_port_too(tmp_path: Path) -> None:
    """jobs/decode.py reads its options with pwcap decode's: a Spark task given
    --vxlan-port decodes the tunnelled capture's frames, one without decodes none."""
    import argparse

    from pwcap.decode.options import add_decode_options, decode_options
    from pwcap.decode.spark import tasks
    from pwcap.decode.spark.listing import Listed

    (path,) = tunnels.wrap_samples(
        samples(("pulsar_plain",)), BY_NAME["vxlan_other_port"], tmp_path / "in"
    )
    listed = Listed(path.name, f"file://{path}", [str(path)], path.stat().st_size)
    frames = {}
    for given in ([], ["--vxlan-port", str(tunnels.CUSTOM_VXLAN_PORT)]):
        parser = argparse.ArgumentParser()
        add_decode_options(parser)
        options = decode_options(parser.parse_args(given))
        frames[bool(given)] = sum(
            table.num_rows
            for batch in tasks._decode_one(listed, options, None)
            for name, data in zip(*batch.to_pydict().values(), strict=True)
            if name == "frames"
            for table in [tasks.unpacked(pa.py_buffer(data)).read_all()]
        )
    assert frames[False] == 0
    assert frames[True] == decode(samples(("pulsar_plain",)), tmp_path / "bare").rows["frames"]


def test_both_engines_decode_every_encapsulation_alike(tmp_path: Path) -> None:
    """The compiled layers and the interpreted ones (PWCAP_PURE_PYTHON=1) write the same
    tables from every wrapping, outer fragments, copies and cut tunnel headers."""
    from tests.test_engines import run_pwcap

    folder = tmp_path / "in"
    sample = load(SAMPLES / "pulsar_plain.pcap")
    for wrapping in WRAPPINGS:
        write(folder / f"{wrapping.name}.pcap", wrapped(sample, wrapping))
    vxlan = wrapped(sample, BY_NAME["vxlan"])
    write(folder / "fragmented.pcap", tunnels.outer_fragments(vxlan, 200))
    doubled = [copy for record in vxlan.records for copy in (record, record)]
    write(folder / "doubled.pcap", Capture(ETHERNET, 262144, doubled))
    write(folder / "cut.pcap", cut(vxlan, 60))
    option = ["--vxlan-port", str(tunnels.CUSTOM_VXLAN_PORT)]
    outputs = {}
    for pure_python in (False, True):
        out = tmp_path / ("interpreted" if pure_python else "compiled")
        done = run_pwcap(
            "decode", str(folder), "-o", str(out), "-q", "--jobs", "1", *option,
            pure_python=pure_python,
        )  # fmt: skip
        assert done.returncode == 0, done.stderr
        outputs[pure_python] = out
    for table in TABLES:
        compiled = pq.read_table(outputs[False] / table).to_pylist()
        assert compiled or table == "anomalies"
        assert compiled == pq.read_table(outputs[True] / table).to_pylist(), table
