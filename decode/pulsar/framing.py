"""Pulsar's framing: ``[totalSize][commandSize][command][payload...]``, as the
:class:`pwcap.decode.framing.FrameStream` cuts it.

A header is believed when its sizes fit together (and a frame over the size limit only
when its command decodes: brokers raise their limit, and such a frame is stepped over).
After damage the stream hunts for the next plausible frame boundary and only trusts it
once the command there decodes.
"""

from __future__ import annotations

import re
import struct
from collections.abc import Callable

import cython

from ..framing import BAD, FRAME, SKIP, WAIT, Candidate
from ..wire import VARINT, field_number, tag
from ._pb.pulsar_api_pb2 import BaseCommand

if cython.compiled:  # the stream's C declarations (framing.pxd): judge is a C call
    from cython.cimports.pwcap.decode.framing import FrameFormat
else:
    from ..framing import FrameFormat

HEADER = struct.Struct(">II")
SIZE = struct.Struct(">I")
MIN_COMMAND_SIZE = 2  # a BaseCommand always has its `type` field: one tag byte, one varint
# The longest command checked to tell a frame from garbage (after damage, in sniffing, over
# the frame limit). A check costs the command's length and overlapping fake headers can
# ask for one every few bytes; real commands are a few hundred bytes, and one longer than
# this met after damage is hunted past (the frame after it resynchronises).
MAX_CHECKED_COMMAND = 64 * 1024

# What every BaseCommand opens with as every known serializer writes it: its `type` field.
TYPE_TAG = tag(field_number(BaseCommand, "type", VARINT), VARINT)
# A frame start: totalSize and commandSize below 16 MiB (top byte zero), then that tag.
_CANDIDATE = re.compile(rb"\x00...\x00..." + re.escape(TYPE_TAG), re.DOTALL)
_CANDIDATE_LEN = HEADER.size + len(TYPE_TAG)

CommandCheck = Callable[[bytes, int, int], bool]  # buf, start, size -> decodes as a command


@cython.cclass
class PulsarFrames(FrameFormat):
    """The :class:`pwcap.decode.framing.FrameFormat` of Pulsar; ``confirm`` tells a
    command from garbage."""

    _confirm = cython.declare(object)

    def __init__(self, confirm: CommandCheck) -> None:
        super().__init__(HEADER.size, False)
        self._confirm = confirm

    @cython.ccall
    @cython.locals(buf=bytes, pos=cython.Py_ssize_t, n=cython.Py_ssize_t, max_frame=cython.longlong)
    @cython.locals(total=cython.longlong, command_size=cython.longlong)
    @cython.returns(tuple)
    def judge(self, buf: bytes, pos: int, n: int, max_frame: int) -> tuple[int, int, int]:
        total = _u32(buf, pos)
        command_size = _u32(buf, pos + 4)
        if total > max_frame or command_size < MIN_COMMAND_SIZE or command_size > total - 4:
            if _skippable(total, command_size, max_frame):
                if n - pos < 8 + command_size:
                    return WAIT, 8 + command_size, 0  # the command tells a frame from garbage
                if self._confirm(buf, pos + 8, command_size):
                    return SKIP, 4 + total, 0
            return BAD, 0, 0
        return FRAME, 4 + total, command_size

    def short_need(self, buf: bytes, pos: int, n: int, max_frame: int) -> int:
        if n - pos < SIZE.size:
            return 0
        (total,) = SIZE.unpack_from(buf, pos)
        return 4 + total if total <= max_frame else 0

    def skipped_detail(self, size: int, max_frame: int) -> str:
        return f"frame of totalSize {size - 4} over the {max_frame}-byte limit skipped"

    def bad(self, buf: bytes, pos: int, max_frame: int) -> tuple[str, int, str]:
        total, command_size = HEADER.unpack_from(buf, pos)
        if total > max_frame:
            return (
                "oversize_frame",
                total + 4,
                f"totalSize {total} exceeds the {max_frame}-byte frame limit",
            )
        return (
            "bad_frame_header",
            total + 4,
            f"commandSize {command_size} impossible in a frame of totalSize {total}",
        )

    def find(self, buf: bytes, pos: int, max_frame: int) -> Candidate:
        return find_frame_start(buf, pos, max_frame, self._confirm)


def find_frame_start(buf: bytes, pos: int, max_frame_size: int, confirm: CommandCheck) -> Candidate:
    """Find the next plausible frame boundary in ``buf`` at or after ``pos``.

    A boundary is confirmed when its sizes are consistent and its command decodes (checked
    by ``confirm``). When none is, the returned position is the first byte that could still
    begin one once more data arrives (a candidate waiting for its command's bytes: their
    count is its ``need``); everything before it can be skipped.
    """
    n = len(buf)
    search = _CANDIDATE.search
    while True:
        match = search(buf, pos)
        if match is None:
            return Candidate(max(pos, n - _CANDIDATE_LEN + 1), False)
        start = match.start()
        total, command_size = HEADER.unpack_from(buf, start)
        if (
            MIN_COMMAND_SIZE <= command_size <= min(total - 4, MAX_CHECKED_COMMAND)
            and total <= max_frame_size
        ):
            if start + 8 + command_size > n:
                return Candidate(start, False, 8 + command_size)
            if confirm(buf, start + 8, command_size):
                return Candidate(start, True)
        pos = start + 1


@cython.cfunc
@cython.inline
@cython.locals(buf=bytes, pos=cython.Py_ssize_t)
@cython.returns(cython.longlong)
def _u32(buf: bytes, pos: int) -> int:
    """The big-endian unsigned 32-bit integer at ``pos`` (each index is bounds-checked)."""
    return (
        cython.cast(cython.longlong, buf[pos]) << 24
        | buf[pos + 1] << 16
        | buf[pos + 2] << 8
        | buf[pos + 3]
    )


def _skippable(total: int, command_size: int, max_frame_size: int) -> bool:
    """An over-limit header whose command is small enough to check before skipping."""
    return MIN_COMMAND_SIZE <= command_size <= min(total - 4, max_frame_size, MAX_CHECKED_COMMAND)
