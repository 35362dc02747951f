"""Walking a 0.7 message set: ``[int32 length][magic][attributes if magic=1][crc32][payload]``.

As ``kafka.message.ByteBufferMessageSet`` does, with two differences a passive decoder
needs: a damaged message is reported and stepped over (its length is still known) instead
of ending the walk, and the CRC32 (of the payload only) is checked and reported, never
trusted. A compressed message's payload is itself a message set; it is expanded
recursively, to a bounded depth and within one byte budget per frame.

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
from dataclasses import dataclass, field

from .compression import (
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
    tail: int = 0  # bytes of a partial message ending the set
    problems: list[tuple[str, str]] = field(default_factory=list)  # (anomaly kind, detail)


def read_message_set(
    buf: bytes | memoryview, start: int, end: int, base_offset: int | None, budget: Budget
) -> MessageSet:
    """Walk ``buf[start:end]``, a set stored at log offset ``base_offset`` (None: unknown);
    decompression draws on ``budget``."""
    result = MessageSet()
    messages = result.messages
    for pos, magic, codec, ok, payload in _split(memoryview(buf), start, end, result):
        offset = None if base_offset is None else base_offset + pos - start
        if codec == NONE:
            messages.append(Message(offset, magic, "NONE", ok, payload, None, 1))
            continue
        members = _expand(magic, codec, ok, payload, result, budget, 0)
        compression = codec_name(codec)
        count = len(members)
        for index, (m_magic, m_ok, m_payload) in enumerate(members):
            messages.append(Message(offset, m_magic, compression, m_ok, m_payload, index, count))
    return result


Outer = tuple[int, int, int, bool, memoryview]  # position, magic, codec, crc ok, payload
Member = tuple[int, bool, memoryview | bytes | None]  # magic, checksum ok, payload


class Budget:
    """Bytes decompression may still produce: one per frame, shared by its sets and every
    nesting level, so a frame's expanded messages never hold more than the limit."""

    __slots__ = ("left",)

    def __init__(self, left: int) -> None:
        self.left = left


def _split(view: memoryview, start: int, end: int, result: MessageSet) -> list[Outer]:
    """The intact messages of ``view[start:end]`` in order; damaged ones (their length is
    still known) are stepped over, and they and a partial last message go to ``result``."""
    out: list[Outer] = []
    append = out.append
    unpack = _LENGTH.unpack_from
    crc_at_unpack = _CRC.unpack_from
    crc32 = zlib.crc32
    problems = result.problems
    pos = start
    while pos < end:
        if end - pos < 4:
            result.tail = end - pos
            break
        (size,) = unpack(view, pos)
        stop = pos + 4 + size
        if size < 0:
            problems.append(("bad_message", f"negative message length {size}"))
            break
        if stop > end:
            result.tail = end - pos
            break
        if size < MIN_HEADER:
            problems.append(("bad_message", f"message length {size} is below the header"))
            pos = stop
            continue
        magic = view[pos + 4]
        if magic == 0:
            codec, crc_at = NONE, pos + 5
        elif magic == 1 and size > MIN_HEADER:
            codec, crc_at = view[pos + 5] & 0x03, pos + 6
        else:
            problems.append(("bad_magic", f"message magic {magic} is not 0 or 1"))
            pos = stop
            continue
        payload = view[crc_at + 4 : stop]
        ok = crc32(payload) == crc_at_unpack(view, crc_at)[0]
        if not ok:
            problems.append(("bad_checksum", f"CRC32 mismatch in a message of {size} bytes"))
        append((pos, magic, codec, ok, payload))
        pos = stop
    return out


def _expand(
    magic: int,
    codec: int,
    ok: bool,
    payload: memoryview,
    result: MessageSet,
    budget: Budget,
    depth: int,
) -> list[Member]:
    """The application messages inside a compressed message, or the message itself with no
    payload when it cannot be expanded."""
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
    members: list[Member] = []
    for _, i_magic, i_codec, i_ok, i_payload in _split(memoryview(inner), 0, len(inner), nested):
        if i_codec == NONE:
            members.append((i_magic, i_ok and ok, i_payload))
            continue
        for m_magic, m_ok, m_payload in _expand(
            i_magic, i_codec, i_ok, i_payload, nested, budget, depth + 1
        ):
            members.append((m_magic, m_ok and ok, m_payload))
    if nested.tail:
        nested.problems.append(
            ("bad_message", f"compressed message set ends in {nested.tail} bytes of a partial one")
        )
    result.problems.extend(nested.problems)
    return members
