"""Kafka 0.7's framing: ``[int32 length][length bytes]``, as the
:class:`pwcap.decode.framing.FrameStream` cuts it.

The length prefix alone proves little, so after damage (a gap, an impossible length, a
frame its handler rejects) the stream hunts: it skips to the next position that a
direction-specific boundary finder (:mod:`.sniff`) confirms: a request or response whose
fields fit together. A frame longer than the limit (up to :data:`MAX_SKIPPED_FRAME`) is
stepped over rather than hunted through: in step, its length is trustworthy, and hunting
inside megabytes of message data would be slow and risky.
"""

from __future__ import annotations

from collections.abc import Callable

import cython

from ..framing import BAD, FRAME, SKIP, Candidate
from .wire import I32

if cython.compiled:  # the stream's C declarations (framing.pxd): judge is a C call
    from cython.cimports.pwcap.decode.framing import FrameFormat
else:
    from ..framing import FrameFormat

MIN_LENGTH = 2  # every request has its type, every response its error code
MAX_SKIPPED_FRAME = 256 * 1024 * 1024  # oversize frames up to this are stepped over, not hunted

BoundaryFinder = Callable[[bytes, int, int], Candidate]  # buf, pos, max frame size


@cython.cclass
class KafkaFrames(FrameFormat):
    """The :class:`pwcap.decode.framing.FrameFormat` of one direction of Kafka 0.7:
    requests and responses share the length prefix, each has its own boundary finder."""

    find = cython.declare(object, visibility="readonly")

    def __init__(self, find: BoundaryFinder) -> None:
        super().__init__(I32.size, True)
        self.find = find

    @cython.ccall
    @cython.locals(buf=bytes, pos=cython.Py_ssize_t, n=cython.Py_ssize_t, max_frame=cython.longlong)
    @cython.returns(tuple)
    def judge(self, buf: bytes, pos: int, n: int, max_frame: int) -> tuple[int, int, int]:
        (length,) = I32.unpack_from(buf, pos)
        if max_frame < length <= MAX_SKIPPED_FRAME:
            return SKIP, 4 + length, 0
        if not MIN_LENGTH <= length <= max_frame:
            return BAD, 0, 0
        return FRAME, 4 + length, length

    def short_need(self, buf: bytes, pos: int, n: int, max_frame: int) -> int:
        return 0  # fewer bytes than the length prefix

    def skipped_detail(self, size: int, max_frame: int) -> str:
        return f"length {size - 4} exceeds the {max_frame}-byte limit: frame skipped"

    def bad(self, buf: bytes, pos: int, max_frame: int) -> tuple[str, int, str]:
        (length,) = I32.unpack_from(buf, pos)
        if length > max_frame:
            return "oversize_frame", length + 4, f"length {length} is beyond any frame"
        return "bad_frame_header", max(length, 0) + 4, f"length {length} is too short for a frame"
