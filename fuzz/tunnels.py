"""Sample captures as mirrors and overlays deliver them: each packet wrapped in the headers
a tunnel, a tag or a collector's link layer puts around it.

Every wrapping takes one Ethernet frame of a bare sample capture and returns the record a
capture point behind that encapsulation writes, and says which ``encapsulation`` label
pwcap must give its connections. The headers are built with scapy's layers (GRE, ERSPAN,
VXLAN, Geneve, MPLS, 802.1Q/802.1ad, Linux cooked captures, loopback), an implementation
of those formats independent of pwcap's; NFLOG, which scapy lacks, follows libpcap's
LINKTYPE_NFLOG description. The truth of a wrapped capture is its bare capture: the
tables pwcap writes from both are the same but for the ``encapsulation`` column.

    python -m fuzz.tunnels OUT_DIR         # every sample in every wrapping, for a look
"""

from __future__ import annotations

import struct
import sys
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from pathlib import Path

from scapy.contrib.erspan import ERSPAN_II, ERSPAN_III, ERSPAN_PlatformSpecific
from scapy.contrib.geneve import GENEVE, GeneveOptions
from scapy.contrib.mpls import MPLS, EoMCW
from scapy.layers.inet import GRE, IP, UDP, fragment
from scapy.layers.inet6 import IPv6, IPv6ExtHdrFragment, fragment6
from scapy.layers.l2 import CookedLinux, CookedLinuxV2, Dot1AD, Dot1Q, Ether, Loopback
from scapy.layers.vxlan import VXLAN
from scapy.packet import Packet, Raw

from fuzz.pcapfile import Capture, Record, read_pcap, write_pcap

ETHERNET, BSD_NULL, RAW, LINUX_SLL, NFLOG, LINUX_SLL2 = 1, 0, 101, 113, 239, 276
# The underlay: addresses of the project's own test hosts (RFC 2544's benchmark range)
UNDERLAY = ("198.18.0.1", "198.18.0.2")
UNDERLAY6 = ("2001:db8:18::1", "2001:db8:18::2")
MACS = {"src": "02:00:00:00:18:01", "dst": "02:00:00:00:18:02"}
CUSTOM_VXLAN_PORT = 9999

Wrap = Callable[[bytes], bytes]  # one bare Ethernet frame -> the records' bytes


def ip_of(frame: bytes) -> bytes:
    """The IP packet an untagged Ethernet frame carries."""
    (ethertype,) = struct.unpack_from(">H", frame, 12)
    assert ethertype in (0x0800, 0x86DD), f"not an IP frame: {ethertype:#x}"
    return frame[14:]


def ethertype(ip: bytes) -> int:
    return 0x0800 if ip[0] >> 4 == 4 else 0x86DD


def over_ipv4(layers: Packet) -> Packet:
    """``layers`` sent from one underlay host to the other over IPv4, in Ethernet."""
    return Ether(**MACS) / IP(src=UNDERLAY[0], dst=UNDERLAY[1], id=1) / layers


def over_ipv6(layers: Packet) -> Packet:
    return Ether(**MACS) / IPv6(src=UNDERLAY6[0], dst=UNDERLAY6[1]) / layers


def vxlan(frame: bytes, vni: int = 4242, port: int = 4789) -> Packet:
    return UDP(sport=49152, dport=port) / VXLAN(vni=vni, flags=0x08) / Raw(frame)


def geneve_options() -> list[GeneveOptions]:
    """Two options of different lengths (4 and 12 bytes of data), as a Geneve sender
    adds metadata."""
    return [
        GeneveOptions(classid=0x0102, type=0x80, data=b"\x00\x00\x00\x2a"),
        GeneveOptions(classid=0xFFFF, type=0x01, data=bytes(range(12))),
    ]


