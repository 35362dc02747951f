"""End-to-end benchmark of ``pwcap decode`` on large synthetic captures, in one table.

Two shapes of Pulsar traffic, written as Ethernet/IPv4/TCP pcap files:

- ``small``: async producers and consumers: SEND / SEND_RECEIPT / MESSAGE / ACK of one
  small message each, many frames packed in every segment;
- ``large``: batched SENDs and MESSAGEs of about 100 KiB (200 messages of 512 bytes each)
  and chunked 1 MiB messages, every frame spanning many segments.

For each capture the table shows, side by side: the bare cost of iterating its records
in Python (``struct.unpack_from`` over ``mmap``: the floor for any Python reader), the
full ``pwcap decode`` with Parquet written (run in a subprocess: CPU seconds, frames/s,
MB/s and peak RSS), and tshark reading the same file with ``-T fields -e frame.number``,
once as is and once with ``-d tcp.port==6650,data``. (tshark without a Pulsar dissector
runs its heuristic dissectors over every segment; SMPP's claims Pulsar streams and makes
the run super-linear: the ``data`` variant is the fair baseline.)

    python bench/bench_decode.py [--size 300M] [--shape small large] [--keep DIR]
        [--no-tshark] [--profile]
"""

from __future__ import annotations

import argparse
import json
import mmap
import os
import shutil
import struct
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from itertools import zip_longest
from pathlib import Path

import crc32c
from pwcap.decode.pulsar._pb import pulsar_api_pb2 as pb
from pwcap.decode.pulsar.commands import SPECS_BY_NAME

PCAP_HEADER = struct.Struct("<IHHiIII")
RECORD = struct.Struct("<IIII")
ETH_IP_TCP = struct.Struct(">6s6sH BBHHHBBH4s4s HHIIBBHHH")
MSS = 1448
CONNECTIONS = 4
TARGETS = {"small": "300,000 frames/s", "large": "50 MB/s"}


# -- Pulsar frames ---------------------------------------------------------------------------


def _frame(cmd: pb.BaseCommand, tail: bytes = b"") -> bytes:
    body = cmd.SerializeToString()
    return struct.pack(">II", 4 + len(body) + len(tail), len(body)) + body + tail


def _entry(metadata: pb.MessageMetadata, payload: bytes) -> bytes:
    raw = metadata.SerializeToString()
    covered = struct.pack(">I", len(raw)) + raw + payload
    return b"\x0e\x01" + struct.pack(">I", crc32c.crc32c(covered)) + covered


def _command(name: str, **fields: object) -> pb.BaseCommand:
    cmd = pb.BaseCommand(type=pb.BaseCommand.Type.Value(name))
    sub = getattr(cmd, SPECS_BY_NAME[name].field)
    sub.MergeFrom(type(sub)(**fields))
    return cmd


def _setup() -> tuple[bytes, bytes]:
    """CONNECT, PRODUCER, SUBSCRIBE and their answers: names for the rows to carry."""
    c2b = b"".join(
        [
            _frame(_command("CONNECT", client_version="bench", protocol_version=21)),
            _frame(_command("PRODUCER", topic="persistent://bench/t", producer_id=1, request_id=1)),
            _frame(
                _command(
                    "SUBSCRIBE",
                    topic="persistent://bench/t",
                    subscription="s",
                    subType=0,
                    consumer_id=1,
                    request_id=2,
                )
            ),
            _frame(_command("FLOW", consumer_id=1, messagePermits=1 << 30)),
        ]
    )
    b2c = b"".join(
        [
            _frame(_command("CONNECTED", server_version="bench", protocol_version=21)),
            _frame(_command("PRODUCER_SUCCESS", request_id=1, producer_name="bench-producer")),
            _frame(_command("SUCCESS", request_id=2)),
        ]
    )
    return c2b, b2c


