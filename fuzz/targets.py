"""Fuzz targets: one function of bytes per layer, each raising only on a broken promise.

``records`` reads the bytes as a capture file (pcap, pcapng, gzip) through the record
reader, packet parser and reassembly; ``reassembly`` reads them as a list of TCP
segments of a few connections; ``pulsar`` and ``kafka07`` read them as the events of
one connection's two streams (data and gaps) handed to that protocol's decoder. After
each input the target checks what came out: the stream contract (offsets contiguous
from 0, see :class:`fuzz.stream_sink.RecordingSink`), rows that fit the schema, kinds
and enum values the schema documents, offsets >= 0, ``ts_first <= ts``, and a decoder's
anomaly count equal to its anomaly rows.

The targets run without atheris (the tests replay the corpus through them);
:mod:`fuzz.atheris_run` runs them coverage-guided.
"""

from __future__ import annotations

import struct
from collections.abc import Callable, Iterator

import pyarrow as pa

from fuzz.invariants import violations
from fuzz.mutate import samples, wrapped_samples
from fuzz.stream_sink import RecordingSink
from pwcap.capture import CaptureError, ClientBy, Connection, Direction, read_streams
from pwcap.capture.reassembly import Reassembler
from pwcap.capture.stats import CaptureStats
from pwcap.decode.api import MAX_PENDING_TOTAL, DecodeOptions, FrameBudget, RowSink
from pwcap.decode.kafka07 import Kafka07Decoder
from pwcap.decode.pulsar import PulsarDecoder
from pwcap.tables.schema import Row, arrow_schema

T0 = 1_700_000_000_000_000
CLIENT, SERVER = bytes([10, 0, 0, 1]), bytes([10, 0, 0, 2])


class Broken(AssertionError):
    """A promise the code under test broke for this input."""


# -- capture files --------------------------------------------------------------------------


def records(data: bytes) -> None:
    """The bytes as a capture file: only a one-line CaptureError may stop the reading."""
    sink = RecordingSink()
    try:
        read_streams(data, sink, server_ports=(6650, 9092))
    except CaptureError as error:
        if "\n" in str(error):
            raise Broken(f"a capture error of several lines: {error}") from None


def records_seeds() -> Iterator[bytes]:
    for _, data, _ in (*samples(), *wrapped_samples()):
        if len(data) < 40_000:
            yield data


# -- TCP segments ---------------------------------------------------------------------------


def reassembly(data: bytes) -> None:
    """Segments made from the bytes (4 endpoint pairs, any flags, sequence numbers near
    or far from the expected one): the stream contract must hold whatever they are."""
    sink = RecordingSink()
    stats = CaptureStats()
    reassembler = Reassembler(sink, stats, server_ports=(6650,), scope="fuzz")
    expected: dict[tuple[int, int], int] = {}
    ts = T0
    for pair, direction, flags, delta, payload, pause in _segments(data):
        port = 40000 + (pair & 1)
        server = 6650 if pair & 2 else 7000
        src, dst = (CLIENT, port), (SERVER, server)
        if direction:
            src, dst = dst, src
        key = (pair, direction)
        seq = (expected.get(key, 1000 * (pair + 1)) + delta) & 0xFFFFFFFF
        ack = (expected.get((pair, 1 - direction), 0)) & 0xFFFFFFFF
        ts += 1 + pause  # a connection's id is its endpoints and first time: never twice
        reassembler.segment(ts, src[0], src[1], dst[0], dst[1], seq, ack, flags, payload)
        expected[key] = seq + len(payload) + (1 if flags & 0x03 else 0)
    reassembler.finish()
    for recorded in sink.connections.values():
        if recorded.close_reason is None:
            raise Broken(f"connection {recorded.conn.conn_id} never closed")


def _segments(data: bytes) -> Iterator[tuple[int, int, int, int, bytes, int]]:
    """(pair, direction, flags, sequence delta, payload, pause) read off ``data``."""
    pos = 0
    while pos + 5 <= len(data):
        head, flags, size, pause = data[pos], data[pos + 1], data[pos + 2], data[pos + 3]
        delta = struct.unpack_from(">b", data, pos + 4)[0]
        if head & 0x80:
            delta *= 1 << (head & 0x1F)  # far away: out of window, wrapped
        pos += 5
        payload = data[pos : pos + size]
        pos += size
        yield (head >> 5) & 3, head & 1, flags, delta, payload, pause


def reassembly_seeds() -> Iterator[bytes]:
    """A handshake, data both ways and a FIN, in the segment encoding."""

    def segment(head: int, flags: int, payload: bytes) -> bytes:
        return bytes([head, flags, len(payload), 1, 0]) + payload

    yield (
        segment(0x40, 0x02, b"")
        + segment(0x41, 0x12, b"")
        + segment(0x40, 0x18, b"hello")
        + segment(0x41, 0x18, b"world!")
        + segment(0x40, 0x11, b"")
        + segment(0x41, 0x11, b"")
    )


# -- one connection's streams ------------------------------------------------------------------

Factory = Callable[[Connection, "Rows", DecodeOptions, Callable[[], None]], object]


