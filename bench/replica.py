"""Captures made of copies of real-client recordings, every copy a connection of its own.

A sample is a capture recorded from a real Pulsar client (``sample_pcaps/`` or
``bench/samples/``) with its truth file and broker journal. A copy keeps the sample's
packets and their spacing in time; its client gets a port of its own and its TCP checksum
is recomputed, so every copy is a distinct connection. Copies either overlap (each starts
20 ms after the previous one, as at a busy broker) or follow one another (each starts
after the previous one's last packet); either way the file stays in time order. Linux
cooked (SLL, SLL2) samples get an Ethernet header so one pcap holds them all.

What a replica holds is counted from the samples' records, not by pwcap: frames from the
truth file, message rows from the broker journal (each payload frame's
``meta_num_messages``: a batch is a row per message, a chunk a row of its own).
"""

from __future__ import annotations

import heapq
import json
import struct
from collections.abc import Iterator
from dataclasses import dataclass
from functools import cached_property
from itertools import accumulate
from pathlib import Path

import dpkt

SAMPLES = Path(__file__).resolve().parent.parent / "sample_pcaps"  # the test corpus
BENCH_SAMPLES = Path(__file__).resolve().parent / "samples"  # recordings of one shape each
# Not real-client traffic as recorded: damaged on purpose, or packets cut at 96 bytes.
LEFT_OUT = ("pulsar_derived_", "pulsar_snaplen96")
START_US = 1_700_000_000_000_000
STAGGER_US = 20_000  # overlapping copies: from one copy's start to the next's
GAP_US = 1_000  # copies one after another: from one copy's last packet to the next's first
FIRST_CLIENT_PORT = 20_000
PCAP_HEADER = struct.Struct("<IHHiIII")
RECORD = struct.Struct("<IIII")
_ETHERNET_LINKS = {dpkt.pcap.DLT_EN10MB}
_COOKED_LINKS = {dpkt.pcap.DLT_LINUX_SLL: dpkt.sll.SLL, dpkt.pcap.DLT_LINUX_SLL2: dpkt.sll2.SLL2}
LINKTYPE_RAW = 101  # bare IPv4 or IPv6 packets, as tcpdump writes a TUN device's


@dataclass(frozen=True)
class Sample:
    """One real-client capture: its packets as Ethernet frames, times from its start."""

    name: str
    packets: list[tuple[int, dpkt.ethernet.Ethernet]]
    server_port: int
    frames: int  # Pulsar frames in it, as its truth file counts them
    messages: int  # rows of the messages table it makes, as its broker journal counts them
    size: int

    @property
    def duration_us(self) -> int:
        return self.packets[-1][0]

    @cached_property
    def client_slots(self) -> tuple[int, ...]:
        """Per packet, which of the sample's client ports it carries, counted from 0.

        Computed once, from the packets as recorded: copies rewrite the ports in place.
        """
        clients = [
            tcp.dport if tcp.sport == self.server_port else tcp.sport
            for _, frame in self.packets
            if isinstance(tcp := frame.data.data, dpkt.tcp.TCP)
        ]
        slot = {port: n for n, port in enumerate(sorted(set(clients)))}
        return tuple(slot[port] for port in clients)

    @property
    def clients(self) -> int:
        return max(self.client_slots) + 1


def _ethernet(link: int, data: bytes) -> dpkt.ethernet.Ethernet:
    if link in _ETHERNET_LINKS:
        return dpkt.ethernet.Ethernet(data)
    if link == LINKTYPE_RAW:
        version6 = data[0] >> 4 == 6
        packet = dpkt.ip6.IP6(data) if version6 else dpkt.ip.IP(data)
        ethtype = dpkt.ethernet.ETH_TYPE_IP6 if version6 else dpkt.ethernet.ETH_TYPE_IP
        return dpkt.ethernet.Ethernet(dst=bytes(6), src=bytes(6), type=ethtype, data=packet)
    cooked = _COOKED_LINKS[link](data)
    return dpkt.ethernet.Ethernet(dst=bytes(6), src=bytes(6), type=cooked.ethtype, data=cooked.data)


def _journal_messages(journal: Path) -> int:
    lines = journal.read_text().splitlines()
    return sum(json.loads(line).get("meta_num_messages", 0) for line in lines if line)


