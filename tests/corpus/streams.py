"""Read a sample capture back into TCP byte streams and Pulsar command names.

Used by the corpus tests to prove that a capture carries exactly the frames the broker
journal says crossed the wire. It relies on dpkt for the link and IP layers, so it stays
independent of pwcap's own capture code; it assumes a clean capture (a handshake per
connection, no loss) and is not a general reassembler.
"""

from __future__ import annotations

import socket
import struct
from collections import defaultdict
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import dpkt

from pwcap.decode.pulsar._pb import pulsar_api_pb2 as pb

CHECKSUM_MAGIC = b"\x0e\x01"  # a payload command's checksum follows its command


class RawIP:
    """LINKTYPE_RAW (a TUN device's capture): no link header, the IP packet is ``data``."""

    def __init__(self, raw: bytes) -> None:
        self.data = dpkt.ip6.IP6(raw) if raw[0] >> 4 == 6 else dpkt.ip.IP(raw)


LINK_LAYERS = {
    dpkt.pcap.DLT_EN10MB: dpkt.ethernet.Ethernet,
    dpkt.pcap.DLT_LINUX_SLL: dpkt.sll.SLL,
    276: dpkt.sll2.SLL2,  # LINKTYPE_LINUX_SLL2
    101: RawIP,  # LINKTYPE_RAW
}


@dataclass(frozen=True)
class Packet:
    ts: float
    src: str
    dst: str
    seq: int
    flags: int
    payload: bytes


def open_capture(path: Path) -> dpkt.pcap.Reader | dpkt.pcapng.Reader:
    handle = path.open("rb")
    return dpkt.pcapng.Reader(handle) if path.suffix == ".pcapng" else dpkt.pcap.Reader(handle)


def read_packets(path: Path) -> Iterator[Packet]:
    reader = open_capture(path)
    link = LINK_LAYERS[reader.datalink()]
    for ts, raw in reader:
        ip = link(raw).data
        if not isinstance(ip, dpkt.ip.IP | dpkt.ip6.IP6) or not isinstance(ip.data, dpkt.tcp.TCP):
            continue
        family = socket.AF_INET6 if isinstance(ip, dpkt.ip6.IP6) else socket.AF_INET
        tcp = ip.data
        src = f"{socket.inet_ntop(family, ip.src)}:{tcp.sport}"
        dst = f"{socket.inet_ntop(family, ip.dst)}:{tcp.dport}"
        yield Packet(ts, src, dst, tcp.seq, tcp.flags, bytes(tcp.data))


def reassemble(path: Path) -> dict[tuple[str, str], bytes]:
    """Byte stream per (sender, receiver), from the SYN on; repeated segments kept once."""
    isn: dict[tuple[str, str], int] = {}
    pieces: dict[tuple[str, str], dict[int, bytes]] = defaultdict(dict)
    for packet in read_packets(path):
        key = (packet.src, packet.dst)
        if packet.flags & dpkt.tcp.TH_SYN:
            isn[key] = packet.seq
        elif packet.payload and key in isn:
            offset = (packet.seq - isn[key] - 1) % 2**32
            pieces[key][offset] = packet.payload
    streams = {}
    for key, by_offset in pieces.items():
        data = bytearray()
        for offset in sorted(by_offset):
            if offset != len(data):
                raise ValueError(f"{path}: {key} has a hole or overlap at {offset}")
            data += by_offset[offset]
        streams[key] = bytes(data)
    return streams


def command_names(stream: bytes) -> list[str]:
    """The BaseCommand type of every frame in a complete stream."""
    names = []
    offset = 0
    while offset < len(stream):
        total, command_size = struct.unpack_from(">II", stream, offset)
        command = pb.BaseCommand.FromString(stream[offset + 8 : offset + 8 + command_size])
        names.append(pb.BaseCommand.Type.Name(command.type))
        offset += 4 + total
    return names


def sends(stream: bytes) -> list[tuple[pb.CommandSend, pb.MessageMetadata]]:
    """Every SEND of a complete client stream: its command and its message's metadata
    (after the checksum, when the frame has one)."""
    found = []
    offset = 0
    while offset < len(stream):
        total, command_size = struct.unpack_from(">II", stream, offset)
        at = offset + 8 + command_size
        command = pb.BaseCommand.FromString(stream[offset + 8 : at])
        if command.type == pb.BaseCommand.SEND:
            if stream[at : at + 2] == CHECKSUM_MAGIC:
                at += 6  # the magic and the CRC32C
            (metadata_size,) = struct.unpack_from(">I", stream, at)
            metadata = pb.MessageMetadata.FromString(stream[at + 4 : at + 4 + metadata_size])
            found.append((command.send, metadata))
        offset += 4 + total
    return found


def captured_commands(path: Path) -> dict[tuple[str, str], list[str]]:
    """Command names per (sender, receiver) stream, as the capture carries them."""
    return {key: command_names(data) for key, data in reassemble(path).items()}


def journal_commands(journal: list[dict]) -> dict[tuple[str, str], list[str]]:
    """Command names per (sender, receiver) stream, as the broker journal records them."""
    streams: dict[tuple[str, str], list[str]] = defaultdict(list)
    for row in journal:
        client, broker = row["client"], row["broker"]
        streams[(client, broker) if row["dir"] == "c2b" else (broker, client)].append(row["cmd"])
    return dict(streams)
