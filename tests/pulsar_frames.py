"""Building Pulsar wire frames with the protobuf classes, and feeding decoders from real
captures, for the Pulsar decoder's tests.

Frames are laid out as the protocol spec describes, independently of the decoder's code:
``[totalSize][commandSize][BaseCommand]`` and, for payload commands,
``[0x0e02][size][BrokerEntryMetadata]? [0x0e01][crc32c]? [metadataSize][metadata][payload]``.
"""

from __future__ import annotations

import struct
import zlib
from typing import Any

import cramjam
import crc32c
import lz4.block
import zstandard

from pwcap.capture.events import ClientBy, Connection
from pwcap.decode.api import DecodeOptions
from pwcap.decode.pulsar._pb import pulsar_api_pb2 as pb
from pwcap.decode.pulsar.commands import SPECS_BY_NAME
from pwcap.decode.pulsar.decoder import PulsarDecoder
from tests.rows import RecordingSink


def command(name: str, **fields: Any) -> pb.BaseCommand:
    """A BaseCommand of type ``name`` whose sub-command has ``fields``."""
    base = pb.BaseCommand(type=pb.BaseCommand.Type.Value(name))
    sub = getattr(base, SPECS_BY_NAME[name].field)
    sub.SetInParent()
    for key, value in fields.items():
        target = getattr(sub, key)
        if isinstance(value, dict):
            target.MergeFrom(type(target)(**value))
        elif isinstance(value, list):
            target.extend(value)
        else:
            setattr(sub, key, value)
    return base


def frame(cmd: pb.BaseCommand, tail: bytes = b"") -> bytes:
    body = cmd.SerializePartialToString()
    return struct.pack(">II", 4 + len(body) + len(tail), len(body)) + body + tail


def entry_bytes(
    metadata: pb.MessageMetadata,
    payload: bytes,
    checksum: bool = True,
    broker_entry: pb.BrokerEntryMetadata | None = None,
    corrupt_checksum: bool = False,
) -> bytes:
    md = metadata.SerializePartialToString()
    covered = struct.pack(">I", len(md)) + md + payload
    out = b""
    if broker_entry is not None:
        be = broker_entry.SerializeToString()
        out += b"\x0e\x02" + struct.pack(">I", len(be)) + be
    if checksum:
        crc = crc32c.crc32c(covered) ^ (1 if corrupt_checksum else 0)
        out += b"\x0e\x01" + struct.pack(">I", crc)
    return out + covered


def batch(messages: list[tuple[pb.SingleMessageMetadata, bytes]]) -> bytes:
    out = b""
    for single, payload in messages:
        single.payload_size = len(payload)
        md = single.SerializePartialToString()
        out += struct.pack(">I", len(md)) + md + payload
    return out


def compress(codec: str, data: bytes) -> bytes:
    """Compress as the Pulsar clients do (raw LZ4 block, unfinished zlib, raw snappy)."""
    if codec == "LZ4":
        return lz4.block.compress(data, store_size=False)
    if codec == "ZLIB":
        deflater = zlib.compressobj()
        return deflater.compress(data) + deflater.flush(zlib.Z_SYNC_FLUSH)
    if codec == "ZSTD":
        return zstandard.ZstdCompressor().compress(data)
    if codec == "SNAPPY":
        return bytes(cramjam.snappy.compress_raw(data))
    return data


def connection(client_by: ClientBy = ClientBy.SYN) -> Connection:
    return Connection(1, "10.0.0.1", 40000, "10.0.0.2", 6650, 1_000_000, client_by)


def decoder(
    client_by: ClientBy = ClientBy.SYN, **options: Any
) -> tuple[PulsarDecoder, RecordingSink, Connection]:
    sink = RecordingSink()
    conn = connection(client_by)
    decoded = PulsarDecoder(
        conn, sink.rows, DecodeOptions(capture="test.pcap", **options), conn.flip
    )
    return decoded, sink, conn


def sample_command(name: str) -> pb.BaseCommand:
    """A BaseCommand of type ``name`` with every required field set (recursively)."""
    base = pb.BaseCommand(type=pb.BaseCommand.Type.Value(name))
    sub = getattr(base, SPECS_BY_NAME[name].field)
    sub.SetInParent()
    _fill_required(sub)
    return base


def _fill_required(message: Any) -> None:
    for fd in message.DESCRIPTOR.fields:
        if not fd.is_required:
            continue
        if fd.message_type is not None:
            nested = getattr(message, fd.name)
            nested.SetInParent()
            _fill_required(nested)
        elif fd.enum_type is not None:
            setattr(message, fd.name, fd.enum_type.values[-1].number)
        elif fd.type == fd.TYPE_STRING:
            setattr(message, fd.name, f"{fd.name}-value")
        elif fd.type == fd.TYPE_BYTES:
            setattr(message, fd.name, b"\x01\x02")
        elif fd.type == fd.TYPE_BOOL:
            setattr(message, fd.name, True)
        else:
            setattr(message, fd.name, 7)


class DecodingStreams:
    """A StreamSink decoding every connection with its own PulsarDecoder: what the
    dispatcher does once it has chosen Pulsar, for tests of the decoder on real captures."""

    def __init__(self, options: DecodeOptions, sink: Any = None) -> None:
        self.options = options
        self.sink = sink if sink is not None else RecordingSink()
        self.decoders: list[PulsarDecoder] = []  # in connection order
        self.clients: dict[int, str] = {}  # conn_id -> "client ip:port", as journals name them
        self._by_id: dict[int, PulsarDecoder] = {}

    def on_open(self, conn: Connection) -> None:
        decoder = PulsarDecoder(conn, self.sink.rows, self.options, conn.flip)
        self.decoders.append(decoder)
        self.clients[conn.conn_id] = f"{conn.client_ip}:{conn.client_port}"
        self._by_id[conn.conn_id] = decoder

    def on_data(self, conn: Connection, direction: Any, ts: int, offset: int, data: bytes) -> None:
        self._by_id[conn.conn_id].on_data(direction, ts, offset, data)

    def on_gap(self, conn: Connection, direction: Any, ts: int, offset: int, size: int) -> None:
        self._by_id[conn.conn_id].on_gap(direction, ts, offset, size)

    def on_close(self, conn: Connection, ts: int, reason: str) -> None:
        self._by_id[conn.conn_id].on_close(ts)


class RecordedStreams:
    """A StreamSink that keeps every event, to replay them (damaged) into decoders."""

    def __init__(self) -> None:
        self.connections: dict[int, Connection] = {}
        self.events: dict[int, list[tuple]] = {}  # conn_id -> ("data"|"gap", dir, ts, off, x)

    def on_open(self, conn: Connection) -> None:
        self.connections[conn.conn_id] = conn
        self.events[conn.conn_id] = []

    def on_data(self, conn: Connection, direction: Any, ts: int, offset: int, data: bytes) -> None:
        self.events[conn.conn_id].append(("data", direction, ts, offset, bytes(data)))

    def on_gap(self, conn: Connection, direction: Any, ts: int, offset: int, size: int) -> None:
        self.events[conn.conn_id].append(("gap", direction, ts, offset, size))

    def on_close(self, conn: Connection, ts: int, reason: str) -> None:
        pass