def _small_block(start: int, count: int) -> tuple[bytes, bytes]:
    """``count`` rounds of SEND / SEND_RECEIPT / MESSAGE / ACK, one small message each."""
    c2b, b2c = [], []
    for seq in range(start, start + count):
        mid = pb.MessageIdData(ledgerId=7, entryId=seq)
        meta = pb.MessageMetadata(producer_name="bench-producer", sequence_id=seq, publish_time=1)
        entry = _entry(meta, b"m" * 48)
        c2b.append(_frame(_command("SEND", producer_id=1, sequence_id=seq), entry))
        b2c.append(_frame(_command("SEND_RECEIPT", producer_id=1, sequence_id=seq, message_id=mid)))
        b2c.append(_frame(_command("MESSAGE", consumer_id=1, message_id=mid), entry))
        c2b.append(_frame(_command("ACK", consumer_id=1, ack_type=0, message_id=[mid])))
    return b"".join(c2b), b"".join(b2c)


def _large_block(start: int, count: int) -> tuple[bytes, bytes]:
    """Batches of 200 messages of 512 bytes sent and delivered; every 4th a 1 MiB chunked
    message in four chunks."""
    c2b, b2c = [], []
    member = pb.SingleMessageMetadata(payload_size=512, partition_key="k")
    raw_member = member.SerializeToString()
    batch = (struct.pack(">I", len(raw_member)) + raw_member + b"b" * 512) * 200
    for seq in range(start, start + count):
        mid = pb.MessageIdData(ledgerId=7, entryId=seq)
        if seq % 4 == 3:
            chunk = b"c" * (256 * 1024)
            for chunk_id in range(4):
                meta = pb.MessageMetadata(
                    producer_name="bench-producer",
                    sequence_id=seq,
                    publish_time=1,
                    uuid=f"bench-{seq}",
                    chunk_id=chunk_id,
                    num_chunks_from_msg=4,
                    total_chunk_msg_size=4 * len(chunk),
                )
                entry = _entry(meta, chunk)
                c2b.append(_frame(_command("SEND", producer_id=1, sequence_id=seq), entry))
                b2c.append(_frame(_command("MESSAGE", consumer_id=1, message_id=mid), entry))
        else:
            meta = pb.MessageMetadata(
                producer_name="bench-producer",
                sequence_id=seq,
                publish_time=1,
                num_messages_in_batch=200,
            )
            entry = _entry(meta, batch)
            c2b.append(
                _frame(_command("SEND", producer_id=1, sequence_id=seq, num_messages=200), entry)
            )
            b2c.append(_frame(_command("MESSAGE", consumer_id=1, message_id=mid), entry))
        b2c.append(_frame(_command("SEND_RECEIPT", producer_id=1, sequence_id=seq, message_id=mid)))
        c2b.append(_frame(_command("ACK", consumer_id=1, ack_type=0, message_id=[mid])))
    return b"".join(c2b), b"".join(b2c)


SHAPES = {"small": (_small_block, 2000), "large": (_large_block, 8)}


# -- the capture -------------------------------------------------------------------------------


class _Tcp:
    """One connection's packets: addresses, sequence numbers, Ethernet/IPv4/TCP headers."""

    def __init__(self, index: int) -> None:
        self.client = bytes([10, 0, 0, 1 + index]), 40000 + index
        self.server = bytes([10, 0, 1, 1]), 6650
        self.seq = [1000, 5000]  # next sequence number per direction

    def packet(self, direction: int, flags: int, payload: bytes = b"") -> bytes:
        src, dst = (self.client, self.server) if direction == 0 else (self.server, self.client)
        ack = self.seq[1 - direction]
        header = ETH_IP_TCP.pack(
            b"\x02\x00\x00\x00\x00\x02",
            b"\x02\x00\x00\x00\x00\x01",
            0x0800,
            0x45,
            0,
            40 + len(payload),
            0,
            0,
            64,
            6,
            0,
            src[0],
            dst[0],
            src[1],
            dst[1],
            self.seq[direction],
            ack,
            0x50,
            flags,
            65535,
            0,
            0,
        )
        self.seq[direction] = (self.seq[direction] + len(payload) + (flags & 0x03 != 0)) % (1 << 32)
        return header + payload

    def segments(self, direction: int, data: bytes) -> Iterator[bytes]:
        for pos in range(0, len(data), MSS):
            yield self.packet(direction, 0x18, data[pos : pos + MSS])

    def exchange(self, client: bytes, broker: bytes) -> Iterator[bytes]:
        """Both directions' segments taking turns. The generators run lazily, so each
        packet acknowledges only what the other side has sent before it (as on a real
        wire: an ACK never runs ahead of the data)."""
        for pair in zip_longest(self.segments(0, client), self.segments(1, broker)):
            yield from (packet for packet in pair if packet is not None)


