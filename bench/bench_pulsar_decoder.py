"""Micro-benchmark of PulsarDecoder on a synthetic stream of many small frames.

Shapes: ``mixed`` is an async producer and a consumer sharing one connection: SEND (one
small message each) / SEND_RECEIPT, MESSAGE / ACK and a FLOW every 500 messages;
``produce`` only SEND / SEND_RECEIPT; ``control`` no payload frames. The streams are cut
into 64 KiB records as TCP would deliver them. Rows are built as the dataset writer has
them built, then counted and dropped, so the figure is the decoder's own cost.

    python bench/bench_pulsar_decoder.py [--frames N] [--shape S] [--profile]
"""

from __future__ import annotations

import argparse
import struct
import sys
import time
from functools import partial

import crc32c
from contenders import engine_checked
from options import add_engine_option

from pwcap.capture.events import ClientBy, Connection, Direction
from pwcap.decode.api import DecodeOptions
from pwcap.decode.pulsar._pb import pulsar_api_pb2 as pb
from pwcap.decode.pulsar.decoder import PulsarDecoder
from pwcap.tables.columns import ColumnBuffer, RowSink
from pwcap.tables.dataset import BATCH_ROWS
from pwcap.tables.schema import arrow_schema

RECORD = 64 * 1024


TABLES = ("frames", "messages", "anomalies")


class CountingSink:
    """Counts the rows built in its :attr:`rows`: each batch is counted, then dropped."""

    def __init__(self) -> None:
        self.counts = dict.fromkeys(TABLES, 0)
        self.rows = RowSink(*(self._builder(table) for table in TABLES))

    def _builder(self, table: str) -> ColumnBuffer:
        return ColumnBuffer(arrow_schema(table), BATCH_ROWS, on_full=partial(self.count, table))

    def count(self, table: str) -> None:
        """The rows ``table`` holds are counted (as Arrow, as the dataset writer takes them)."""
        batch = getattr(self.rows, table).take_batch()
        self.counts[table] += len(batch) if batch is not None else 0


def _frame(cmd: pb.BaseCommand, tail: bytes = b"") -> bytes:
    body = cmd.SerializeToString()
    return struct.pack(">II", 4 + len(body) + len(tail), len(body)) + body + tail


def _entry(producer: str, sequence_id: int, payload: bytes) -> bytes:
    md = pb.MessageMetadata(producer_name=producer, sequence_id=sequence_id, publish_time=1)
    raw = md.SerializeToString()
    covered = struct.pack(">I", len(raw)) + raw + payload
    return b"\x0e\x01" + struct.pack(">I", crc32c.crc32c(covered)) + covered


SHAPES = {
    "mixed": ("send", "receipt", "message", "ack"),  # a producer and a consumer
    "produce": ("send", "receipt"),  # an async producer: SEND / SEND_RECEIPT only
    "control": ("flow", "ack"),  # no payload frames at all
    "large": ("large_send", "receipt"),  # 256 KiB messages spanning many records
}
LARGE = bytes(range(256)) * 1024


def _command(kind: str, seq: int) -> tuple[int, bytes]:
    """(direction, frame) of one frame of the given kind."""
    mid = pb.MessageIdData(ledgerId=9, entryId=seq)
    if kind == "send":
        cmd = pb.BaseCommand(type=pb.BaseCommand.SEND)
        cmd.send.MergeFrom(pb.CommandSend(producer_id=1, sequence_id=seq))
        return 0, _frame(cmd, _entry("p", seq, b"x" * 32))
    if kind == "large_send":
        cmd = pb.BaseCommand(type=pb.BaseCommand.SEND)
        cmd.send.MergeFrom(pb.CommandSend(producer_id=1, sequence_id=seq))
        return 0, _frame(cmd, _entry("p", seq, LARGE))
    if kind == "receipt":
        cmd = pb.BaseCommand(type=pb.BaseCommand.SEND_RECEIPT)
        cmd.send_receipt.MergeFrom(
            pb.CommandSendReceipt(producer_id=1, sequence_id=seq, message_id=mid)
        )
        return 1, _frame(cmd)
    if kind == "message":
        cmd = pb.BaseCommand(type=pb.BaseCommand.MESSAGE)
        cmd.message.MergeFrom(pb.CommandMessage(consumer_id=1, message_id=mid))
        return 1, _frame(cmd, _entry("p", seq, b"x" * 32))
    if kind == "flow":
        cmd = pb.BaseCommand(type=pb.BaseCommand.FLOW)
        cmd.flow.MergeFrom(pb.CommandFlow(consumer_id=1, messagePermits=1))
        return 0, _frame(cmd)
    cmd = pb.BaseCommand(type=pb.BaseCommand.ACK)
    cmd.ack.MergeFrom(pb.CommandAck(consumer_id=1, ack_type=0, message_id=[mid]))
    return 0, _frame(cmd)


