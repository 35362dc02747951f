"""Damaged streams never raise: each damage becomes anomalies and decoding goes on."""

from __future__ import annotations

import dataclasses
import functools
import random
from pathlib import Path

import pyarrow as pa
import pytest

from pwcap.capture import read_streams
from pwcap.capture.events import ClientBy, Direction
from pwcap.decode.api import DecodeOptions
from pwcap.decode.pulsar._pb import pulsar_api_pb2 as pb
from pwcap.decode.pulsar.decoder import PulsarDecoder
from pwcap.tables.schema import arrow_schema
from tests.pulsar_frames import (
    RecordedStreams,
    RecordingSink,
    batch,
    command,
    compress,
    decoder,
    entry_bytes,
    frame,
)


def conversation(n: int) -> tuple[bytes, list[tuple[int, int]]]:
    """A client stream of SENDs and FLOWs, and the (start, end) of each SEND's payload."""
    out = b""
    payloads = []
    for seq in range(n):
        members = [(pb.SingleMessageMetadata(partition_key=f"k{i}"), b"v" * 40) for i in range(3)]
        raw = batch(members)
        md = pb.MessageMetadata(
            producer_name="p",
            sequence_id=seq,
            publish_time=1,
            num_messages_in_batch=3,
            compression=pb.LZ4,
            uncompressed_size=len(raw),
        )
        wire = frame(
            command("SEND", producer_id=1, sequence_id=seq), entry_bytes(md, compress("LZ4", raw))
        )
        payloads.append((len(out) + len(wire) - 20, len(out) + len(wire)))
        out += wire
        out += frame(command("FLOW", consumer_id=1, messagePermits=seq + 1))
    return out, payloads


def feed(stream: bytes, rng: random.Random, **kwargs):
    dec, sink, _ = decoder(**kwargs)
    pos = 0
    while pos < len(stream):
        size = rng.choice((1, 3, 50, 700, 5000))
        dec.on_data(Direction.C2B, pos, pos, stream[pos : pos + size])
        pos += size
    dec.on_close(pos)
    return sink


def test_payload_damage_costs_only_the_damaged_entries():
    stream, payloads = conversation(50)
    rng = random.Random(7)
    damaged = bytearray(stream)
    hit = rng.sample(range(len(payloads)), 10)
    for index in hit:
        start, end = payloads[index]
        damaged[rng.randrange(start, end)] ^= 0xFF
    sink = feed(bytes(damaged), rng)
    assert len(sink.frames) == 100
    bad = [f["sequence_id"] for f in sink.frames if f.get("checksum_ok") is False]
    assert sorted(bad) == sorted(hit)
    assert sink.kinds().count("bad_checksum") == 10


def test_random_damage_never_raises_and_is_reported():
    stream, _ = conversation(40)
    for seed in range(30):
        rng = random.Random(seed)
        damaged = bytearray(stream)
        for _ in range(rng.randrange(1, 20)):
            damaged[rng.randrange(len(damaged))] = rng.randrange(256)
        cut = rng.randrange(len(damaged) // 2, len(damaged))
        sink = feed(bytes(damaged[:cut]), rng, client_by=rng.choice(list(ClientBy)))
        assert sink.anomalies, seed
        assert len(sink.frames) > 0, seed


def test_noise_is_skipped_and_counted():
    rng = random.Random(1)
    noise = bytes(rng.randrange(256) for _ in range(50_000))
    stream, _ = conversation(5)
    sink = feed(noise + stream, rng, client_by=ClientBy.PORT)
    assert [f["command"] for f in sink.frames][-10:] == ["SEND", "FLOW"] * 5
    skipped = sum(a["size"] for a in sink.anomalies if a["kind"] == "resync")
    assert skipped == len(noise)


SAMPLES = Path(__file__).resolve().parent.parent / "sample_pcaps"
CAPTURES = sorted(p.name for p in SAMPLES.glob("pulsar_*.pcap*"))


@functools.cache
def recorded(name: str) -> RecordedStreams:
    streams = RecordedStreams()
    read_streams(SAMPLES / name, streams, server_ports={6650})
    return streams


def damaged(events: list[tuple], rng: random.Random) -> list[tuple]:
    """The events with real-world damage: bytes flipped, records cut short or lost
    (declared as gaps, as reassembly would), records split anywhere."""
    out = []
    for kind, direction, ts, offset, data in events:
        if kind == "data" and data:
            roll = rng.random()
            if roll < 0.05:
                out.append(("gap", direction, ts, offset, len(data)))
                continue
            if roll < 0.25:
                data = bytearray(data)
                for _ in range(rng.randrange(1, 8)):
                    data[rng.randrange(len(data))] = rng.randrange(256)
                data = bytes(data)
            if roll > 0.9 and len(data) > 1:
                cut = rng.randrange(1, len(data))
                out.append(("data", direction, ts, offset, data[:cut]))
                out.append(("gap", direction, ts, offset + cut, len(data) - cut))
                continue
            if roll > 0.8 and len(data) > 1:
                cut = rng.randrange(1, len(data))
                out.append(("data", direction, ts, offset, data[:cut]))
                out.append(("data", direction, ts, offset + cut, data[cut:]))
                continue
        out.append((kind, direction, ts, offset, data))
    return out


@pytest.mark.parametrize("name", CAPTURES)
def test_damaged_real_conversations_never_raise_and_rows_stay_typed(name):
    streams = recorded(name)
    schemas = {table: arrow_schema(table) for table in ("frames", "messages", "anomalies")}
    for seed in range(8):
        rng = random.Random(f"{name}/{seed}")
        sink = RecordingSink()
        connections = []
        options = DecodeOptions(capture=name, max_decompressed_size=rng.choice((100, 1 << 20)))
        for conn_id, events in streams.events.items():
            original = streams.connections[conn_id]
            conn = dataclasses.replace(original, client_by=rng.choice(list(ClientBy)))
            dec = PulsarDecoder(conn, sink.rows, options, conn.flip)
            for kind, direction, ts, offset, data in damaged(events, rng):
                if kind == "data":
                    dec.on_data(direction, ts, offset, data)
                else:
                    dec.on_gap(direction, ts, offset, data)
            dec.on_close(0)
            connections.append(dec.connection_fields())
        # The decoder's last-resort catch (decode_error) never fires: damage is understood.
        assert "decode_error" not in sink.kinds(), seed
        for table, rows in (("frames", sink.frames), ("messages", sink.messages)):
            pa.Table.from_pylist(rows, schema=schemas[table])
        pa.Table.from_pylist(sink.anomalies, schema=schemas["anomalies"])
        pa.Table.from_pylist(connections, schema=arrow_schema("connections"))
