"""A soak: gigabytes of generated traffic piped through ``pwcap decode -``, its memory watched.

    nice -n 10 python bench/soak.py [--size 10G] [--minutes M] [--every 5] [--out DIR]

The traffic is made as it is written, straight into the decoder's standard input (as
``tcpdump -w - | pwcap decode -`` would give it): Pulsar connections of both benchmark
shapes (small async frames; 100 KiB batches and 1 MiB chunked messages) and Kafka 0.7
connections (gzip'd PRODUCEs, FETCHes and their answers), a few at a time, each used for a
while then closed, and one in ten abandoned without a FIN, so every per-connection table
of the decoder fills and empties, for hours if asked. A thread reads the decoder's
resident memory every ``--every`` seconds, and a line is printed at each gigabyte piped.
``--minutes`` stops the piping (between two records, so the capture stays whole) when
the time is up, if ``--size`` is not reached first.

At the end: memory by gigabyte piped, the peak, and whether it stayed flat (the peak of
the second half of the run within 5% or 16 MB of the peak of the first half after the
first tenth, which is start-up); rows written, MB/s and the decoder's CPU seconds. Exit
status 1 when the decode failed, memory grew, or the peak passed 400 MB.
"""

from __future__ import annotations

import argparse
import gzip
import os
import struct
import subprocess
import sys
import tempfile
import threading
import time
import zlib
from collections.abc import Iterator
from dataclasses import dataclass, field
from itertools import cycle
from pathlib import Path

from bench_decode import PCAP_HEADER, RECORD, SHAPES, _setup, _Tcp
from options import parse_size

MEMORY_MB = 400
CONCURRENT = 6  # connections open at once
BLOCKS_PER_CONNECTION = 4
ABANDONED_EVERY = 10  # every tenth connection ends without a FIN
KAFKA_PORT = 9092
GROWTH_MB = 16  # the second half's peak may pass the first's by this much, or by 5%


# -- traffic ----------------------------------------------------------------------------------


def _kafka_message(payload: bytes, codec: int = 0) -> bytes:
    """A magic-1 0.7 message: ``[length][magic][attributes][crc32][payload]``."""
    body = bytes([1, codec]) + struct.pack(">I", zlib.crc32(payload)) + payload
    return struct.pack(">i", len(body)) + body


def _kafka_topic(topic: bytes, partition: int) -> bytes:
    return struct.pack(">h", len(topic)) + topic + struct.pack(">i", partition)


def _kafka_block(start: int, rounds: int) -> tuple[bytes, bytes]:
    """``rounds`` gzip'd PRODUCEs of 100 messages and FETCHes answered with them."""
    c2b, b2c = [], []
    for index in range(start, start + rounds):
        messages = b"".join(_kafka_message(b"soak-%08d-%03d" % (index, n) * 4) for n in range(100))
        wrapper = _kafka_message(gzip.compress(messages, 6), codec=1)
        produce = struct.pack(">h", 0) + _kafka_topic(b"soak", index % 4)
        produce += struct.pack(">i", len(wrapper)) + wrapper
        fetch = struct.pack(">h", 1) + _kafka_topic(b"soak", index % 4)
        fetch += struct.pack(">qi", index * len(wrapper), 1 << 20)
        answer = struct.pack(">h", 0) + wrapper
        c2b += [struct.pack(">i", len(produce)) + produce, struct.pack(">i", len(fetch)) + fetch]
        b2c.append(struct.pack(">i", len(answer)) + answer)
    return b"".join(c2b), b"".join(b2c)


@dataclass(frozen=True)
class Kind:
    """One kind of connection: its server port, opening exchange and blocks of traffic."""

    port: int
    opening: tuple[bytes, bytes]
    blocks: list[tuple[bytes, bytes]]


