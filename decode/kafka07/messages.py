"""Walking a 0.7 message set: ``[int32 length][magic][attributes if magic=1][crc32][payload]``.

As ``kafka.message.ByteBufferMessageSet`` does, with two differences a passive decoder
needs: a damaged message is reported and stepped over (its length is still known) instead
of ending the walk, and the CRC32 (of the payload only) is checked and reported, never
trusted. A compressed message's payload is itself a message set; it is expanded
recursively, to a bounded depth and within one byte budget per outermost message.

A set that ends inside a message is normal for a FETCH answer (the broker sends the raw
log cut at MAX_SIZE): the walk returns those bytes as ``tail``, they are not a message.

Offsets are log byte positions: a message's offset is the set's base offset plus the
position of its outermost message, so every message expanded out of one compressed wrapper
carries the wrapper's offset, the position a consumer fetches it from. (0.7's iterator
reports the *next* offset instead; that is this offset plus the wrapper's size.)
"""

from __future__ import annotations

import struct
import zlib
from collections.abc import Iterator
from dataclasses import dataclass, field

from pwcap.decode.kafka07.compression import (
    NONE,
    DecompressionError,
    codec_name,
    decompress,
)

MAX_DEPTH = 3  # compressed sets inside compressed sets; real clients nest one level
MIN_HEADER = 5  # magic 0: magic + crc
_LENGTH = struct.Struct(">i")
_CRC = struct.Struct(">I")


@dataclass(slots=True)
class Message:
    """One application message after expansion."""

    offset: int | None  # log offset of its outermost message; None when not known
    magic: int
    compression: str  # codec of the outermost message that carried it
    checksum_ok: bool  # its own CRC and those of every wrapper around it
    payload: memoryview | bytes | None  # None: a wrapper that could not be expanded
    batch_index: int | None  # position among the messages of its wrapper; None when alone
    batch_size: int


@dataclass(slots=True)
class MessageSet:
    """What one message set holds."""

    messages: list[Message] = field(default_factory=list)
    outer: int = 0  # complete outermost messages
    tail: int = 0  # bytes of a partial message ending the set
    problems: list[tuple[str, str]] = field(default_factory=list)  # (anomaly kind, detail)

    @property
    def checksum_ok(self) -> bool | None:
        """Every message verified; None for a set with no message."""
        if not self.messages:
            return None
        return all(m.checksum_ok for m in self.messages)


def read_message_set(
    buf: bytes | memoryview, start: int, end: int, base_offset: int | None, limit: int
) -> MessageSet:
    """Walk ``buf[start:end]``, a set stored at log offset ``base_offset`` (None: unknown).

    ``limit`` bounds the bytes decompression may produce for the whole set.
    """
    result = MessageSet()
    for pos, codec, members in _walk(memoryview(buf), start, end, result, _Budget(limit), 0):
        result.outer += 1
        offset = None if base_offset is None else base_offset + pos - start
        compression = codec_name(codec)
        count = len(members)
        for index, (magic, ok, payload) in enumerate(members):
            batch_index = None if codec == NONE else index
            result.messages.append(
                Message(offset, magic, compression, ok, payload, batch_index, count)
            )
    return result


Header = tuple[int, int, bool, int]  # magic, codec, crc ok, payload start
Member = tuple[int, bool, memoryview | bytes | None]  # magic, checksum ok, payload


class _Budget:
    """Bytes decompression may still produce for one set, shared by every nesting level."""

    __slots__ = ("left",)

    def __init__(self, left: int) -> None:
        self.left = left


def _walk(
    view: memoryview, start: int, end: int, result: MessageSet, budget: _Budget, depth: int
) -> Iterator[tuple[int, int, list[Member]]]:
    """``(position, codec, application messages)`` for each intact message of the set."""
    pos = start
    while pos < end:
        size, header = _message_at(view, pos, end, result)
        if size < 0:
            return
        if header is not None:
            yield pos, header[1], _expand(view, pos + 4 + size, header, result, budget, depth)
        pos += 4 + size


def _message_at(
    view: memoryview, pos: int, end: int, result: MessageSet
) -> tuple[int, Header | None]:
    """Size of the message at ``pos`` (-1: the set ends here) and its header (None: damaged,
    step over it)."""
    if end - pos < 4:
        result.tail = end - pos
        return -1, None
    (size,) = _LENGTH.unpack_from(view, pos)
    if size < 0:
        result.problems.append(("bad_message", f"negative message length {size}"))
        return -1, None
    if pos + 4 + size > end:
        result.tail = end - pos
        return -1, None
    if size < MIN_HEADER:
        result.problems.append(("bad_message", f"message length {size} is below the header"))
        return size, None
    magic = view[pos + 4]
    if magic == 0:
        codec, crc_at = NONE, pos + 5
    elif magic == 1 and size > MIN_HEADER:
        codec, crc_at = view[pos + 5] & 0x03, pos + 6
    else:
        result.problems.append(("bad_magic", f"message magic {magic} is not 0 or 1"))
        return size, None
    payload_at = crc_at + 4
    (crc,) = _CRC.unpack_from(view, crc_at)
    ok = zlib.crc32(view[payload_at : pos + 4 + size]) == crc
    if not ok:
        result.problems.append(("bad_checksum", f"CRC32 mismatch in a message of {size} bytes"))
    return size, (magic, codec, ok, payload_at)


def _expand(
    view: memoryview, end: int, header: Header, result: MessageSet, budget: _Budget, depth: int
) -> list[Member]:
    """The application messages of the message ending at ``end``: itself, or its set."""
    magic, codec, ok, payload_at = header
    payload = view[payload_at:end]
    if codec == NONE:
        return [(magic, ok, payload)]
    if depth >= MAX_DEPTH:
        result.problems.append(("decompression_failed", f"compression nested over {MAX_DEPTH}"))
        return [(magic, ok, None)]
    try:
        inner = decompress(codec, bytes(payload), budget.left)
    except DecompressionError as exc:
        result.problems.append(("decompression_failed", str(exc)))
        return [(magic, ok, None)]
    budget.left -= len(inner)
    nested = MessageSet()
    members = [
        (m_magic, m_ok and ok, m_payload)
        for _, _, inner_members in _walk(
            memoryview(inner), 0, len(inner), nested, budget, depth + 1
        )
        for m_magic, m_ok, m_payload in inner_members
    ]
    if nested.tail:
        nested.problems.append(
            ("bad_message", f"compressed message set ends in {nested.tail} bytes of a partial one")
        )
    result.problems.extend(nested.problems)
    return members