def write_capture(path: Path, shape: str, size: int) -> int:
    """Write about ``size`` bytes of pcap; return the number of Pulsar frames in it."""
    build, rounds = SHAPES[shape]
    conns = [_Tcp(i) for i in range(CONNECTIONS)]
    setup = _setup()
    block = build(0, rounds)
    frames_per_block = _count_frames(block[0]) + _count_frames(block[1])
    frames = 0
    written = 0
    ts = 1_700_000_000_000_000
    with path.open("wb") as out:
        out.write(PCAP_HEADER.pack(0xA1B2C3D4, 2, 4, 0, 0, 262144, 1))

        def emit(packet: bytes) -> None:
            nonlocal ts, written
            ts += 3
            out.write(RECORD.pack(ts // 1_000_000, ts % 1_000_000, len(packet), len(packet)))
            out.write(packet)
            written += RECORD.size + len(packet)

        for conn in conns:
            emit(conn.packet(0, 0x02))
            emit(conn.packet(1, 0x12))
            emit(conn.packet(0, 0x10))
            for direction in (0, 1):
                for packet in conn.segments(direction, setup[direction]):
                    emit(packet)
            frames += _count_frames(setup[0]) + _count_frames(setup[1])
        while written < size:
            for conn in conns:  # the connections take turns, a block each
                for packet in conn.exchange(*block):
                    emit(packet)
                frames += frames_per_block
        for conn in conns:
            emit(conn.packet(0, 0x11))
            emit(conn.packet(1, 0x11))
    return frames


def _count_frames(stream: bytes) -> int:
    count = pos = 0
    while pos < len(stream):
        pos += 4 + int.from_bytes(stream[pos : pos + 4], "big")
        count += 1
    return count


# -- the contenders -----------------------------------------------------------------------------


def iterate_records(path: Path) -> float:
    """CPU seconds to walk every record header of the file: the Python floor."""
    started = time.process_time()
    with path.open("rb") as handle, mmap.mmap(handle.fileno(), 0, access=mmap.ACCESS_READ) as m:
        unpack = RECORD.unpack_from
        pos = PCAP_HEADER.size
        end = len(m)
        count = 0
        while pos < end:
            caplen = unpack(m, pos)[2]
            pos += 16 + caplen
            count += 1
    return time.process_time() - started


# Run inside the child: decode, then report its own CPU time, peak RSS and row counts.
# CPU time counts every thread (the Parquet writer's too) but not the interpreter start-up.
_CHILD = """
import json, resource, sys, time
from pwcap.decode.run import decode_captures
cpu, wall = time.process_time(), time.perf_counter()
summary = decode_captures([sys.argv[1]], sys.argv[2], overwrite=True)
cpu, wall = time.process_time() - cpu, time.perf_counter() - wall
# VmHWM is this process's own peak: ru_maxrss would also count the pages the parent had
# resident when it forked us (its mmap of the capture), since Linux carries it over exec.
try:
    with open("/proc/self/status") as status:
        rss_kb = next(int(line.split()[1]) for line in status if line.startswith("VmHWM:"))
except OSError:
    rss_kb = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
print(json.dumps({"rows": summary.rows, "cpu": cpu, "wall": wall, "rss_kb": rss_kb}))
"""

_PROFILE = """
import sys
from pyinstrument import Profiler
from pwcap.decode.run import decode_captures
profiler = Profiler(interval=0.002)
profiler.start()
decode_captures([sys.argv[1]], sys.argv[2], overwrite=True)
profiler.stop()
print(profiler.output_text(unicode=False, color=False, show_all=False), file=sys.stderr)
"""


def pwcap_decode(path: Path, out: Path, profile: bool) -> dict:
    if profile:
        subprocess.run([sys.executable, "-c", _PROFILE, str(path), str(out)], check=True)
    done = subprocess.run(
        [sys.executable, "-c", _CHILD, str(path), str(out)],
        check=True,
        capture_output=True,
        text=True,
    )
    return json.loads(done.stdout)


def tshark(path: Path, *extra: str) -> float | None:
    """CPU seconds of tshark listing every frame number (None when tshark is absent)."""
    if shutil.which("tshark") is None:
        return None
    before = os.times()
    subprocess.run(
        ["tshark", "-r", str(path), "-T", "fields", "-e", "frame.number", *extra],
        check=True,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    after = os.times()
    return (after.children_user - before.children_user) + (
        after.children_system - before.children_system
    )


# -- the table ------------------------------------------------------------------------------------


def _size(text: str) -> int:
    units = {"K": 1e3, "M": 1e6, "G": 1e9}
    scale = units.get(text[-1:].upper())
    return int(float(text[:-1]) * scale) if scale else int(text)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--size", type=_size, default=_size("300M"), help="e.g. 300M, 1G")
    parser.add_argument(
        "--shape", nargs="+", choices=sorted(SHAPES), default=sorted(SHAPES, reverse=True)
    )
    parser.add_argument("--keep", type=Path, help="write the captures here and keep them")
    parser.add_argument("--no-tshark", action="store_true")
    parser.add_argument("--profile", action="store_true", help="pyinstrument profile to stderr")
    args = parser.parse_args()
    workdir = Path(tempfile.mkdtemp(prefix="pwcap-bench-"))
    where = args.keep or workdir
    where.mkdir(parents=True, exist_ok=True)
    rows = []
    try:
        for shape in args.shape:
            capture = where / f"bench_{shape}.pcap"
            frames = write_capture(capture, shape, args.size)
            mb = capture.stat().st_size / 1e6
            floor = iterate_records(capture)
            decoded = pwcap_decode(capture, workdir / f"out_{shape}", args.profile)
            assert decoded["rows"]["frames"] == frames, (decoded["rows"], frames)
            plain = None if args.no_tshark else tshark(capture)
            data = None if args.no_tshark else tshark(capture, "-d", "tcp.port==6650,data")
            rows.append((shape, mb, frames, floor, decoded, plain, data))
    finally:
        shutil.rmtree(workdir, ignore_errors=True)
    print_table(rows)


def print_table(rows: list) -> None:
    def rate(frames: int, mb: float, seconds: float | None) -> str:
        if seconds is None:
            return f"{'-':>30}"
        return f"{seconds:7.2f} s {frames / seconds:>11,.0f} f/s {mb / seconds:6.1f} MB/s"

    print(
        f"{'shape':6} {'MB':>7} {'frames':>11}  {'contender':28} {'CPU time, frames/s, MB/s':>37}"
    )
    for shape, mb, frames, floor, decoded, plain, data in rows:
        lead = f"{shape:6} {mb:7.0f} {frames:11,}"
        print(f"{lead}  {'records (Python floor)':28} {rate(frames, mb, floor)}")
        blank = " " * len(lead)
        rss = decoded["rss_kb"] / 1024
        print(
            f"{blank}  {'pwcap decode (Parquet)':28} {rate(frames, mb, decoded['cpu'])}"
            f"  wall {decoded['wall']:.2f} s, peak RSS {rss:,.0f} MB"
            f"  (target {TARGETS[shape]}, < 400 MB)"
        )
        print(f"{blank}  {'tshark':28} {rate(frames, mb, plain)}")
        print(f"{blank}  {'tshark -d tcp.port==6650,data':28} {rate(frames, mb, data)}")


if __name__ == "__main__":
    main()
