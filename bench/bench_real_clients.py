"""``pwcap decode`` against its peers on real-client traffic: the sample captures, replicated.

The capture (about 50 MB by default, kept under ``--data``) is made of copies of the
sample captures recorded from real Pulsar clients (``sample_pcaps/pulsar_*.pcap``; not
the ``derived`` ones, damaged on purpose, nor ``snaplen96``, whose packets are cut at 96
bytes). Every copy of every sample is one connection of its own: a client port of its
own, its TCP checksum recomputed, its timestamps shifted to start 20 ms after the
previous one, so connections overlap as at a busy broker and the file stays in time
order. Linux cooked (SLL, SLL2) samples get an Ethernet header so one pcap holds them
all. The frame count comes from the samples' truth files, not from pwcap, and pwcap's
dataset must have exactly that many frames.

    python bench/bench_real_clients.py [--size 50M] [--runs 3] [--data DIR] [--profile]
"""

from __future__ import annotations

import argparse
import heapq
import json
import struct
import sys
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import dpkt
from contenders import (
    ONE_PROCESS,
    PLUGIN,
    TSHARK_DATA,
    decoded_frames,
    peers,
    pwcap_decode,
    pwcap_version,
)
from options import add_options
from profile_decode import profile_decode
from scoreboard import contest, print_table

SAMPLES = Path(__file__).resolve().parent.parent / "sample_pcaps"
LEFT_OUT = ("pulsar_derived_", "pulsar_snaplen96")
START_US = 1_700_000_000_000_000
STAGGER_US = 20_000
TARGETS = {PLUGIN: 3.0, TSHARK_DATA: 1.7}  # issue 10: pwcap this many times faster (CPU)
FIRST_CLIENT_PORT = 20_000
PCAP_HEADER = struct.Struct("<IHHiIII")
RECORD = struct.Struct("<IIII")
_ETHERNET_LINKS = {dpkt.pcap.DLT_EN10MB}
_COOKED_LINKS = {dpkt.pcap.DLT_LINUX_SLL: dpkt.sll.SLL, dpkt.pcap.DLT_LINUX_SLL2: dpkt.sll2.SLL2}


@dataclass(frozen=True)
class Sample:
    """One real-client capture: its packets as Ethernet frames, times from its start."""

    name: str
    packets: list[tuple[int, dpkt.ethernet.Ethernet]]
    server_port: int
    frames: int  # Pulsar frames in it, as its truth file counts them
    size: int


def _ethernet(link: int, data: bytes) -> dpkt.ethernet.Ethernet:
    if link in _ETHERNET_LINKS:
        return dpkt.ethernet.Ethernet(data)
    cooked = _COOKED_LINKS[link](data)
    return dpkt.ethernet.Ethernet(dst=bytes(6), src=bytes(6), type=cooked.ethtype, data=cooked.data)


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
    return Sample(path.name, packets, syn.dport, truth["frames_total"], path.stat().st_size)


def real_client_samples() -> list[Sample]:
    paths = sorted(SAMPLES.glob("pulsar_*.pcap"))
    return [load_sample(path) for path in paths if not path.name.startswith(LEFT_OUT)]


def _copy(sample: Sample, start_us: int, client_port: int) -> Iterator[tuple[int, bytes]]:
    """The sample's packets from ``start_us`` on, its client on ``client_port``."""
    for ts, frame in sample.packets:
        tcp = frame.data.data
        if tcp.sport == sample.server_port:
            tcp.dport = client_port
        else:
            tcp.sport = client_port
        tcp.sum = 0  # dpkt computes it again when the packet is packed...
        if isinstance(frame.data, dpkt.ip.IP):
            frame.data.sum = 0  # ...if IPv4's is computed again too
        yield start_us + ts, bytes(frame)


@dataclass(frozen=True)
class Replica:
    """What a replicated capture holds."""

    copies: int
    samples: list[Sample]

    @property
    def frames(self) -> int:
        return self.copies * sum(sample.frames for sample in self.samples)

    @property
    def ports(self) -> list[int]:
        return sorted({sample.server_port for sample in self.samples})


def plan(samples: list[Sample], size: int) -> Replica:
    copies = -(-size // sum(sample.size for sample in samples))
    return Replica(copies, samples)


def write_replica(path: Path, replica: Replica) -> None:
    units = replica.copies * len(replica.samples)
    if FIRST_CLIENT_PORT + units > 65536:
        raise SystemExit(f"{units} connections need more client ports than TCP has: ask less")
    copies = (
        _copy(sample, START_US + unit * STAGGER_US, FIRST_CLIENT_PORT + unit)
        for unit, sample in enumerate(replica.samples * replica.copies)
    )
    with path.open("wb") as out:
        out.write(PCAP_HEADER.pack(0xA1B2C3D4, 2, 4, 0, 0, 262144, dpkt.pcap.DLT_EN10MB))
        for ts, packet in heapq.merge(*copies, key=lambda stamped: stamped[0]):
            seconds, micros = divmod(ts, 1_000_000)
            out.write(RECORD.pack(seconds, micros, len(packet), len(packet)))
            out.write(packet)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    add_options(parser, size="50M", runs=3)
    args = parser.parse_args()
    args.data.mkdir(parents=True, exist_ok=True)
    replica = plan(real_client_samples(), args.size)
    capture = args.data / f"real_clients_{replica.copies}x.pcap"
    if not capture.exists():
        write_replica(capture, replica)
    megabytes = capture.stat().st_size / 1e6
    out = args.data / "out_real_clients"
    others, notes = peers(capture, replica.ports)
    print(pwcap_version())
    print(
        f"real-client traffic: {capture} ({megabytes:.1f} MB, {replica.frames:,} frames,"
        f" {replica.copies} copies of {len(replica.samples)} samples, Pulsar ports"
        f" {', '.join(map(str, replica.ports))})"
    )
    for note in notes:
        print(f"  {note}")
    results = contest([pwcap_decode(capture, out, *ONE_PROCESS), *others], args.runs)
    decoded = decoded_frames(out)
    if decoded != replica.frames:
        sys.exit(f"pwcap decoded {decoded:,} frames of {replica.frames:,}: figures not comparable")
    print_table(results, replica.frames, megabytes)
    for result in results:
        if result.contender.name in TARGETS:
            goal, reached = TARGETS[result.contender.name], result.cpu / results[0].cpu
            print(
                f"  issue 10 target: pwcap at least {goal}x faster than {result.contender.name}"
                f" (CPU): {reached:.2f}x: {'met' if reached >= goal else 'NOT met'}"
            )
    if args.profile:
        profile_decode(capture, out, replica.frames)


if __name__ == "__main__":
    main()