def streams(count: int, shape: str) -> tuple[bytes, bytes]:
    """Client-to-broker and broker-to-client bytes holding about ``count`` frames."""
    sides: tuple[list[bytes], list[bytes]] = ([], [])
    sub = pb.BaseCommand(type=pb.BaseCommand.SUBSCRIBE)
    sub.subscribe.MergeFrom(
        pb.CommandSubscribe(topic="t", subscription="s", subType=0, consumer_id=1, request_id=1)
    )
    prod = pb.BaseCommand(type=pb.BaseCommand.PRODUCER)
    prod.producer.MergeFrom(pb.CommandProducer(topic="t", producer_id=1, request_id=2))
    sides[0].extend([_frame(sub), _frame(prod)])
    kinds = SHAPES[shape]
    for seq in range(count // len(kinds)):
        if seq % 500 == 0:
            flow = pb.BaseCommand(type=pb.BaseCommand.FLOW)
            flow.flow.MergeFrom(pb.CommandFlow(consumer_id=1, messagePermits=1000))
            sides[0].append(_frame(flow))
        for kind in kinds:
            direction, wire = _command(kind, seq)
            sides[direction].append(wire)
    return b"".join(sides[0]), b"".join(sides[1])


def run(c2b: bytes, b2c: bytes, record: int) -> tuple[CountingSink, float]:
    """Decode both streams; return the sink and the CPU seconds it took (the machine may
    be shared, so wall time would measure the neighbours too)."""
    conn = Connection(1, "10.0.0.1", 40000, "10.0.0.2", 6650, 0, ClientBy.SYN)
    sink = CountingSink()
    decoder = PulsarDecoder(conn, sink.rows, DecodeOptions(capture="bench"), conn.flip)
    # Both directions advance in proportion, the broker's a little behind the client's
    # (responses vary in size, so exact proportion would let some overtake their requests).
    records = max(1, max(len(c2b), len(b2c)) // record)
    lag = max(1, records // 50)
    client = [len(c2b) * i // records for i in range(records + 1)]
    broker = [len(b2c) * max(0, i - lag) // records for i in range(records + lag + 1)]
    started = time.process_time()
    ts = 0
    for i in range(records + lag):
        ts += 1
        if i < records:
            decoder.on_data(Direction.C2B, ts, client[i], c2b[client[i] : client[i + 1]])
        decoder.on_data(Direction.B2C, ts, broker[i], b2c[broker[i] : broker[i + 1]])
    decoder.on_close(ts)
    for table in TABLES:
        sink.count(table)
    return sink, time.process_time() - started


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--frames", type=int, default=400_000)
    parser.add_argument("--shape", choices=sorted(SHAPES), default="mixed")
    parser.add_argument("--record", type=int, default=RECORD, help="bytes per capture record")
    parser.add_argument("--profile", action="store_true", help="run under pyinstrument")
    add_engine_option(parser)
    args = parser.parse_args()
    print(engine_checked(args.allow_interpreted))
    c2b, b2c = streams(args.frames, args.shape)
    if args.profile:
        from pyinstrument import Profiler

        profiler = Profiler()
        profiler.start()
    sink, elapsed = run(c2b, b2c, args.record)
    if args.profile:
        profiler.stop()
        profiler.print(file=sys.stderr)
    mb = (len(c2b) + len(b2c)) / 1e6
    print(
        f"{args.shape}: {sink.counts['frames']} frames, {sink.counts['messages']} messages, "
        f"{sink.counts['anomalies']} anomalies, "
        f"{mb:.1f} MB in {elapsed:.2f} CPU s: {sink.counts['frames'] / elapsed:,.0f} frames/s, "
        f"{mb / elapsed:.1f} MB/s"
    )


if __name__ == "__main__":
    main()