class Rows:
    """The rows a decoder builds in :attr:`sink`, by table."""

    def __init__(self) -> None:
        self.tables: dict[str, list[Row]] = {"frames": [], "messages": [], "anomalies": []}
        self.sink = RowSink.calling(*(found.append for found in self.tables.values()))


def pulsar(data: bytes) -> None:
    _decode(PulsarDecoder, data, 6650)


def kafka07(data: bytes) -> None:
    _decode(Kafka07Decoder, data, 9092)


def _decode(factory: Factory, data: bytes, port: int) -> None:
    """Stream events read off ``data`` into one decoder, then its rows checked."""
    if not data:
        return
    client_by = ClientBy(data[0] % 3)
    conn = Connection(7, "10.0.0.1", 40000, "10.0.0.2", port, T0, client_by)
    rows = Rows()
    options = DecodeOptions(
        capture="fuzz",
        max_frame_size=1 << 16 if data[0] & 4 else 5 << 20,
        frames=FrameBudget(256 if data[0] & 8 else MAX_PENDING_TOTAL),  # frames given up
    )
    decoder = factory(conn, rows.sink, options, conn.flip)
    offsets = [0, 0]
    ts = T0
    for direction, gap, pause, payload in _events(data[1:]):
        ts += pause
        if gap:
            decoder.on_gap(Direction(direction), ts, offsets[direction], gap)  # type: ignore[attr-defined]
            offsets[direction] += gap
        elif payload:
            decoder.on_data(Direction(direction), ts, offsets[direction], payload)  # type: ignore[attr-defined]
            offsets[direction] += len(payload)
    decoder.on_close(ts)  # type: ignore[attr-defined]
    if options.frames.total:
        raise Broken(f"{options.frames.total} bytes still counted as incomplete frames")
    fields = decoder.connection_fields()  # type: ignore[attr-defined]
    check_rows(rows, fields, conn, decoder.protocol)  # type: ignore[attr-defined]


def _events(data: bytes) -> Iterator[tuple[int, int, int, bytes]]:
    """(direction, gap size or 0, pause, payload) read off ``data``: a head byte (bit 0
    the direction, bit 1 a gap, the rest a pause), a 16-bit size, then the payload."""
    pos = 0
    while pos + 3 <= len(data):
        head = data[pos]
        size = struct.unpack_from(">H", data, pos + 1)[0]
        pos += 3
        if head & 2:
            yield head & 1, size or 1, head >> 2, b""
        else:
            yield head & 1, 0, head >> 2, data[pos : pos + size]
            pos += size


def check_rows(rows: Rows, fields: Row, conn: Connection, protocol: str) -> None:
    for table, found in rows.tables.items():
        try:
            pa.Table.from_pylist(found, schema=arrow_schema(table))  # what the dataset does
        except (pa.ArrowException, OverflowError, TypeError) as error:
            raise Broken(f"{table} rows the dataset cannot hold: {error}") from None
    connection = {
        "conn_id": conn.conn_id,
        "capture": "fuzz",
        "protocol": protocol,
        "first_ts": conn.first_ts,
        "last_ts": conn.last_ts or conn.first_ts,
        **fields,
    }
    broken = violations(rows.tables | {"connections": [connection]})
    if broken:
        raise Broken("; ".join(broken))


def stream_seeds(port: int) -> Iterator[bytes]:
    """The sample captures' connections on ``port``, in the event encoding; each also cut
    in pieces of 100 bytes under a frame budget that gives its longer frames up."""
    for _, data, _ in samples():
        for head, piece in ((ClientBy.SYN, 0xFFFF), (ClientBy.SYN | 9, 100)):
            sink = _EventLog(piece)
            try:
                read_streams(data, sink, server_ports=(6650, 9092))
            except CaptureError:
                break
            for server_port, events in sink.connections.values():
                if server_port == port and events:
                    yield bytes([head]) + b"".join(events)


class _EventLog:
    """A StreamSink writing each connection's events in the targets' event encoding."""

    def __init__(self, piece: int) -> None:
        self.piece = piece  # the longest data event
        self.connections: dict[int, tuple[int, list[bytes]]] = {}

    def on_open(self, conn: Connection) -> None:
        self.connections[conn.conn_id] = (conn.server_port, [])

    def on_data(
        self, conn: Connection, direction: Direction, ts: int, offset: int, data: bytes
    ) -> None:
        events = self.connections[conn.conn_id][1]
        for at in range(0, len(data), self.piece):
            piece = data[at : at + self.piece]
            events.append(bytes([direction | 4]) + struct.pack(">H", len(piece)) + piece)

    def on_gap(
        self, conn: Connection, direction: Direction, ts: int, offset: int, size: int
    ) -> None:
        events = self.connections[conn.conn_id][1]
        events.append(bytes([direction | 2 | 4]) + struct.pack(">H", min(size, 0xFFFF)))

    def on_close(self, conn: Connection, ts: int, reason: str) -> None:
        pass


TARGETS: dict[str, tuple[Callable[[bytes], None], Callable[[], Iterator[bytes]]]] = {
    "records": (records, records_seeds),
    "reassembly": (reassembly, reassembly_seeds),
    "pulsar": (pulsar, lambda: stream_seeds(6650)),
    "kafka07": (kafka07, lambda: stream_seeds(9092)),
}
