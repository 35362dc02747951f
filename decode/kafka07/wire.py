"""Kafka 0.7 request and response bodies, laid out as the 0.7 source reads and writes them.

Requests (``kafka.api.*Request``) are ``[int32 length][int16 type]`` and a body. PRODUCE,
FETCH and OFFSETS bodies start with ``[int16 topic length][topic][int32 partition]``;
MULTIFETCH and MULTIPRODUCE carry an int16 count of complete FETCH / PRODUCE bodies, each
with its own topic and partition. Responses (``MessageSetSend``, ``MultiMessageSetSend``,
``OffsetArraySend``) are ``[int32 length][int16 error]`` and a body with no correlation id:
a FETCH answer is raw log bytes, a MULTIFETCH answer one ``[int32 size][int16 error][set]``
part per fetch, an OFFSETS answer ``[int32 count][int64 offset]...``.
"""

from __future__ import annotations

import struct
from dataclasses import dataclass

PRODUCE, FETCH, MULTIFETCH, MULTIPRODUCE, OFFSETS = range(5)
REQUEST_NAMES = ("PRODUCE", "FETCH", "MULTIFETCH", "MULTIPRODUCE", "OFFSETS")
ANSWERED = frozenset({FETCH, MULTIFETCH, OFFSETS})  # PRODUCE / MULTIPRODUCE get no response

# kafka.common.ErrorMapping of 0.7
ERROR_NAMES = {
    -1: "Unknown",
    0: "NoError",
    1: "OffsetOutOfRange",
    2: "InvalidMessage",
    3: "WrongPartition",
    4: "InvalidFetchSize",
}
MIN_ERROR, MAX_ERROR = -1, 4
LATEST_TIME, EARLIEST_TIME = -1, -2  # OFFSETS special times

MAX_TOPIC_LENGTH = 255
I16 = struct.Struct(">h")
I32 = struct.Struct(">i")
HEAD = struct.Struct(">ih")  # request [length][type] and response [length][error]
FETCH_TAIL = struct.Struct(">iqi")  # partition, offset (or OFFSETS time), max size (or count)
PRODUCE_TAIL = struct.Struct(">ii")  # partition, message set size
PART_HEAD = HEAD  # a MULTIFETCH response part: [int32 size][int16 error]


class WireError(ValueError):
    """The bytes do not follow the 0.7 layout."""


@dataclass(slots=True)
class Part:
    """One PRODUCE, FETCH or OFFSETS body (a single request has one, MULTI* several).

    ``value`` is the FETCH offset or the OFFSETS time; ``limit`` the FETCH max size or the
    OFFSETS maximum number of offsets; ``start``/``end`` bound a PRODUCE message set.
    """

    kind: int  # PRODUCE, FETCH or OFFSETS
    topic: str
    partition: int
    value: int = 0
    limit: int = 0
    start: int = 0
    end: int = 0


def error_name(code: int) -> str:
    return ERROR_NAMES.get(code, str(code))


def part_kind(request_type: int) -> int:
    """What each part of a request of this type is."""
    if request_type == MULTIFETCH:
        return FETCH
    if request_type == MULTIPRODUCE:
        return PRODUCE
    return request_type


def read_topic(buf: bytes, pos: int, end: int) -> tuple[str, int]:
    """``[int16 length][bytes]`` at ``pos``: the topic and the position after it."""
    if pos + 2 > end:
        raise WireError("request ends inside a topic length")
    (length,) = I16.unpack_from(buf, pos)
    pos += 2
    if length < 0 or pos + length > end:
        raise WireError(f"topic length {length} runs past the request")
    return bytes(buf[pos : pos + length]).decode("utf-8", errors="replace"), pos + length


def read_part(buf: bytes, pos: int, end: int, kind: int) -> tuple[Part, int]:
    """One body of ``kind`` at ``pos``; returns it and the position after it."""
    topic, pos = read_topic(buf, pos, end)
    if kind == PRODUCE:
        if pos + PRODUCE_TAIL.size > end:
            raise WireError("PRODUCE ends inside its partition or message set size")
        partition, size = PRODUCE_TAIL.unpack_from(buf, pos)
        pos += PRODUCE_TAIL.size
        if size < 0 or pos + size > end:
            raise WireError(f"message set size {size} runs past the request")
        return Part(kind, topic, partition, start=pos, end=pos + size), pos + size
    if pos + FETCH_TAIL.size > end:
        raise WireError(f"{REQUEST_NAMES[kind]} body is too short")
    partition, value, limit = FETCH_TAIL.unpack_from(buf, pos)
    return Part(kind, topic, partition, value, limit), pos + FETCH_TAIL.size


def read_request(buf: bytes, start: int, end: int) -> tuple[int, list[Part]]:
    """The request type and parts of the request frame ``buf[start:end]`` (length included).

    Raises :class:`WireError` when the body does not fill the frame exactly as 0.7 writes it.
    """
    pos = start + HEAD.size
    (request_type,) = I16.unpack_from(buf, start + 4)
    if not 0 <= request_type < len(REQUEST_NAMES):
        raise WireError(f"request type {request_type} is not a 0.7 request")
    kind = part_kind(request_type)
    if kind == request_type:
        count = 1
    else:
        if pos + 2 > end:
            raise WireError(f"{REQUEST_NAMES[request_type]} ends before its count")
        (count,) = I16.unpack_from(buf, pos)
        pos += 2
        if count < 0:
            raise WireError(f"negative part count {count}")
    parts = []
    for _ in range(count):
        part, pos = read_part(buf, pos, end, kind)
        parts.append(part)
    if pos != end:
        raise WireError(f"{end - pos} bytes left after the request body")
    return request_type, parts


def read_offsets(buf: bytes, pos: int, end: int) -> list[int] | None:
    """An OFFSETS answer body ``[int32 count][int64]...``; None when it does not fit exactly."""
    if end - pos < 4:
        return None
    (count,) = I32.unpack_from(buf, pos)
    if count < 0 or end - pos != 4 + 8 * count:
        return None
    return list(struct.unpack_from(f">{count}q", buf, pos + 4))


def split_parts(buf: bytes, pos: int, end: int) -> list[tuple[int, int, int]] | None:
    """A MULTIFETCH answer body as ``(error, set start, set end)`` parts; None if it does not
    tile exactly into parts with 0.7 error codes."""
    parts = []
    while pos < end:
        if end - pos < PART_HEAD.size:
            return None
        size, error = PART_HEAD.unpack_from(buf, pos)
        if size < 2 or pos + 4 + size > end or not MIN_ERROR <= error <= MAX_ERROR:
            return None
        parts.append((error, pos + PART_HEAD.size, pos + 4 + size))
        pos += 4 + size
    return parts
