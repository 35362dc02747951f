"""Benchmark of ``pwcap.capture``: reading + TCP reassembly against the floor and tshark.

Generates (once, cached under ``bench_data/``) an Ethernet/IPv4/TCP pcap of many broker
connections: handshakes, length-prefixed frames of mixed sizes (mostly 40-400 bytes, some
of 16-64 KiB spanning many MSS segments), pure ACKs, and a sprinkle of reordered and
retransmitted segments. Then, on the same file in one run, one core, it reports packets/s
and MB/s for:

- ``header walk``: ``struct.unpack_from`` over ``mmap``, record headers only: the floor
  for any Python reader of the file;
- ``records``: :func:`pwcap.capture.iter_records` (chunked reads, timestamps, views);
- ``read_streams``: records + link/IP/TCP parsing + reassembly into a sink that drops
  everything (the whole of ``pwcap.capture``);
- ``dpkt parse`` (``--dpkt``): dpkt's Ethernet/IP/TCP objects per packet, for reference;
- ``tshark``: ``tshark -r FILE -T fields -e frame.number`` (dissects every packet).

    python bench/bench_capture.py [--packets 600000] [--dpkt] [--profile] [--no-tshark]
"""

from __future__ import annotations

import argparse
import mmap
import random
import resource
import shutil
import struct
import subprocess
import time
from collections.abc import Callable, Iterator
from functools import partial
from pathlib import Path

from contenders import engine_checked
from options import add_engine_option

from pwcap.capture import CaptureStats, iter_records, open_capture, read_streams
from pwcap.capture.events import Connection, Direction

CACHE = Path(__file__).resolve().parent.parent / "bench_data"
MSS = 1448
SERVER_IP = bytes([10, 0, 0, 1])
_ETHERNET = bytes(6) + bytes([2, 0, 0, 0, 0, 1]) + b"\x08\x00"
_IP = struct.Struct(">BBHHHBBH4s4s")
_TCP = struct.Struct(">HHIIBBHHH")
_RECORD = struct.Struct("<IIII")
SYN, ACK, FIN, PSH = 0x02, 0x10, 0x01, 0x08


# -- the capture ------------------------------------------------------------------------------


class _Flow:
    """One connection's sequence numbers, to write its packets in either direction."""

    def __init__(self, index: int, rng: random.Random) -> None:
        self.client_ip = bytes([10, 1, index >> 8 & 0xFF, index & 0xFF])
        self.client_port = 32768 + index
        self.seq = [rng.getrandbits(32), rng.getrandbits(32)]  # client, server

    def packet(self, direction: int, flags: int, payload: bytes = b"") -> bytes:
        ips = (self.client_ip, SERVER_IP) if direction == 0 else (SERVER_IP, self.client_ip)
        ports = (self.client_port, 6650) if direction == 0 else (6650, self.client_port)
        seq, ack = self.seq[direction], self.seq[1 - direction]
        tcp = _TCP.pack(ports[0], ports[1], seq, ack, 5 << 4, flags, 65535, 0, 0)
        ip = _IP.pack(0x45, 0, 40 + len(payload), 0, 0x4000, 64, 6, 0, *ips)
        self.seq[direction] = (seq + len(payload) + (1 if flags & (SYN | FIN) else 0)) & (
            0xFFFFFFFF
        )
        return _ETHERNET + ip + tcp + payload


def _frame(rng: random.Random) -> bytes:
    """A length-prefixed frame: mostly small commands, now and then a large batch."""
    size = rng.randint(16 << 10, 64 << 10) if rng.random() < 0.02 else rng.randint(40, 400)
    return struct.pack(">I", size) + rng.randbytes(size)


def _packets(count: int, connections: int, rng: random.Random) -> Iterator[bytes]:
    flows = [_Flow(i, rng) for i in range(connections)]
    for flow in flows:
        yield flow.packet(0, SYN)
        yield flow.packet(1, SYN | ACK)
        yield flow.packet(0, ACK)
    written = 3 * connections
    while written < count - 3 * connections:
        flow = rng.choice(flows)
        direction = rng.randrange(2)
        data = _frame(rng)
        for start in range(0, len(data), MSS):
            yield flow.packet(direction, ACK | PSH, data[start : start + MSS])
            written += 1
        if rng.random() < 0.3:
            yield flow.packet(1 - direction, ACK)
            written += 1
    for flow in flows:
        yield flow.packet(0, FIN | ACK)
        yield flow.packet(1, FIN | ACK)
        yield flow.packet(0, ACK)


def _disorder(packets: Iterator[bytes], rng: random.Random) -> Iterator[bytes]:
    """Swap neighbours (0.5 %) and send some twice (0.5 %), as real captures show."""
    held: bytes | None = None
    for packet in packets:
        if held is not None:
            yield packet
            yield held
            held = None
        elif rng.random() < 0.005:
            held = packet
        else:
            yield packet
            if rng.random() < 0.005:
                yield packet
    if held is not None:
        yield held


