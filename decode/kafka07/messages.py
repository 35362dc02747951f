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
from collections.abc import Iterator
from dataclasses import dataclass
from itertools import islice

from .compression import (
    NONE,
    DecompressionError,
    codec_name,
    decompress,
)

MAX_DEPTH = 3  # compressed sets inside compressed sets; real clients nest one level
MIN_HEADER = 5  # magic 0: magic + crc
HELD_MEMBERS = 10_000  # a wrapper's members held until its count is known (real ones: ~100s)
LISTED_PROBLEMS = 100  # damaged messages of one set reported one by one
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


class Budget:
    """Bytes decompression may still produce: one per frame, shared by its sets and every
    nesting level, so a frame's expanded messages never hold more than the limit."""

    __slots__ = ("left",)

    def __init__(self, left: int) -> None:
        self.left = left


class Problems:
    """The damage a walk met, as (anomaly kind, detail): the first
    :data:`LISTED_PROBLEMS` listed, the others counted."""

    __slots__ = ("listed", "unlisted")

    def __init__(self) -> None:
        self.listed: list[tuple[str, str]] = []
        self.unlisted = 0

    def report(self, kind: str, detail: str) -> None:
        if len(self.listed) < LISTED_PROBLEMS:
            self.listed.append((kind, detail))
        else:
            self.unlisted += 1

    def all(self) -> list[tuple[str, str]]:
        """Every problem to report: the listed ones, then one for the rest."""
        if not self.unlisted:
            return self.listed
        more = ("bad_message", f"{self.unlisted} more damaged messages in this set, not listed")
        return [*self.listed, more]


class _Tail:
    """Bytes of a partial message ending a walked set."""

    __slots__ = ("size",)

    def __init__(self) -> None:
        self.size = 0


class MessageSet:
    """The set ``buf[start:end]``, stored at log offset ``base_offset`` (None: unknown),
    walked by :meth:`messages`; ``tail`` and ``problems`` are complete once that walk
    ends. Decompression draws on ``budget``."""

    def __init__(
        self, buf: bytes | memoryview, start: int, end: int, base_offset: int | None, budget: Budget
    ) -> None:
        self._buf = buf
        self._start = start
        self._end = end
        self._base_offset = base_offset
        self._budget = budget
        self._tail = _Tail()
        self.problems = Problems()

    @property
    def tail(self) -> int:
        """Bytes of a partial message ending the set (a FETCH answer cut at its size)."""
        return self._tail.size

    def messages(self) -> Iterator[Message]:
        """The set's application messages, wrappers expanded, one at a time."""
        start, base_offset, problems = self._start, self._base_offset, self.problems
        view = memoryview(self._buf)
        for pos, magic, codec, ok, payload in _split(view, start, self._end, problems, self._tail):
            offset = None if base_offset is None else base_offset + pos - start
            if codec == NONE:
                yield Message(offset, magic, "NONE", ok, payload, None, 1)
                continue
            compression = codec_name(codec)
            left = self._budget.left
            members = _expand(magic, codec, ok, payload, problems, self._budget, 0)
            held = list(islice(members, HELD_MEMBERS))
            count = len(held)
            walk: Iterator[Member] = iter(held)
            if count == HELD_MEMBERS:  # counted to its end, then walked again from the start
                count += sum(1 for _ in members)
                held = []
                walk = _expand(magic, codec, ok, payload, Problems(), Budget(left), 0)
            for index, (m_magic, m_ok, m_payload) in enumerate(walk):
                yield Message(offset, m_magic, compression, m_ok, m_payload, index, count)


def read_message_set(
    buf: bytes | memoryview, start: int, end: int, base_offset: int | None, budget: Budget
) -> MessageSet:
    """The set ``buf[start:end]``, to walk with :meth:`MessageSet.messages`."""
    return MessageSet(buf, start, end, base_offset, budget)


Outer = tuple[int, int, int, bool, memoryview]  # position, magic, codec, crc ok, payload
Member = tuple[int, bool, memoryview | bytes | None]  # magic, checksum ok, payload


def _split(
    view: memoryview, start: int, end: int, problems: Problems, tail: _Tail
) -> Iterator[Outer]:
    """The intact messages of ``view[start:end]`` in order; damaged ones (their length is
    still known) are stepped over and go to ``problems``, a partial last one to ``tail``."""
    unpack = _LENGTH.unpack_from
    crc_at_unpack = _CRC.unpack_from
    crc32 = zlib.crc32
    pos = start
    while pos < end:
        if end - pos < 4:
            tail.size = end - pos
            break
        (size,) = unpack(view, pos)
        stop = pos + 4 + size
        if size < 0:
            problems.report("bad_message", f"negative message length {size}")
            break
        if stop > end:
            tail.size = end - pos
            break
        if size < MIN_HEADER:
            problems.report("bad_message", f"message length {size} is below the header")
            pos = stop
            continue
        magic = view[pos + 4]
        if magic == 0:
            codec, crc_at = NONE, pos + 5
        elif magic == 1 and size > MIN_HEADER:
            codec, crc_at = view[pos + 5] & 0x03, pos + 6
        else:
            problems.report("bad_magic", f"message magic {magic} is not 0 or 1")
            pos = stop
            continue
        payload = view[crc_at + 4 : stop]
        ok = crc32(payload) == crc_at_unpack(view, crc_at)[0]
        if not ok:
            problems.report("bad_checksum", f"CRC32 mismatch in a message of {size} bytes")
        yield pos, magic, codec, ok, payload
        pos = stop


def _expand(
    magic: int,
    codec: int,
    ok: bool,
    payload: memoryview,
    problems: Problems,
    budget: Budget,
    depth: int,
) -> Iterator[Member]:
    """The application messages inside a compressed message, or the message itself with no
    payload when it cannot be expanded."""
    if depth >= MAX_DEPTH:
        problems.report("decompression_failed", f"compression nested over {MAX_DEPTH}")
        yield magic, ok, None
        return
    try:
        inner = decompress(codec, payload, budget.left)
    except DecompressionError as exc:
        problems.report("decompression_failed", str(exc))
        yield magic, ok, None
        return
    budget.left -= len(inner)
    tail = _Tail()
    for _, i_magic, i_codec, i_ok, i_payload in _split(
        memoryview(inner), 0, len(inner), problems, tail
    ):
        if i_codec == NONE:
            yield i_magic, i_ok and ok, i_payload
            continue
        for m_magic, m_ok, m_payload in _expand(
            i_magic, i_codec, i_ok, i_payload, problems, budget, depth + 1
        ):
            yield m_magic, m_ok and ok, m_payload
    if tail.size:
        problems.report(
            "bad_message", f"compressed message set ends in {tail.size} bytes of a partial one"
        )