def nflog(ip: bytes, order: str = "<") -> bytes:
    """LINKTYPE_NFLOG: family, version, resource id, then TLVs in the byte order of the
    host that logged them (``order``: little-endian unless told), each padded to 4 bytes:
    a prefix string, then the payload."""
    family = 2 if ip[0] >> 4 == 4 else 10

    def tlv(kind: int, value: bytes) -> bytes:
        body = struct.pack(order + "HH", 4 + len(value), kind) + value
        return body + b"\x00" * (-len(body) % 4)

    return struct.pack(">BBH", family, 0, 7) + tlv(10, b"pwcap\x00") + tlv(9, ip)


@dataclass(frozen=True)
class Wrapping:
    """One way a capture point delivers the packets: ``wrap`` turns a bare Ethernet
    frame into a record of ``linktype``; pwcap labels its connections ``encapsulation``
    when given ``options``."""

    name: str
    linktype: int
    wrap: Wrap
    encapsulation: str
    options: tuple[str, ...] = field(default=())


def _packet(make: Callable[[bytes], Packet]) -> Wrap:
    return lambda frame: bytes(make(frame))


WRAPPINGS: tuple[Wrapping, ...] = (
    Wrapping(
        "vlan",
        ETHERNET,
        _packet(
            lambda f: (
                Ether(**MACS, type=0x8100)
                / Dot1Q(vlan=100, type=ethertype(ip_of(f)))
                / Raw(ip_of(f))
            )
        ),
        "vlan:100",
    ),
    Wrapping(
        "qinq",
        ETHERNET,
        _packet(
            lambda f: (
                Ether(**MACS, type=0x88A8)
                / Dot1AD(vlan=10, type=0x8100)
                / Dot1Q(vlan=100, type=ethertype(ip_of(f)))
                / Raw(ip_of(f))
            )
        ),
        "vlan:10/vlan:100",
    ),
    Wrapping(
        "mpls",
        ETHERNET,
        _packet(
            lambda f: (
                Ether(**MACS, type=0x8847)
                / MPLS(label=16, s=0, ttl=64)
                / MPLS(label=17, s=1, ttl=64)
                / Raw(ip_of(f))
            )
        ),
        "mpls",
    ),
    Wrapping(
        "mpls_pseudowire_control_word",
        ETHERNET,
        _packet(lambda f: Ether(**MACS, type=0x8847) / MPLS(label=100, s=1) / EoMCW() / Raw(f)),
        "mpls",
    ),
    Wrapping(
        "mpls_pseudowire",
        ETHERNET,
        _packet(lambda f: Ether(**MACS, type=0x8847) / MPLS(label=100, s=1) / Raw(f)),
        "mpls",
    ),
    Wrapping(
        "gre_checksum_key_sequence",
        ETHERNET,
        _packet(
            lambda f: over_ipv4(
                GRE(
                    chksum_present=1,
                    key_present=1,
                    seqnum_present=1,
                    key=77,
                    sequence_number=5,
                    proto=ethertype(ip_of(f)),
                )
                / Raw(ip_of(f))
            )
        ),
        "gre:77",
    ),
    Wrapping(
        "gre_over_ipv6",
        ETHERNET,
        _packet(lambda f: over_ipv6(GRE(proto=ethertype(ip_of(f))) / Raw(ip_of(f)))),
        "gre",
    ),
    Wrapping(
        "gretap",
        ETHERNET,
        _packet(lambda f: over_ipv4(GRE(key_present=1, key=5, proto=0x6558) / Raw(f))),
        "gre:5",
    ),
    Wrapping(
        "erspan_type_1",
        ETHERNET,
        _packet(lambda f: over_ipv4(GRE(proto=0x88BE) / Raw(f))),
        "erspan",
    ),
    Wrapping(
        "erspan_type_2",
        ETHERNET,
        _packet(
            lambda f: over_ipv4(
                GRE(seqnum_present=1, sequence_number=1, proto=0x88BE)
                / ERSPAN_II(session_id=12, vlan=0, index=3)
                / Raw(f)
            )
        ),
        "erspan:12",
    ),
    Wrapping(
        "erspan_type_3",
        ETHERNET,
        _packet(
            lambda f: over_ipv4(
                GRE(proto=0x22EB)
                / ERSPAN_III(session_id=13, timestamp=77, o=1, ft=0)
                / ERSPAN_PlatformSpecific(platf_id=3)
                / Raw(f)
            )
        ),
        "erspan:13",
    ),
    Wrapping("vxlan", ETHERNET, _packet(lambda f: over_ipv4(vxlan(f))), "vxlan:4242"),
    Wrapping(
        "vxlan_linux_port", ETHERNET, _packet(lambda f: over_ipv4(vxlan(f, 1, 8472))), "vxlan:1"
    ),
    Wrapping(
        "vxlan_other_port",
        ETHERNET,
        _packet(lambda f: over_ipv4(vxlan(f, 9, CUSTOM_VXLAN_PORT))),
        "vxlan:9",
        ("--vxlan-port", str(CUSTOM_VXLAN_PORT)),
    ),
    Wrapping("vxlan_over_ipv6", ETHERNET, _packet(lambda f: over_ipv6(vxlan(f))), "vxlan:4242"),
    Wrapping(
        "geneve",
        ETHERNET,
        _packet(
            lambda f: over_ipv4(
                UDP(sport=50000, dport=6081)
                / GENEVE(vni=7, proto=0x6558, options=geneve_options())
                / Raw(f)
            )
        ),
        "geneve:7",
    ),
    Wrapping(
        "geneve_ip",
        ETHERNET,
        _packet(
            lambda f: over_ipv4(
                UDP(sport=50000, dport=6081)
                / GENEVE(vni=8, proto=ethertype(ip_of(f)))
                / Raw(ip_of(f))
            )
        ),
        "geneve:8",
    ),
    Wrapping(
        "ip_in_ipv4",
        ETHERNET,
        lambda f: bytes(
            Ether(**MACS) / IP(src=UNDERLAY[0], dst=UNDERLAY[1], proto=_ip_proto(f)) / Raw(ip_of(f))
        ),
        "ipip",
    ),
    Wrapping(
        "ip_in_ipv6",
        ETHERNET,
        lambda f: bytes(
            Ether(**MACS)
            / IPv6(src=UNDERLAY6[0], dst=UNDERLAY6[1], nh=_ip_proto(f))
            / Raw(ip_of(f))
        ),
        "ipip",
    ),
    Wrapping(
        "nested",
        ETHERNET,
        _packet(
            lambda f: (
                Ether(**MACS, type=0x8100)
                / Dot1Q(vlan=30, type=0x0800)
                / IP(src=UNDERLAY[0], dst=UNDERLAY[1])
                / GRE(key_present=1, key=9, proto=0x0800)
                / IP(src="198.18.1.1", dst="198.18.1.2")
                / UDP(sport=49152, dport=4789)
                / VXLAN(vni=4242, flags=0x08)
                / Ether(**MACS, type=0x8100)
                / Dot1Q(vlan=100, type=ethertype(ip_of(f)))
                / Raw(ip_of(f))
            )
        ),
        "vlan:30/gre:9/vxlan:4242/vlan:100",
    ),
    Wrapping(
        "raw_ip_collector",
        RAW,
        lambda f: bytes(IP(src=UNDERLAY[0], dst=UNDERLAY[1]) / vxlan(f)),
        "vxlan:4242",
    ),
    Wrapping(
        "linux_cooked_collector",
        LINUX_SLL,
        lambda f: bytes(
            CookedLinux(pkttype=0, lladdrtype=1, lladdrlen=6, proto=0x0800)
            / IP(src=UNDERLAY[0], dst=UNDERLAY[1])
            / vxlan(f)
        ),
        "vxlan:4242",
    ),
    Wrapping(
        "linux_cooked_v2_collector",
        LINUX_SLL2,
        lambda f: bytes(
            CookedLinuxV2(proto=0x0800, ifindex=3, lladdrtype=1, pkttype=0, lladdrlen=6)
            / IP(src=UNDERLAY[0], dst=UNDERLAY[1])
            / vxlan(f)
        ),
        "vxlan:4242",
    ),
    Wrapping(
        "nflog_collector",
        NFLOG,
        lambda f: nflog(bytes(IP(src=UNDERLAY[0], dst=UNDERLAY[1]) / vxlan(f))),
        "vxlan:4242",
    ),
    Wrapping(
        "loopback_collector",
        BSD_NULL,
        lambda f: bytes(Loopback(type=2) / IP(src=UNDERLAY[0], dst=UNDERLAY[1]) / vxlan(f)),
        "vxlan:4242",
    ),
)
BY_NAME = {wrapping.name: wrapping for wrapping in WRAPPINGS}