def load_sample(path: Path) -> Sample:
    with path.open("rb") as handle:
        reader = dpkt.pcap.Reader(handle)
        link = reader.datalink()
        stamped = [(round(ts * 1e6), _ethernet(link, data)) for ts, data in reader]
    first = stamped[0][0]
    packets = [(ts - first, frame) for ts, frame in stamped]
    syn = next(
        tcp
        for _, frame in packets
        if isinstance(tcp := frame.data.data, dpkt.tcp.TCP)
        and tcp.flags & dpkt.tcp.TH_SYN
        and not tcp.flags & dpkt.tcp.TH_ACK
    )
    truth = json.loads(path.with_suffix(".truth.json").read_text())
    messages = _journal_messages(path.with_suffix(".broker.jsonl"))
    return Sample(
        path.name, packets, syn.dport, truth["frames_total"], messages, path.stat().st_size
    )


def real_client_samples() -> list[Sample]:
    """Every clean real-client recording of the test corpus, as recorded: none in which
    a client was killed in the middle of a frame (the truth's ``capture.client_killed``)."""
    paths = sorted(SAMPLES.glob("pulsar_*.pcap"))
    kept = [path for path in paths if not path.name.startswith(LEFT_OUT) and _clean(path)]
    return [load_sample(path) for path in kept]


def _clean(path: Path) -> bool:
    truth = json.loads(path.with_suffix(".truth.json").read_text())
    return not truth["capture"].get("client_killed", False)


def _copy(sample: Sample, start_us: int, first_port: int) -> Iterator[tuple[int, bytes]]:
    """The sample's packets from ``start_us`` on, its clients on ports from ``first_port``."""
    for (ts, frame), slot in zip(sample.packets, sample.client_slots, strict=True):
        tcp = frame.data.data
        if tcp.sport == sample.server_port:
            tcp.dport = first_port + slot
        else:
            tcp.sport = first_port + slot
        tcp.sum = 0  # dpkt computes it again when the packet is packed...
        if isinstance(frame.data, dpkt.ip.IP):
            frame.data.sum = 0  # ...if IPv4's is computed again too
        yield start_us + ts, bytes(frame)


@dataclass(frozen=True)
class Replica:
    """What a replicated capture holds: ``copies`` times every sample, in that order."""

    copies: int
    samples: list[Sample]
    one_after_another: bool = False  # or each copy 20 ms after the previous one's start

    @property
    def units(self) -> list[Sample]:
        return self.samples * self.copies

    @property
    def frames(self) -> int:
        return self.copies * sum(sample.frames for sample in self.samples)

    @property
    def messages(self) -> int:
        return self.copies * sum(sample.messages for sample in self.samples)

    @property
    def ports(self) -> list[int]:
        return sorted({sample.server_port for sample in self.samples})

    def starts(self) -> list[int]:
        """Each copy's first packet time, in microseconds."""
        if not self.one_after_another:
            return [START_US + unit * STAGGER_US for unit in range(len(self.units))]
        starts, at = [], START_US
        for sample in self.units:
            starts.append(at)
            at += sample.duration_us + GAP_US
        return starts


def plan(samples: list[Sample], size: int) -> Replica:
    """Overlapping copies of every sample, enough for about ``size`` bytes."""
    copies = -(-size // sum(sample.size for sample in samples))
    return Replica(copies, samples)


def write_replica(path: Path, replica: Replica) -> None:
    units = replica.units
    firsts = list(accumulate((s.clients for s in units), initial=FIRST_CLIENT_PORT))
    if firsts[-1] > 65536:
        raise SystemExit(f"{firsts[-1] - FIRST_CLIENT_PORT} clients need more ports than TCP has")
    copies = (
        _copy(sample, start, first)
        for sample, start, first in zip(units, replica.starts(), firsts, strict=False)
    )
    with path.open("wb") as out:
        out.write(PCAP_HEADER.pack(0xA1B2C3D4, 2, 4, 0, 0, 262144, dpkt.pcap.DLT_EN10MB))
        for ts, packet in heapq.merge(*copies, key=lambda stamped: stamped[0]):
            seconds, micros = divmod(ts, 1_000_000)
            out.write(RECORD.pack(seconds, micros, len(packet), len(packet)))
            out.write(packet)
