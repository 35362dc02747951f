"""Kafka 0.7 requests and responses, laid out as the 0.7 source reads and writes them.

Requests (``kafka.api.*Request.readFrom``): ``[int32 length][int16 type]`` then the body.
PRODUCE, FETCH and OFFSETS start with ``[int16 topic length][topic][int32 partition]``;
MULTIFETCH and MULTIPRODUCE carry an int16 count of complete FETCH / PRODUCE bodies,
each with its own topic and partition. Responses (``MessageSetSend``,
``MultiMessageSetSend``, ``OffsetArraySend``) are ``[int32 length][int16 error]`` then
the body, with no correlation id; PRODUCE and MULTIPRODUCE get none.
"""

from __future__ import annotations

import socket
import struct
import zlib
from dataclasses import dataclass

PRODUCE, FETCH, MULTIFETCH, MULTIPRODUCE, OFFSETS = range(5)
REQUEST_NAMES = {
    PRODUCE: "PRODUCE",
    FETCH: "FETCH",
    MULTIFETCH: "MULTIFETCH",
    MULTIPRODUCE: "MULTIPRODUCE",
    OFFSETS: "OFFSETS",
}

# kafka.common.ErrorMapping as of 0.7
UNKNOWN = -1
NO_ERROR = 0
OFFSET_OUT_OF_RANGE = 1
INVALID_MESSAGE = 2
WRONG_PARTITION = 3
INVALID_FETCH_SIZE = 4
ERROR_NAMES = {
    UNKNOWN: "Unknown",
    NO_ERROR: "NoError",
    OFFSET_OUT_OF_RANGE: "OffsetOutOfRange",
    INVALID_MESSAGE: "InvalidMessage",
    WRONG_PARTITION: "WrongPartition",
    INVALID_FETCH_SIZE: "InvalidFetchSize",
}

LATEST_TIME = -1
EARLIEST_TIME = -2


class MalformedRequest(ValueError):
    """The request does not parse; 0.7 closes the connection on any such failure."""


@dataclass(frozen=True)
class Produce:
    topic: str
    partition: int
    messages: bytes


@dataclass(frozen=True)
class Fetch:
    topic: str
    partition: int
    offset: int
    max_size: int


@dataclass(frozen=True)
class Offsets:
    topic: str
    partition: int
    time: int
    max_offsets: int


Part = Produce | Fetch | Offsets


@dataclass(frozen=True)
class Request:
    type: int
    parts: list[Part]  # one for the single requests, the count's worth for the multi ones

    @property
    def name(self) -> str:
        return REQUEST_NAMES[self.type]


class _Reader:
    def __init__(self, data: bytes) -> None:
        self.data = data
        self.position = 0

    def take(self, fmt: str) -> tuple:
        size = struct.calcsize(fmt)
        if self.position + size > len(self.data):
            raise MalformedRequest(f"request ends inside a {fmt} field")
        values = struct.unpack_from(fmt, self.data, self.position)
        self.position += size
        return values

    def raw(self, size: int) -> bytes:
        if size < 0 or self.position + size > len(self.data):
            raise MalformedRequest("request ends inside a byte field")
        value = self.data[self.position : self.position + size]
        self.position += size
        return value

    def topic_partition(self) -> tuple[str, int]:
        (topic_length,) = self.take(">h")
        topic = self.raw(topic_length).decode("utf-8", errors="replace")
        (partition,) = self.take(">i")
        return topic, partition

    def produce(self) -> Produce:
        topic, partition = self.topic_partition()
        (size,) = self.take(">i")
        return Produce(topic, partition, self.raw(size))

    def fetch(self) -> Fetch:
        topic, partition = self.topic_partition()
        offset, max_size = self.take(">qi")
        return Fetch(topic, partition, offset, max_size)

    def offsets(self) -> Offsets:
        topic, partition = self.topic_partition()
        time, max_offsets = self.take(">qi")
        return Offsets(topic, partition, time, max_offsets)


def parse_request(body: bytes) -> Request:
    """``body`` is a request without its 4-byte length prefix."""
    reader = _Reader(body)
    (request_type,) = reader.take(">h")
    if request_type == PRODUCE:
        parts: list[Part] = [reader.produce()]
    elif request_type == FETCH:
        parts = [reader.fetch()]
    elif request_type == OFFSETS:
        parts = [reader.offsets()]
    elif request_type in (MULTIFETCH, MULTIPRODUCE):
        (count,) = reader.take(">h")
        read_one = reader.fetch if request_type == MULTIFETCH else reader.produce
        parts = [read_one() for _ in range(count)]
    else:
        raise MalformedRequest(f"no handler for request type {request_type}")
    return Request(request_type, parts)


def encode_message_set_send(error: int, data: bytes) -> bytes:
    """MessageSetSend: the FETCH response, and each part of a MULTIFETCH response."""
    return struct.pack(">ih", len(data) + 2, error) + data


def encode_multi_message_set_send(parts: list[bytes]) -> bytes:
    """MultiMessageSetSend: a NoError header around the parts' own MessageSetSends."""
    body = b"".join(parts)
    return struct.pack(">ih", len(body) + 2, NO_ERROR) + body


def encode_offset_array_send(offsets: list[int]) -> bytes:
    body = struct.pack(f">i{len(offsets)}q", len(offsets), *offsets)
    return struct.pack(">ih", len(body) + 2, NO_ERROR) + body


def encode_request(request: Request) -> bytes:
    """The wire form of a request (for scripted test clients)."""
    if request.type in (MULTIFETCH, MULTIPRODUCE):
        body = struct.pack(">h", len(request.parts)) + b"".join(map(_encode_part, request.parts))
    else:
        body = _encode_part(request.parts[0])
    body = struct.pack(">h", request.type) + body
    return struct.pack(">i", len(body)) + body


def _encode_part(part: Part) -> bytes:
    topic = part.topic.encode()
    head = struct.pack(">h", len(topic)) + topic + struct.pack(">i", part.partition)
    if isinstance(part, Produce):
        return head + struct.pack(">i", len(part.messages)) + part.messages
    if isinstance(part, Fetch):
        return head + struct.pack(">qi", part.offset, part.max_size)
    return head + struct.pack(">qi", part.time, part.max_offsets)


def encode_message(payload: bytes, magic: int = 1, codec: int = 0) -> bytes:
    """One message (for scripted test clients and hand-built wrappers)."""
    header = bytes([magic, codec]) if magic == 1 else bytes([magic])
    body = header + struct.pack(">I", zlib.crc32(payload)) + payload
    return struct.pack(">i", len(body)) + body


def receive_response(sock: socket.socket) -> bytes:
    """One ``[int32 length][body]`` response read off ``sock``: its body."""
    (length,) = struct.unpack(">i", _exactly(sock, 4))
    return _exactly(sock, length)


def _exactly(sock: socket.socket, size: int) -> bytes:
    data = b""
    while len(data) < size:
        chunk = sock.recv(size - len(data))
        if not chunk:
            raise ConnectionError("broker closed the connection")
        data += chunk
    return data