def kinds() -> list[Kind]:
    """The kinds of connection the soak cycles through, their traffic made once."""
    found = []
    for shape in ("small", "large"):
        build, rounds = SHAPES[shape]
        blocks = [build(n * rounds, rounds) for n in range(BLOCKS_PER_CONNECTION)]
        found.append(Kind(6650, _setup(), blocks))
    kafka = [_kafka_block(n * 50, 50) for n in range(BLOCKS_PER_CONNECTION)]
    found.append(Kind(KAFKA_PORT, (b"", b""), kafka))
    return found


class _Connection(_Tcp):
    """A benchmark connection from client number ``number`` to ``kind``'s server."""

    def __init__(self, number: int, kind: Kind) -> None:
        super().__init__(0)
        self.client = bytes([10, 1 + number // 60000 % 200, number // 250 % 240, 1 + number % 250])
        self.client = self.client, 1024 + number % 60000
        self.server = bytes([10, 0, 1, 1]), kind.port
        self.kind = kind
        self.next_block = 0
        self.abandoned = number % ABANDONED_EVERY == ABANDONED_EVERY - 1

    def opening(self) -> Iterator[bytes]:
        yield self.packet(0, 0x02)
        yield self.packet(1, 0x12)
        yield self.packet(0, 0x10)
        yield from self.exchange(*self.kind.opening)

    def step(self) -> Iterator[bytes]:
        """The next block of traffic, and the close after the last one."""
        yield from self.exchange(*self.kind.blocks[self.next_block])
        self.next_block += 1
        if self.done and not self.abandoned:
            yield self.packet(0, 0x11)
            yield self.packet(1, 0x11)

    @property
    def done(self) -> bool:
        return self.next_block >= len(self.kind.blocks)


def packets(size: int) -> Iterator[bytes]:
    """About ``size`` bytes of pcap records, the file header first, one record a chunk."""
    yield PCAP_HEADER.pack(0xA1B2C3D4, 2, 4, 0, 0, 262144, 1)
    ts = 1_700_000_000_000_000
    written = 0
    numbers = iter(range(1 << 40))
    kinds_cycle = cycle(kinds())
    open_ = []
    while written < size:
        while len(open_) < CONCURRENT:
            connection = _Connection(next(numbers), next(kinds_cycle))
            open_.append(connection)
            for packet in connection.opening():
                ts += 5
                written += RECORD.size + len(packet)
                yield (
                    RECORD.pack(ts // 1_000_000, ts % 1_000_000, len(packet), len(packet)) + packet
                )
        for connection in list(open_):
            for packet in connection.step():
                ts += 5
                written += RECORD.size + len(packet)
                yield (
                    RECORD.pack(ts // 1_000_000, ts % 1_000_000, len(packet), len(packet)) + packet
                )
            if connection.done:
                open_.remove(connection)


# -- the run ----------------------------------------------------------------------------------


@dataclass
class Soak:
    """What a soak measured."""

    piped: int = 0  # bytes written to the decoder
    samples: list[tuple[float, int, float]] = field(default_factory=list)  # (s, bytes, RSS MB)
    status: int | None = None
    stderr: str = ""
    seconds: float = 0.0
    cpu_seconds: float = 0.0
    peak_mb: float = 0.0  # the kernel's figure for the whole run (ru_maxrss)

    def flat(self) -> tuple[float, float, bool]:
        """The peaks of the first half (after the first tenth) and of the second half of
        the samples, and whether the second stays within the allowed growth of the first."""
        count = len(self.samples)
        first = [mb for _, _, mb in self.samples[count // 10 : count // 2]] or [0.0]
        second = [mb for _, _, mb in self.samples[count // 2 :]] or [0.0]
        before, after = max(first), max(second)
        return before, after, after <= before + max(GROWTH_MB, 0.05 * before)


def rss_mb(pid: int) -> float | None:
    """A process's resident memory now, in MB (None once it is gone)."""
    try:
        with open(f"/proc/{pid}/status") as status:
            for line in status:
                if line.startswith("VmRSS:"):
                    return int(line.split()[1]) / 1024
    except OSError:
        return None
    return None


def soak(size: int, out: Path, every: float, seconds: float, python: str = sys.executable) -> Soak:
    """Pipe ``size`` bytes of generated traffic through ``pwcap decode - -o out``, for
    ``seconds`` at most."""
    result = Soak()
    command = [python, "-m", "pwcap.cli", "decode", "-", "-o", str(out), "-q", "--overwrite"]
    started = time.monotonic()
    process = subprocess.Popen(
        command, stdin=subprocess.PIPE, stderr=subprocess.PIPE, bufsize=1 << 20
    )
    assert process.stdin is not None and process.stderr is not None
    stop = threading.Event()

    def sample() -> None:
        while not stop.wait(every):
            mb = rss_mb(process.pid)
            if mb is not None:
                result.samples.append((time.monotonic() - started, result.piped, mb))

    errors: list[bytes] = []
    reader = threading.Thread(target=lambda: errors.append(process.stderr.read()))
    sampler = threading.Thread(target=sample, daemon=True)
    reader.start()
    sampler.start()
    try:
        next_gb, deadline = 1, started + seconds
        for chunk in packets(size):
            process.stdin.write(chunk)
            result.piped += len(chunk)
            if result.piped >= next_gb * 1e9:
                mb = max((mb for _, _, mb in result.samples), default=0.0)
                at = time.monotonic() - started
                print(f"{next_gb} GB piped at {at:.0f} s, peak RSS so far {mb:.0f} MB", flush=True)
                next_gb += 1
            if time.monotonic() > deadline:
                break
        process.stdin.close()
    except BrokenPipeError:  # the decoder stopped early: its status and stderr say why
        pass
    _, status, usage = os.wait4(process.pid, 0)
    process.returncode = os.waitstatus_to_exitcode(status)
    stop.set()
    reader.join()
    result.status = process.returncode
    result.stderr = b"".join(errors).decode(errors="replace")
    result.seconds = time.monotonic() - started
    result.cpu_seconds = usage.ru_utime + usage.ru_stime
    result.peak_mb = usage.ru_maxrss / 1024
    return result


def report(result: Soak, out: Path) -> bool:
    """Print what the soak measured; whether it kept its promises."""
    gb = result.piped / 1e9
    print(
        f"piped {gb:.2f} GB in {result.seconds:.0f} s ({result.piped / 1e6 / result.seconds:.1f}"
        f" MB/s), decoder CPU {result.cpu_seconds:.0f} s (user+sys), exit {result.status}"
    )
    marks: dict[int, float] = {}
    for _, piped, mb in result.samples:
        marks[int(piped // 1e9)] = max(marks.get(int(piped // 1e9), 0.0), mb)
    print("peak RSS MB by GB piped: " + ", ".join(f"{gb}: {mb:.0f}" for gb, mb in marks.items()))
    before, after, flat = result.flat()
    print(
        f"peak RSS {result.peak_mb:.0f} MB; first half {before:.0f} MB, second half"
        f" {after:.0f} MB: {'flat' if flat else 'GROWING'}"
    )
    ok = result.status == 0 and flat and result.peak_mb <= MEMORY_MB
    if result.status == 0:
        import pyarrow.dataset as ds

        counts = {table: ds.dataset(out / table).count_rows() for table in sorted(os.listdir(out))}
        print("rows: " + ", ".join(f"{table} {count:,}" for table, count in counts.items()))
    if result.stderr.strip():
        print(result.stderr.strip())
    return ok


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--size", type=parse_size, default=parse_size("10G"), help="bytes piped")
    parser.add_argument("--every", type=float, default=5.0, help="seconds between samples")
    parser.add_argument("--minutes", type=float, default=float("inf"), help="piping time, at most")
    parser.add_argument("--out", type=Path, help="the dataset (default: a temporary folder)")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory(prefix="pwcap-soak-") as tmp:
        out = args.out or Path(tmp) / "soak"
        result = soak(args.size, out, args.every, args.minutes * 60)
        return 0 if report(result, out) else 1


if __name__ == "__main__":
    sys.exit(main())
