"""Does a byte string look like Kafka 0.7? Used for detection on any port and for resync.

A 0.7 frame has no magic number, so a boundary is only believed when its fields fit
together: a request's length, type, count, topic lengths and sizes must tile the frame
exactly, topics must be printable ASCII, and a produced message set must open with a
message whose magic, codec and (when it is all there) CRC32 are right. A response's error
code must be one 0.7 defines (with an empty body, as 0.7 sends errors) and its body must be
an offsets array, MULTIFETCH parts or a message set whose first message checks out. Only
the first :data:`WINDOW` bytes of a candidate are ever examined, so a hunt never waits on
a whole large frame.
"""

from __future__ import annotations

import re
import struct
import zlib
from collections.abc import Callable
from itertools import pairwise

from .. import MAX_FRAME_SIZE
from ..framing import Candidate
from .framing import MIN_LENGTH
from .wire import (
    FETCH,
    FETCH_TAIL,
    HEAD,
    I16,
    MAX_ERROR,
    MAX_TOPIC_LENGTH,
    MIN_ERROR,
    OFFSETS,
    PRODUCE,
    PRODUCE_TAIL,
    REQUEST_NAMES,
    WireError,
    part_kind,
    read_offsets,
    read_request,
    split_parts,
)

WINDOW = 64 * 1024  # bytes of a candidate frame examined at most
MAX_PARTS = 10_000  # parts of a MULTI* request believable in one frame
MAX_PARTITION = 1 << 16

# Frame starts the checks can accept, found at C speed (lengths below 16 MiB). A request:
# length >= 13, type 0-4, then a topic length (< 256) and a printable first character,
# after a part count (<= MAX_PARTS) for MULTI*. A response: an empty body with error -1-4,
# or a body of 4 bytes or more with error 0 opening with an int32 below 16 MiB.
_REQUEST_START = re.compile(
    rb"\x00(?!\x00\x00[\x00-\x0c])..."
    rb"(?:\x00[\x00\x01\x04]|\x00[\x02\x03](?:\x00[\x01-\xff]|[\x01-\x27].))"
    rb"\x00[\x01-\xff][\x21-\x7e]",
    re.DOTALL,
)
_REQUEST_WIDTH = 11
_RESPONSE_START = re.compile(
    rb"\x00\x00\x00\x02(?:\x00[\x00-\x04]|\xff\xff)|\x00(?!\x00\x00[\x00-\x05])...\x00\x00\x00",
    re.DOTALL,
)
_RESPONSE_WIDTH = 7
_MESSAGE_HEAD = struct.Struct(">ib")  # length, magic
_CRC = struct.Struct(">I")


Check = Callable[[bytes, int, int, bool], bool]  # buf, position, max frame size, final


class _Need(Exception):
    """More bytes are needed to judge (a hunt looks again once any more arrive)."""


def looks_like_request(data: bytes, max_frame_size: int = MAX_FRAME_SIZE) -> bool:
    """Does ``data`` start with a Kafka 0.7 request whose fields are consistent?

    When ``data`` holds only the start of a large request, the fields present decide,
    but at least the type, length and first topic must be there.
    """
    return _check(check_request, data, max_frame_size)


def looks_like_response(data: bytes, max_frame_size: int = MAX_FRAME_SIZE) -> bool:
    """Does ``data`` start with a Kafka 0.7 response whose body fits its length?"""
    return _check(check_response, data, max_frame_size)


def _check(check: Check, data: bytes, max_frame_size: int) -> bool:
    try:
        return check(data, 0, max_frame_size, True)
    except _Need:
        return False


def find_request_start(buf: bytes, pos: int, max_frame_size: int) -> Candidate:
    """The next confirmed request boundary in ``buf`` at or after ``pos``."""
    return _find(_REQUEST_START, _REQUEST_WIDTH, check_request, buf, pos, max_frame_size)


def find_response_start(buf: bytes, pos: int, max_frame_size: int) -> Candidate:
    """The next confirmed response boundary in ``buf`` at or after ``pos``."""
    return _find(_RESPONSE_START, _RESPONSE_WIDTH, check_response, buf, pos, max_frame_size)


