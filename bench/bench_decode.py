"""``pwcap decode`` against its peers on large synthetic captures: issue 10's and 11's targets.

Two shapes of Pulsar traffic, written as Ethernet/IPv4/TCP pcap files (1 GB by default,
kept under ``--data`` for the next run):

- ``small``: async producers and consumers: SEND / SEND_RECEIPT / MESSAGE / ACK of one
  small message each, many frames packed in every segment;
- ``large``: batched SENDs and MESSAGEs of about 100 KiB (200 messages of 512 bytes each)
  and chunked 1 MiB messages, every frame spanning many segments.

For each capture one table, the contenders taking turns on the same file: ``pwcap
decode`` (Parquet written, one process), tshark with the Pulsar plugin, tshark with the
port handed to the ``data`` dissector, and ``cat`` (see ``contenders.py``), then the
issue's target and whether it is met. ``--jobs`` adds ``pwcap decode --jobs 2`` against
``--jobs 1`` (skipped while pwcap has no ``--jobs``); ``--profile`` profiles pwcap on a
smaller capture of the same shape.

    python bench/bench_decode.py [--size 1G] [--shape small large] [--runs 1]
        [--data DIR] [--jobs] [--profile [--profile-size 30M]]
"""

from __future__ import annotations

import argparse
import struct
import sys
from collections.abc import Iterator
from itertools import zip_longest
from pathlib import Path

import crc32c
from contenders import (
    ONE_PROCESS,
    decoded_rows,
    engine_checked,
    peers,
    pwcap_decode,
)
from options import add_options, parse_size
from profile_decode import profile_decode
from scoreboard import contest, print_table

from pwcap.decode.pulsar._pb import pulsar_api_pb2 as pb
from pwcap.decode.pulsar.commands import SPECS_BY_NAME

PCAP_HEADER = struct.Struct("<IHHiIII")
RECORD = struct.Struct("<IIII")
ETH_IP_TCP = struct.Struct(">6s6sH BBHHHBBH4s4s HHIIBBHHH")
MSS = 1448
CONNECTIONS = 4
SERVER_PORT = 6650
TARGETS = {"small": 300_000, "large": 150}  # per CPU-second, issue 10
UNITS = {"small": "frames", "large": "MB"}
MEMORY_MB = 400
JOBS_SPEEDUP = 1.7  # issue 11


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
        self.server = bytes([10, 0, 1, 1]), SERVER_PORT
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


# -- the runs ---------------------------------------------------------------------------------


def cached_capture(data: Path, shape: str, size: int) -> tuple[Path, int]:
    """The capture of ``shape`` and ``size`` under ``data`` (written the first time: a
    1 GB one takes a minute) and its frame count."""
    capture = data / f"decode_{shape}_{size / 1e6:g}M.pcap"
    count = capture.with_suffix(".frames")
    if not count.exists():  # written after the capture: a capture without it is unfinished
        count.write_text(str(write_capture(capture, shape, size)))
    return capture, int(count.read_text())


def check_frames(out: Path, frames: int) -> None:
    decoded = decoded_rows(out)
    if decoded != frames:
        sys.exit(f"pwcap decoded {decoded:,} frames of {frames:,}: figures not comparable")


def decode_against_peers(capture: Path, shape: str, frames: int, args: argparse.Namespace) -> None:
    megabytes = capture.stat().st_size / 1e6
    out = args.data / f"out_{shape}"
    others, notes = peers(capture, [SERVER_PORT])
    print(f"\n{shape} frames: {capture} ({megabytes:,.0f} MB, {frames:,} frames)")
    for note in notes:
        print(f"  {note}")
    results = contest([pwcap_decode(capture, out, *ONE_PROCESS), *others], args.runs)
    check_frames(out, frames)
    print_table(results, frames, megabytes)
    pwcap = results[0]
    goal = TARGETS[shape]
    reached = (frames if shape == "small" else megabytes) / pwcap.cpu
    met = reached >= goal and pwcap.peak_mb <= MEMORY_MB
    print(
        f"  issue 10 target: {goal:,} {UNITS[shape]} per CPU-second, peak RSS <= {MEMORY_MB} MB:"
        f" {reached:,.0f} and {pwcap.peak_mb:.0f} MB: {'met' if met else 'NOT met'}"
    )


def compare_jobs(capture: Path, shape: str, frames: int, args: argparse.Namespace) -> None:
    """Issue 11: ``--jobs 2`` against ``--jobs 1`` on the same capture, wall time (the
    point of workers) and the peak of the whole process tree."""
    outs = {jobs: args.data / f"out_{shape}_jobs{jobs}" for jobs in ("2", "1")}
    runs = [pwcap_decode(capture, out, "--jobs", jobs) for jobs, out in outs.items()]
    results = contest(runs, args.runs)
    for out in outs.values():
        check_frames(out, frames)
    print_table(results, frames, capture.stat().st_size / 1e6)
    speedup = results[1].wall / results[0].wall
    print(
        f"  issue 11 target: --jobs 2 at least {JOBS_SPEEDUP}x --jobs 1 (wall): {speedup:.2f}x,"
        f" whole-run peak {results[0].tree_peak_mb:.0f} MB:"
        f" {'met' if speedup >= JOBS_SPEEDUP else 'NOT met'}"
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    add_options(parser, size="1G", runs=1)
    parser.add_argument(
        "--shape", nargs="+", choices=sorted(SHAPES), default=sorted(SHAPES, reverse=True)
    )
    parser.add_argument("--jobs", action="store_true", help="also --jobs 2 against --jobs 1")
    parser.add_argument(
        "--profile-size", type=parse_size, default=parse_size("30M"), help="capture to profile"
    )
    args = parser.parse_args()
    print(engine_checked(args.allow_interpreted))
    args.data.mkdir(parents=True, exist_ok=True)
    for shape in args.shape:
        capture, frames = cached_capture(args.data, shape, args.size)
        decode_against_peers(capture, shape, frames, args)
        if args.jobs:
            compare_jobs(capture, shape, frames, args)
        if args.profile:
            sample, sample_frames = cached_capture(args.data, shape, args.profile_size)
            print(f"  profile of {sample} ({sample_frames:,} frames):")
            profile_decode(sample, args.data / f"out_{shape}_profile", sample_frames)


if __name__ == "__main__":
    main()
