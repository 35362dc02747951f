"""Micro-benchmark of PulsarDecoder on a synthetic stream of many small frames.

The stream mimics an async producer and a consumer sharing one connection: SEND (one
small message each) / SEND_RECEIPT, MESSAGE / ACK and a FLOW every 500 messages, cut into
64 KiB records as TCP would deliver them. Rows go to a sink that only counts, so the
figure is the decoder's own cost.

    python bench/bench_pulsar_decoder.py [--frames N] [--profile]
"""

from __future__ import annotations

import argparse
import struct
import sys
import time

import crc32c
from pwcap.capture.events import ClientBy, Connection, Direction
from pwcap.decode.api import DecodeOptions
from pwcap.decode.pulsar._pb import pulsar_api_pb2 as pb
from pwcap.decode.pulsar.decoder import PulsarDecoder

RECORD = 64 * 1024


class CountingSink:
    def __init__(self) -> None:
        self.frames = self.messages = self.anomalies = 0

    def frame(self, row: dict) -> None:
        self.frames += 1

    def message(self, row: dict) -> None:
        self.messages += 1

    def anomaly(self, row: dict) -> None:
        self.anomalies += 1


def _frame(cmd: pb.BaseCommand, tail: bytes = b"") -> bytes:
    body = cmd.SerializeToString()
    return struct.pack(">II", 4 + len(body) + len(tail), len(body)) + body + tail


def _entry(producer: str, sequence_id: int, payload: bytes) -> bytes:
    md = pb.MessageMetadata(producer_name=producer, sequence_id=sequence_id, publish_time=1)
    raw = md.SerializeToString()
    covered = struct.pack(">I", len(raw)) + raw + payload
    return b"\x0e\x01" + struct.pack(">I", crc32c.crc32c(covered)) + covered


def streams(count: int) -> tuple[bytes, bytes]:
    """Client-to-broker and broker-to-client bytes holding about ``count`` frames."""
    c2b, b2c = [], []
    sub = pb.BaseCommand(type=pb.BaseCommand.SUBSCRIBE)
    sub.subscribe.MergeFrom(
        pb.CommandSubscribe(topic="t", subscription="s", subType=0, consumer_id=1, request_id=1)
    )
    c2b.append(_frame(sub))
    prod = pb.BaseCommand(type=pb.BaseCommand.PRODUCER)
    prod.producer.MergeFrom(pb.CommandProducer(topic="t", producer_id=1, request_id=2))
    c2b.append(_frame(prod))
    for seq in range(count // 4):
        if seq % 500 == 0:
            flow = pb.BaseCommand(type=pb.BaseCommand.FLOW)
            flow.flow.MergeFrom(pb.CommandFlow(consumer_id=1, messagePermits=1000))
            c2b.append(_frame(flow))
        send = pb.BaseCommand(type=pb.BaseCommand.SEND)
        send.send.MergeFrom(pb.CommandSend(producer_id=1, sequence_id=seq))
        c2b.append(_frame(send, _entry("p", seq, b"x" * 32)))
        receipt = pb.BaseCommand(type=pb.BaseCommand.SEND_RECEIPT)
        receipt.send_receipt.MergeFrom(
            pb.CommandSendReceipt(
                producer_id=1, sequence_id=seq, message_id=pb.MessageIdData(ledgerId=9, entryId=seq)
            )
        )
        b2c.append(_frame(receipt))
        message = pb.BaseCommand(type=pb.BaseCommand.MESSAGE)
        message.message.MergeFrom(
            pb.CommandMessage(consumer_id=1, message_id=pb.MessageIdData(ledgerId=9, entryId=seq))
        )
        b2c.append(_frame(message, _entry("p", seq, b"x" * 32)))
        ack = pb.BaseCommand(type=pb.BaseCommand.ACK)
        ack.ack.MergeFrom(
            pb.CommandAck(
                consumer_id=1, ack_type=0, message_id=[pb.MessageIdData(ledgerId=9, entryId=seq)]
            )
        )
        c2b.append(_frame(ack))
    return b"".join(c2b), b"".join(b2c)


def run(c2b: bytes, b2c: bytes) -> tuple[CountingSink, float]:
    conn = Connection(1, "10.0.0.1", 40000, "10.0.0.2", 6650, 0, ClientBy.SYN)
    sink = CountingSink()
    decoder = PulsarDecoder(conn, sink, DecodeOptions(capture="bench"))
    started = time.perf_counter()
    ts = 0
    for pos in range(0, max(len(c2b), len(b2c)), RECORD):
        ts += 1
        if pos < len(c2b):
            decoder.on_data(Direction.C2B, ts, pos, c2b[pos : pos + RECORD])
        if pos < len(b2c):
            decoder.on_data(Direction.B2C, ts, pos, b2c[pos : pos + RECORD])
    decoder.on_close(ts)
    return sink, time.perf_counter() - started


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--frames", type=int, default=400_000)
    parser.add_argument("--profile", action="store_true", help="run under pyinstrument")
    args = parser.parse_args()
    c2b, b2c = streams(args.frames)
    if args.profile:
        from pyinstrument import Profiler

        profiler = Profiler()
        profiler.start()
    sink, elapsed = run(c2b, b2c)
    if args.profile:
        profiler.stop()
        profiler.print(file=sys.stderr)
    mb = (len(c2b) + len(b2c)) / 1e6
    print(
        f"{sink.frames} frames, {sink.messages} messages, {sink.anomalies} anomalies, "
        f"{mb:.1f} MB in {elapsed:.2f} s: {sink.frames / elapsed:,.0f} frames/s, "
        f"{mb / elapsed:.1f} MB/s"
    )


if __name__ == "__main__":
    main()