def _find(
    pattern: re.Pattern, width: int, check: Check, buf: bytes, pos: int, max_frame: int
) -> Candidate:
    """A candidate that needs more bytes does not hide a confirmed one after it: the
    confirmed boundary wins, so the end of a stream cannot strand whole frames. ``width``:
    bytes ``pattern`` spans, kept at the end of ``buf`` in case a candidate starts there."""
    search = pattern.search
    waiting = None
    while True:
        match = search(buf, pos)
        if match is None:
            return waiting or Candidate(max(pos, len(buf) - width + 1), False)
        start = match.start()
        try:
            if check(buf, start, max_frame, False):
                return Candidate(start, True)
        except _Need:
            waiting = waiting or Candidate(start, False)
        pos = start + 1


# -- requests ------------------------------------------------------------------------------


def check_request(buf: bytes, pos: int, max_frame: int, final: bool) -> bool:
    """Is there a consistent request at ``pos``? Raises :class:`_Need` when ``buf`` is too
    short to tell; ``final``: no more bytes will come, the fields present decide."""
    _have(buf, pos, HEAD.size)
    length, request_type = HEAD.unpack_from(buf, pos)
    if not MIN_LENGTH <= length <= max_frame or not 0 <= request_type < len(REQUEST_NAMES):
        return False
    end = pos + 4 + length
    if end <= len(buf) and 4 + length <= WINDOW:
        return _whole_request(buf, pos, end)
    if not _request_prefix(buf, pos, end, request_type, final):
        return False
    if not final and 4 + length <= WINDOW:
        raise _Need  # the prefix fits: wait to check the whole request
    return True


def _whole_request(buf: bytes, start: int, end: int) -> bool:
    try:
        _, parts = read_request(buf, start, end)
    except WireError:
        return False
    if not parts or len(parts) > MAX_PARTS:
        return False
    for part in parts:
        if not _printable(part.topic.encode()) or not -1 <= part.partition < MAX_PARTITION:
            return False
        if part.kind == FETCH and (part.value < 0 or part.limit < 0):
            return False
        if part.kind == OFFSETS and (part.value < -2 or part.limit < 0):
            return False
        if part.kind == PRODUCE and _first_message(buf, part.start, part.end, True) == NO:
            return False
    # Produced messages prove a PRODUCE: a first one whose CRC32 covers a payload.
    first = parts[0]
    return first.kind != PRODUCE or _first_message(buf, first.start, first.end, True) == STRONG


def _request_prefix(buf: bytes, start: int, end: int, request_type: int, final: bool) -> bool:
    """Judge a request too long to examine whole by its first part's fields."""
    pos = start + HEAD.size
    kind = part_kind(request_type)
    if kind != request_type:
        _have(buf, pos, 2)
        (count,) = I16.unpack_from(buf, pos)
        if not 1 <= count <= MAX_PARTS:
            return False
        pos += 2
    topic_end = _topic(buf, pos, end)
    if topic_end < 0:
        return False
    pos = topic_end
    if kind != PRODUCE:  # FETCH / OFFSETS parts have a fixed size
        if kind == request_type:
            return pos + FETCH_TAIL.size == end
        return pos + FETCH_TAIL.size <= end
    if not _has(buf, pos, PRODUCE_TAIL.size, start, final):
        return True
    partition, size = PRODUCE_TAIL.unpack_from(buf, pos)
    pos += PRODUCE_TAIL.size
    if not -1 <= partition < MAX_PARTITION or size < 0 or pos + size > end:
        return False
    if request_type == PRODUCE and pos + size != end:
        return False
    return _first_message(buf, pos, pos + size, final, start) != NO


def _topic(buf: bytes, pos: int, end: int) -> int:
    """Position after a plausible topic at ``pos``, or -1."""
    _have(buf, pos, 2)
    (length,) = I16.unpack_from(buf, pos)
    pos += 2
    if not 1 <= length <= MAX_TOPIC_LENGTH or pos + length > end:
        return -1
    _have(buf, pos, length)
    return pos + length if _printable(buf[pos : pos + length]) else -1


def _printable(topic: bytes) -> bool:
    return 0 < len(topic) <= MAX_TOPIC_LENGTH and all(0x21 <= b <= 0x7E for b in topic)


# -- responses -----------------------------------------------------------------------------