def generate(path: Path, count: int, connections: int = 500) -> None:
    rng = random.Random(count)
    ts = 1_700_000_000_000_000
    with path.open("wb") as out:
        out.write(struct.pack("<IHHiIII", 0xA1B2C3D4, 2, 4, 0, 0, 262144, 1))
        for packet in _disorder(_packets(count, connections, rng), rng):
            ts += rng.randint(1, 40)
            out.write(_RECORD.pack(ts // 1_000_000, ts % 1_000_000, len(packet), len(packet)))
            out.write(packet)


def capture_file(count: int) -> Path:
    CACHE.mkdir(exist_ok=True)
    path = CACHE / f"capture_{count}.pcap"
    if not path.exists():
        started = time.perf_counter()
        generate(path.with_suffix(".tmp"), count)
        path.with_suffix(".tmp").rename(path)
        print(f"generated {path} in {time.perf_counter() - started:.1f} s")
    return path


# -- what is measured -----------------------------------------------------------------------


class NullSink:
    """Takes every stream event and keeps nothing: the cost of capture/ alone."""

    def on_open(self, conn: Connection) -> None:
        pass

    def on_data(self, conn: Connection, direction: Direction, ts: int, offset: int, data: bytes):
        pass

    def on_gap(self, conn: Connection, direction: Direction, ts: int, offset: int, size: int):
        pass

    def on_close(self, conn: Connection, ts: int, reason: str) -> None:
        pass


def header_walk(path: Path) -> int:
    with path.open("rb") as handle, mmap.mmap(handle.fileno(), 0, access=mmap.ACCESS_READ) as m:
        unpack = _RECORD.unpack_from
        pos, end, packets = 24, len(m), 0
        while pos + 16 <= end:
            pos += 16 + unpack(m, pos)[2]
            packets += 1
        return packets


def records_only(path: Path) -> int:
    stream, name = open_capture(path)
    with stream:
        return sum(1 for _ in iter_records(stream, name))


def reassembly(path: Path, keep: list[CaptureStats] | None = None) -> int:
    stats = read_streams(path, NullSink(), server_ports={6650})
    if keep is not None:
        keep.append(stats)
    return stats.records


def dpkt_parse(path: Path) -> int:
    import dpkt

    packets = 0
    with path.open("rb") as handle:
        for _, buf in dpkt.pcap.Reader(handle):
            dpkt.ethernet.Ethernet(buf)
            packets += 1
    return packets


def tshark(path: Path) -> int:
    command = ["tshark", "-r", str(path), "-T", "fields", "-e", "frame.number"]
    done = subprocess.run(command, capture_output=True, check=True)
    return done.stdout.count(b"\n")


def measure(run: Callable[[Path], int], path: Path, child: bool = False) -> tuple[int, float]:
    """Packets seen and CPU seconds (of the child process for tshark)."""
    who = resource.RUSAGE_CHILDREN if child else resource.RUSAGE_SELF
    before = resource.getrusage(who)
    packets = run(path)
    after = resource.getrusage(who)
    return packets, (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--packets", type=int, default=600_000)
    parser.add_argument("--dpkt", action="store_true", help="also time dpkt's parse")
    parser.add_argument("--no-tshark", action="store_true")
    parser.add_argument("--profile", action="store_true", help="pyinstrument over read_streams")
    add_engine_option(parser)
    args = parser.parse_args()
    print(engine_checked(args.allow_interpreted))
    path = capture_file(args.packets)
    megabytes = path.stat().st_size / 1e6
    path.read_bytes()  # into the page cache, so every row reads from memory
    if args.profile:
        from pyinstrument import Profiler

        with Profiler() as profiler:
            reassembly(path)
        print(profiler.output_text(unicode=True, color=False))
        return
    kept: list[CaptureStats] = []
    runs: list[tuple[str, Callable[[Path], int], bool]] = [
        ("header walk (struct over mmap)", header_walk, False),
        ("records (iter_records)", records_only, False),
        ("read_streams (parse + reassembly)", partial(reassembly, keep=kept), False),
    ]
    if args.dpkt:
        runs.append(("dpkt Ethernet/IP/TCP parse", dpkt_parse, False))
    if not args.no_tshark and shutil.which("tshark"):
        runs.append(("tshark -T fields -e frame.number", tshark, True))
    print(f"{path.name}: {megabytes:,.0f} MB, one core, CPU seconds\n")
    print(f"{'':36} {'packets':>10} {'seconds':>8} {'packets/s':>11} {'MB/s':>8}")
    for label, run, child in runs:
        packets, seconds = measure(run, path, child)
        print(
            f"{label:36} {packets:>10,} {seconds:>8.2f} {packets / seconds:>11,.0f}"
            f" {megabytes / seconds:>8,.1f}"
        )
    stats = kept[0]
    print(
        f"\nreassembly: {stats.connections:,} connections, {stats.delivered_bytes / 1e6:,.1f} MB"
        f" delivered, {stats.retransmitted_bytes:,} B seen twice, {stats.reordered_segments:,}"
        f" segments held for order, {stats.gaps:,} gaps ({stats.gap_bytes:,} B)"
    )


if __name__ == "__main__":
    main()
