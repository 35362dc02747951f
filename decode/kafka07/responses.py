"""What a 0.7 response body must look like for the request it answers.

From ``kafka.server.KafkaRequestHandlers``: a FETCH answer (``MessageSetSend``) is at most
MAX_SIZE raw log bytes, empty when its error code is set; a MULTIFETCH answer
(``MultiMessageSetSend``) has error NoError and one ``[int32 size][int16 error][set]``
part per fetch, each at most that fetch's MAX_SIZE; an OFFSETS answer (``OffsetArraySend``)
is NoError, ``[int32 count]`` and at most MAX_NUMBER_OF_OFFSETS int64s. Responses carry no
type, so the shapes also name the kind of a response whose request is unknown.
"""

from __future__ import annotations

from .pairing import Pending
from .wire import FETCH, MULTIFETCH, OFFSETS, read_offsets, split_parts


def fits(pending: Pending, buf: bytes, body: int, end: int, error: int) -> bool:
    """Can ``buf[body:end]`` with ``error`` be the answer to ``pending``?"""
    size = end - body
    known = pending.parts is not None  # a lost request is judged by its type alone
    if pending.type == FETCH:
        return size == 0 if error else not known or size <= max(pending.parts[0].limit, 0)
    if error:
        return False
    if pending.type == OFFSETS:
        offsets = read_offsets(buf, body, end)
        return offsets is not None and (not known or len(offsets) <= pending.parts[0].limit)
    parts = split_parts(buf, body, end)
    if parts is None or not known:
        return parts is not None
    if len(parts) != len(pending.parts):
        return False
    return all(
        (e - s == 0 if part_error else e - s <= max(fetch.limit, 0))
        for (part_error, s, e), fetch in zip(parts, pending.parts, strict=True)
    )


def guess_kind(buf: bytes, body: int, end: int, error: int) -> int:
    """The request type a response of unknown request most likely answers."""
    if error == 0 and body < end:
        if read_offsets(buf, body, end) is not None:
            return OFFSETS
        if split_parts(buf, body, end):
            return MULTIFETCH
    return FETCH
