"""Building Kafka 0.7 frames for unit tests, from the wire spec and the 0.7 source.

Written independently of the decoder: a message is ``[int32 length][magic][attributes if
magic=1][crc32 of payload][payload]``; a request ``[int32 length][int16 type]`` and a body
(``[int16 topic length][topic][int32 partition]`` then the type's fields; MULTI* an int16
count of such bodies); a response ``[int32 length][int16 error]`` and a body.
"""

from __future__ import annotations

import gzip
import struct
import zlib

import cramjam

from pwcap.capture.events import ClientBy, Connection, Direction
from pwcap.decode.api import DecodeOptions
from pwcap.decode.kafka07 import Kafka07Decoder
from tests.rows import RecordingSink

PRODUCE, FETCH, MULTIFETCH, MULTIPRODUCE, OFFSETS = range(5)
NONE, GZIP, SNAPPY = 0, 1, 2


def message(payload: bytes, magic: int = 1, codec: int = NONE, bad_crc: bool = False) -> bytes:
    crc = zlib.crc32(payload) ^ (1 if bad_crc else 0)
    head = bytes([magic]) if magic == 0 else bytes([magic, codec])
    body = head + struct.pack(">I", crc) + payload
    return struct.pack(">i", len(body)) + body


def xerial(raw: bytes, block: int = 32 * 1024) -> bytes:
    """The Java client's snappy stream: magic, versions 1/1, ``[int32 len][raw block]``s."""
    out = b"\x82SNAPPY\x00" + struct.pack(">ii", 1, 1)
    for pos in range(0, len(raw), block):
        chunk = bytes(cramjam.snappy.compress_raw(raw[pos : pos + block]))
        out += struct.pack(">i", len(chunk)) + chunk
    return out


def compressed(inner: bytes, codec: int, framed: bool = False, bad_crc: bool = False) -> bytes:
    """A magic-1 wrapper message whose payload is the compressed set ``inner``."""
    if codec == GZIP:
        data = gzip.compress(inner)
    elif framed:
        data = xerial(inner)
    else:
        data = bytes(cramjam.snappy.compress_raw(inner))
    return message(data, 1, codec, bad_crc)


def _topic(topic: str, partition: int) -> bytes:
    raw = topic.encode()
    return struct.pack(">h", len(raw)) + raw + struct.pack(">i", partition)


def produce_body(topic: str, partition: int, messages: bytes) -> bytes:
    return _topic(topic, partition) + struct.pack(">i", len(messages)) + messages


def fetch_body(topic: str, partition: int, offset: int, max_size: int) -> bytes:
    return _topic(topic, partition) + struct.pack(">qi", offset, max_size)


def offsets_body(topic: str, partition: int, time: int, max_offsets: int) -> bytes:
    return _topic(topic, partition) + struct.pack(">qi", time, max_offsets)


def request(request_type: int, *bodies: bytes) -> bytes:
    if request_type in (MULTIFETCH, MULTIPRODUCE):
        payload = struct.pack(">h", len(bodies)) + b"".join(bodies)
    else:
        (payload,) = bodies
    body = struct.pack(">h", request_type) + payload
    return struct.pack(">i", len(body)) + body


def response(error: int, body: bytes = b"") -> bytes:
    return struct.pack(">ih", 2 + len(body), error) + body


def multifetch_response(*parts: tuple[int, bytes]) -> bytes:
    return response(0, b"".join(response(error, data) for error, data in parts))


def offsets_response(offsets: list[int]) -> bytes:
    return response(0, struct.pack(f">i{len(offsets)}q", len(offsets), *offsets))


def connection(client_by: ClientBy = ClientBy.SYN) -> Connection:
    return Connection(1, "10.0.0.1", 40000, "10.0.0.2", 9092, 0, client_by)


def decoder(
    client_by: ClientBy = ClientBy.SYN, **options: object
) -> tuple[Kafka07Decoder, RecordingSink, Connection]:
    sink = RecordingSink()
    conn = connection(client_by)
    return Kafka07Decoder(conn, sink.rows, DecodeOptions(**options), conn.flip), sink, conn


class Conversation:
    """Feeds a decoder both directions in the order given, keeping stream offsets."""

    def __init__(self, client_by: ClientBy = ClientBy.SYN, **options: object) -> None:
        self.decoder, self.sink, self.conn = decoder(client_by, **options)
        self.offsets = [0, 0]
        self.ts = 1_000_000

    def send(self, direction: Direction, data: bytes, pieces: int = 1) -> None:
        """``data`` in ``pieces`` capture records, one microsecond apart."""
        step = max(1, -(-len(data) // pieces))
        for pos in range(0, len(data), step):
            chunk = data[pos : pos + step]
            self.ts += 1
            self.decoder.on_data(direction, self.ts, self.offsets[direction], chunk)
            self.offsets[direction] += len(chunk)

    def client(self, data: bytes, pieces: int = 1) -> None:
        self.send(Direction.C2B, data, pieces)

    def broker(self, data: bytes, pieces: int = 1) -> None:
        self.send(Direction.B2C, data, pieces)

    def gap(self, direction: Direction, size: int) -> None:
        self.ts += 1
        self.decoder.on_gap(direction, self.ts, self.offsets[direction], size)
        self.offsets[direction] += size

    def close(self) -> RecordingSink:
        self.decoder.on_close(self.ts + 1)
        return self.sink
