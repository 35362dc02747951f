"""What decapsulation costs: the real-client benchmark capture bare, in VXLAN, and in VXLAN
over an underlay that fragments every outer packet.

The bare capture is ``bench_real_clients.py``'s (copies of the real-client samples, one
connection each). The wrapped one carries each of its frames in VXLAN (VNI 4242, UDP
4789) over IPv4, as a cloud packet mirror delivers them; the fragmented one splits every
outer IPv4 packet into two fragments (an overlay one step over its underlay's MTU), so
every record is a fragment that reassembly must hold or complete. Each must decode to
exactly the bare capture's frame count. Issue 35's targets: the wrapped capture at most
10% more CPU than the bare one, the fragmented one at most 30% more.

    python bench/bench_tunnels.py [--size 50M] [--runs 3] [--data DIR]
"""

from __future__ import annotations

import argparse
import struct
import sys
from collections.abc import Iterator
from pathlib import Path

from bench_real_clients import plan, real_client_samples, write_replica
from contenders import ONE_PROCESS, decoded_rows, engine_checked, pwcap_decode
from options import add_options
from scoreboard import contest, print_table

TARGETS = {"vxlan": 1.10, "vxlan, every outer packet in fragments": 1.30}  # CPU over bare
PCAP_HEADER = struct.Struct("<IHHiIII")
RECORD = struct.Struct("<IIII")
OUTER_MACS = bytes.fromhex("020000001802020000001801")
UNDERLAY = bytes([198, 18, 0, 1]) + bytes([198, 18, 0, 2])
VNI = 4242


def _records(path: Path) -> Iterator[tuple[bytes, bytes]]:
    """(record header, frame) of each record of a pcap this process wrote."""
    with path.open("rb") as handle:
        header = handle.read(PCAP_HEADER.size)
        assert PCAP_HEADER.unpack(header)[-1] == 1, "an Ethernet capture"
        while head := handle.read(RECORD.size):
            caplen = RECORD.unpack(head)[2]
            yield head, handle.read(caplen)


def _checksum(header: bytes) -> int:
    total = sum(struct.unpack(f">{len(header) // 2}H", header))
    while total >> 16:
        total = (total & 0xFFFF) + (total >> 16)
    return ~total & 0xFFFF


def _ipv4(payload: bytes, ident: int, fragment: int = 0) -> bytes:
    """An IPv4 packet from one underlay host to the other (protocol UDP)."""
    head = struct.pack(
        ">BBHHHBBH8s", 0x45, 0, 20 + len(payload), ident, fragment, 64, 17, 0, UNDERLAY
    )
    return head[:10] + struct.pack(">H", _checksum(head)) + head[12:] + payload


def vxlan_datagram(frame: bytes) -> bytes:
    """UDP to port 4789 (no checksum, as IPv4 allows), the VXLAN header, the frame."""
    body = struct.pack(">II", 0x08000000, VNI << 8) + frame
    return struct.pack(">HHHH", 49152, 4789, 8 + len(body), 0) + body


def wrap(bare: Path, out: Path, fragmented: bool) -> None:
    """``bare`` with every frame in VXLAN; with ``fragmented``, every outer packet in two
    IPv4 fragments (split at a multiple of 8 bytes, as fragment offsets count)."""
    with out.open("wb") as handle:
        handle.write(PCAP_HEADER.pack(0xA1B2C3D4, 2, 4, 0, 0, 262144, 1))
        for ident, (head, frame) in enumerate(_records(bare)):
            seconds, micros = RECORD.unpack(head)[:2]
            datagram = vxlan_datagram(frame)
            ident &= 0xFFFF
            if fragmented:
                half = max(8, len(datagram) // 2 // 8 * 8)
                packets = [
                    _ipv4(datagram[:half], ident, 0x2000),
                    _ipv4(datagram[half:], ident, half // 8),
                ]
            else:
                packets = [_ipv4(datagram, ident)]
            for packet in packets:
                record = OUTER_MACS + b"\x08\x00" + packet
                handle.write(RECORD.pack(seconds, micros, len(record), len(record)) + record)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    add_options(parser, size="50M", runs=3)
    args = parser.parse_args()
    print(engine_checked(args.allow_interpreted))
    args.data.mkdir(parents=True, exist_ok=True)
    replica = plan(real_client_samples(), args.size)
    bare = args.data / f"real_clients_{replica.copies}x.pcap"
    if not bare.exists():
        write_replica(bare, replica)
    shapes = {"bare": bare}
    for name, suffix, fragmented in (
        ("vxlan", "vxlan", False),
        ("vxlan, every outer packet in fragments", "vxlan_fragmented", True),
    ):
        shapes[name] = args.data / f"real_clients_{replica.copies}x_{suffix}.pcap"
        if not shapes[name].exists():
            wrap(bare, shapes[name], fragmented)
    contenders = []
    for name, capture in shapes.items():
        contender = pwcap_decode(
            capture, args.data / f"out_tunnels_{len(contenders)}", *ONE_PROCESS
        )
        contenders.append(
            type(contender)(f"{name} ({capture.stat().st_size / 1e6:.0f} MB)", contender.argv)
        )
    results = contest(contenders, args.runs)
    for index in range(len(shapes)):
        decoded = decoded_rows(args.data / f"out_tunnels_{index}")
        if decoded != replica.frames:
            sys.exit(f"{contenders[index].name}: {decoded:,} frames of {replica.frames:,}")
    print(f"real-client traffic, {replica.frames:,} frames, as delivered bare and wrapped:")
    print_table(results, replica.frames, bare.stat().st_size / 1e6)
    for name, result in zip(list(shapes)[1:], results[1:], strict=True):
        goal, reached = TARGETS[name], result.cpu / results[0].cpu
        print(
            f"  issue 35 target: {name} at most {goal:.2f}x the bare capture's CPU:"
            f" {reached:.3f}x: {'met' if reached <= goal else 'NOT met'}"
        )


if __name__ == "__main__":
    main()