def _ip_proto(frame: bytes) -> int:
    """IP in IP's protocol number for the frame's packet: 4 for IPv4, 41 for IPv6."""
    return 4 if ethertype(ip_of(frame)) == 0x0800 else 41


def wrapped(capture: Capture, wrapping: Wrapping) -> Capture:
    """Every record of a bare Ethernet capture wrapped; a record cut by the snaplen stays
    cut after the same inner byte (the outer lengths say the whole packet's)."""
    assert capture.linktype == ETHERNET
    records = []
    for record in capture.records:
        lost = record.orig_len - len(record.data)
        whole = record.data + bytes(lost)  # the bytes the snaplen dropped, as zeros
        outer = wrapping.wrap(whole)
        ip = whole[14:]  # every wrapping carries the frame's IP packet whole
        captured = outer.rfind(ip) + len(ip) - lost
        records.append(Record(record.ts_sec, record.ts_usec, len(outer), outer[:captured]))
    return Capture(wrapping.linktype, 262144, records)


def outer_fragments(capture: Capture, size: int) -> Capture:
    """Each IPv4 or IPv6 packet of an Ethernet capture over ``size`` bytes split into
    fragments of at most ``size`` bytes (an underlay whose MTU is smaller than the
    overlay's), in order, the same time each."""
    records = []
    for record in capture.records:
        frame = Ether(record.data)
        packet = frame.payload  # the outer IP packet, not one inside it
        if isinstance(packet, IP) and len(packet) > size:
            packet.id = len(records) & 0xFFFF  # each datagram its own identification
            pieces = fragment(packet, fragsize=size - 20 - (size - 20) % 8)
        elif isinstance(packet, IPv6) and len(packet) > size:
            inner = packet.payload
            packet.remove_payload()
            del packet.nh, packet.plen  # as dissected they name the UDP header: made anew
            pieces = fragment6(packet / IPv6ExtHdrFragment(id=len(records)) / inner, size)
        else:
            records.append(record)
            continue
        for piece in pieces:
            data = bytes(Ether(**MACS, type=frame.type) / piece)
            records.append(Record(record.ts_sec, record.ts_usec, len(data), data))
    return Capture(capture.linktype, capture.snaplen, records)


def load(path: Path) -> Capture:
    return read_pcap(path)


def write(path: Path, capture: Capture) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    write_pcap(path, capture)
    return path


def wrap_samples(paths: Iterable[Path], wrapping: Wrapping, folder: Path) -> list[Path]:
    """The samples wrapped, under their own names in ``folder`` (so their connection ids
    are the bare ones')."""
    return [write(folder / path.name, wrapped(load(path), wrapping)) for path in paths]


SAMPLES = Path(__file__).resolve().parent.parent / "sample_pcaps"


def main(out: str) -> None:
    samples = [p for p in sorted(SAMPLES.glob("pulsar_*.pcap")) if load(p).linktype == ETHERNET]
    for wrapping in WRAPPINGS:
        wrap_samples(samples, wrapping, Path(out) / wrapping.name)
        print(f"{wrapping.name}: {len(samples)} captures ({wrapping.encapsulation})")


if __name__ == "__main__":
    main(sys.argv[1])