def check_response(
    buf: bytes, pos: int, max_frame: int, final: bool, run: int = 0, strong_needed: bool = False
) -> bool:
    """Is there a consistent response at ``pos``? (:class:`_Need` as for requests.)

    A body that proves little by itself (empty, an empty offsets array) is believed as the
    first of :data:`WEAK_RUN` such responses in a row, before one that proves itself, or
    (``final``) when the bytes end right after it. One whose first message is cut (a FETCH
    smaller than that message) needs a later response that proves itself. A response too
    long to examine whole is believed on a first message whose CRC32 checks out.
    """
    _have(buf, pos, HEAD.size)
    length, error = HEAD.unpack_from(buf, pos)
    if not _plausible_response_head(length, error, max_frame):
        return False
    end = pos + 4 + length
    body = pos + HEAD.size
    if end <= len(buf) and 4 + length <= WINDOW:
        strength = _body_strength(buf, body, end)
        if strength in (NO, STRONG):
            return strength == STRONG
        if final and end == len(buf):
            return True
        strong_needed = strong_needed or strength == CUT
        if run + 1 >= WEAK_RUN:
            return not strong_needed
        try:
            return check_response(buf, end, max_frame, final, run + 1, strong_needed)
        except _Need:
            if final:
                return False
            raise
    first = _first_message(buf, body, end, final, pos)
    if first != STRONG and first != NO and not final and 4 + length <= WINDOW:
        raise _Need
    return first == STRONG


WEAK_RUN = 3  # responses that prove little alone, believed together


def _plausible_response_head(length: int, error: int, max_frame: int) -> bool:
    if not MIN_LENGTH <= length <= max_frame or not MIN_ERROR <= error <= MAX_ERROR:
        return False
    return not error or length == MIN_LENGTH  # 0.7 answers an error with an empty body


def _body_strength(buf: bytes, body: int, end: int) -> int:
    """How well a whole response body proves itself: an offsets array, MULTIFETCH parts or
    one message set."""
    offsets = read_offsets(buf, body, end)
    if offsets:
        # Log.getOffsetsBefore answers newest first
        descending = all(a >= b for a, b in pairwise(offsets))
        return STRONG if descending and offsets[-1] >= 0 else NO
    if offsets is not None:
        return WEAK
    parts = split_parts(buf, body, end)
    if parts:
        strengths = [_first_message(buf, s, e, True) for _, s, e in parts]
        if NO not in strengths:
            return STRONG if STRONG in strengths else min(strengths)
    return _first_message(buf, body, end, True)


NO, CUT, WEAK, STRONG = 0, 1, 2, 3  # how much a response body or message set start proves


def _first_message(buf: bytes, pos: int, end: int, final: bool, start: int = -1) -> int:
    """How well the message set ``buf[pos:end]`` opens: STRONG when its first message is
    complete and its CRC32 right, WEAK when empty or too short to tell, CUT when its first
    message has a sound header but runs past ``end`` (a FETCH cut at MAX_SIZE), NO
    otherwise."""
    if end - pos < _MESSAGE_HEAD.size:
        return WEAK  # empty, or a partial tail only
    if not _has(buf, pos, _MESSAGE_HEAD.size, start, final):
        return WEAK
    size, magic = _MESSAGE_HEAD.unpack_from(buf, pos)
    header = 5 if magic == 0 else 6
    if magic not in (0, 1) or size < header:
        return NO
    if magic == 1:
        if not _has(buf, pos, 6, start, final):
            return WEAK
        if buf[pos + 5] & 0x03 == 0x03:
            return NO
    message_end = pos + 4 + size
    if message_end > end:
        return CUT
    if start >= 0 and message_end - start > WINDOW:
        return WEAK
    if not _has(buf, pos, 4 + size, start, final):
        return WEAK
    crc_at = pos + 4 + header - 4
    (crc,) = _CRC.unpack_from(buf, crc_at)
    if zlib.crc32(buf[crc_at + 4 : message_end]) != crc:
        return NO
    return STRONG if size > header else WEAK  # an empty payload's CRC is 0: proves little


# -- helpers -------------------------------------------------------------------------------


def _have(buf: bytes, pos: int, size: int) -> None:
    """Bytes a verdict cannot do without: missing, the answer is no (final) or wait."""
    if pos + size > len(buf):
        raise _Need


def _has(buf: bytes, pos: int, size: int, start: int, final: bool) -> bool:
    """Bytes that would sharpen a verdict: missing, the fields so far decide (final) or wait."""
    if pos + size <= len(buf):
        return True
    if final or start < 0:
        return False
    raise _Need
