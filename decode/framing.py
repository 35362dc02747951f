"""Cutting one direction's byte stream into length-prefixed frames, for every protocol.

Pulsar (``[totalSize][commandSize]...``) and Kafka 0.7 (``[length]...``) frame their
streams the same way; what differs is described by a :class:`FrameFormat`: the header,
what makes a frame start plausible, and how to find the next confirmed boundary. The
stream is always in one :class:`Mode`:

- ``IN_SYNC``: at a frame boundary, or inside a frame whose end is known. Whole frames
  inside one capture record are handed out straight from its bytes, no copy; the bytes of
  a frame not complete yet wait in a list of chunks joined once, when it is whole, so a
  frame spread over many segments costs linear time.
- ``HUNTING``: after damage (a gap inside a frame's header, an impossible header, a frame
  its handler rejects) it skips to the next boundary the format confirms and reports the
  bytes skipped as one ``resync`` anomaly.
- ``DISCARDING``: dropping the rest of a frame it will not decode (one over the size
  limit stepped over, one a gap cut whose end is known, or one given up to bound memory):
  in step again after it.

The bytes of incomplete frames count toward a :class:`pwcap.decode.api.FrameBudget` that
every stream of a capture shares; past it, the streams holding most give their frame up.
"""

from __future__ import annotations

from collections.abc import Callable
from enum import IntEnum
from typing import NamedTuple

import cython

from .api import FrameBudget


class Mode(IntEnum):
    IN_SYNC = 0
    HUNTING = 1
    DISCARDING = 2


# C constants when compiled: a stream's mode is a C int, tested at every record.
IN_SYNC = cython.declare(cython.int, Mode.IN_SYNC)
HUNTING = cython.declare(cython.int, Mode.HUNTING)
DISCARDING = cython.declare(cython.int, Mode.DISCARDING)

# What a format makes of the header at a position (:meth:`FrameFormat.judge`).
FRAME = 0  # a plausible frame of ``size`` bytes, prefix included
SKIP = 1  # a frame of ``size`` bytes to step over, over the size limit but believed
WAIT = 2  # undecided until ``size`` bytes from the header on are there
BAD = 3  # no frame starts here
_FRAME = cython.declare(cython.int, FRAME)  # (C constants when compiled)
_SKIP = cython.declare(cython.int, SKIP)
_WAIT = cython.declare(cython.int, WAIT)


class Candidate(NamedTuple):
    """Result of a boundary search in ``buf`` from some position.

    ``confirmed``: a frame starts at ``pos``. Otherwise nothing before ``pos`` can start
    one, and ``need`` is how many bytes from ``pos`` on must be there before searching
    again is worth it (0: any more).
    """

    pos: int
    confirmed: bool
    need: int = 0


@cython.cclass
class FrameFormat:
    """One protocol's framing, for :class:`FrameStream` (a base class: compiled, its
    :meth:`judge` is a C call at every frame).

    ``header_size``: bytes a frame start is judged on. ``resync_at_last_skip``: a resync
    is timed by its last skipped byte (Kafka 0.7) or by the record in which the confirmed
    boundary was found (Pulsar), as each protocol always wrote it.
    """

    def __init__(self, header_size: int, resync_at_last_skip: bool) -> None:
        self.header_size = header_size
        self.resync_at_last_skip = resync_at_last_skip

    @cython.ccall
    @cython.locals(buf=bytes, pos=cython.Py_ssize_t, n=cython.Py_ssize_t, max_frame=cython.longlong)
    @cython.returns(tuple)
    def judge(self, buf: bytes, pos: int, n: int, max_frame: int) -> tuple[int, int, int]:
        """(verdict, size, field) for the header at ``pos`` (``n`` bytes in ``buf``):
        FRAME, SKIP, WAIT or BAD; ``field`` goes to the frame handler."""
        raise NotImplementedError

    # Also, on the rarer paths: ``short_need(buf, pos, n, max_frame)``, the bytes from
    # ``pos`` that complete a frame begun with fewer than a header's bytes (0: unknown);
    # ``skipped_detail(size, max_frame)``, what the ``oversize_frame`` anomaly of a frame
    # stepped over says; ``bad(buf, pos, max_frame)``, the (kind, size, detail) of the
    # anomaly for a header judged BAD; ``find(buf, pos, max_frame)``, the next confirmed
    # boundary at or after ``pos`` (a :class:`Candidate`), or where to resume.


@cython.cclass
class FrameHandler:
    """Takes one stream's whole frames (a base class: compiled, :meth:`frame` is a C call
    at every frame)."""

    @cython.ccall
    @cython.locals(buf=bytes, start=cython.Py_ssize_t, end=cython.Py_ssize_t)
    @cython.locals(field=cython.longlong, offset=cython.longlong, ts_first=cython.longlong)
    @cython.locals(ts=cython.longlong)
    def frame(
        self,
        buf: bytes,
        start: int,
        end: int,
        field: int,
        offset: int,
        ts_first: int,
        ts: int,
    ) -> bool | None:
        """One whole frame, ``buf[start:end]`` (prefix included); ``field`` is what the
        format read from its header (Pulsar's commandSize). False: it does not parse, the
        framing is wrong and hunts again from the next byte."""
        raise NotImplementedError


@cython.cclass
class CallingHandler(FrameHandler):
    """A :class:`FrameHandler` that hands each frame to a callable of the same arguments."""

    def __init__(self, call: Callable[..., bool | None]) -> None:
        self._call = call

    @cython.ccall
    @cython.locals(buf=bytes, start=cython.Py_ssize_t, end=cython.Py_ssize_t)
    @cython.locals(field=cython.longlong, offset=cython.longlong, ts_first=cython.longlong)
    @cython.locals(ts=cython.longlong)
    def frame(
        self,
        buf: bytes,
        start: int,
        end: int,
        field: int,
        offset: int,
        ts_first: int,
        ts: int,
    ) -> bool | None:
        return self._call(buf, start, end, field, offset, ts_first, ts)


AnomalyReporter = Callable[[str, int, int, int, str], None]  # kind, ts, offset, size, detail
LostFrame = Callable[[bytes, int, int], None]  # buf, start of the frame's first bytes, ts


class FrameStream:
    """Frames of one direction of one connection (compiled, a C struct: ``framing.pxd``).

    ``handle`` is a :class:`FrameHandler`, or a callable taking its :meth:`~FrameHandler.frame`
    arguments.
    """

    def __init__(
        self,
        frame_format: FrameFormat,
        handle: FrameHandler | Callable[..., bool | None],
        report: AnomalyReporter,
        max_frame_size: int,
        in_sync: bool,
        lost: LostFrame | None = None,
        budget: FrameBudget | None = None,
    ) -> None:
        self._format = frame_format
        self._budget = budget or FrameBudget()  # shared by every stream of a capture
        self._handle = handle if isinstance(handle, FrameHandler) else CallingHandler(handle)
        self._report = report
        self._lost = lost  # told of each whole frame known lost (stepped over, cut by a gap)
        self._max_frame = max_frame_size
        self._mode = IN_SYNC if in_sync else HUNTING
        self._chunks: list[bytes] = []  # bytes of an incomplete frame or hunt candidate
        self._chunk_ts: list[tuple[int, int]] = []  # (length, ts) of each pending chunk
        self._have = 0
        self._need = 0  # pending bytes needed before parsing again; 0 while unknown
        self._start_offset = 0  # stream offset of the first pending byte
        self._discard = 0  # DISCARDING: bytes still to drop
        self._skipped = 0  # bytes skipped by the current hunt
        self._skip_ts = 0  # capture time of the last byte it skipped
        self._hunt_from = -1  # stream offset where the current hunt started skipping

    @cython.ccall
    @cython.locals(ts=cython.longlong, offset=cython.longlong, data=bytes)
    @cython.returns(cython.void)
    def feed(self, ts: int, offset: int, data: bytes) -> None:
        """Bytes of one capture record, all captured at ``ts``."""
        if self._mode == DISCARDING:
            dropped = min(self._discard, len(data))
            self._discard -= dropped
            if not self._discard:
                self._mode = IN_SYNC
            data = data[dropped:]
            offset += dropped
            if not data:
                return
        chunk_ts = None
        held = self._have
        if self._chunks:
            self._chunks.append(data)
            self._chunk_ts.append((len(data), ts))
            self._have += len(data)
            if self._have < self._need:
                self._budget.hold(self, self._have)
                return
            data = b"".join(self._chunks)
            offset = self._start_offset
            chunk_ts = self._chunk_ts
            self._chunks, self._chunk_ts = [], []
            self._have = self._need = 0
        self._parse(data, offset, ts, chunk_ts)
        if self._have != held:
            self._budget.hold(self, self._have)

    @cython.locals(data=bytes, offset=cython.longlong, ts=cython.longlong, chunk_ts=list)
    @cython.locals(pos=cython.Py_ssize_t, n=cython.Py_ssize_t, old=cython.Py_ssize_t)
    @cython.locals(end=cython.Py_ssize_t, verdict=cython.int, size=cython.Py_ssize_t)
    @cython.locals(field=cython.longlong, ts_first=cython.longlong, max_frame=cython.longlong)
    @cython.locals(frame_format=FrameFormat, handle=FrameHandler)
    @cython.returns(cython.void)
    def _parse(
        self, data: bytes, offset: int, ts: int, chunk_ts: list[tuple[int, int]] | None
    ) -> None:
        """Hand out every whole frame of ``data``; keep what is left."""
        pos = 0
        n = len(data)
        # Frames that start before this boundary started in an earlier record.
        old = n - chunk_ts[-1][0] if chunk_ts else 0
        need = 0
        frame_format = self._format
        header = frame_format.header_size
        handle = self._handle
        max_frame = self._max_frame
        while True:
            if self._mode == HUNTING:
                found = frame_format.find(data, pos, max_frame)
                if found.pos > pos:
                    last = found.pos - 1
                    self._skip(
                        offset + pos, found.pos - pos, ts if last >= old else _ts_at(chunk_ts, last)
                    )
                pos = found.pos
                if not found.confirmed:
                    need = found.need
                    break
                self._end_hunt(ts)
            if n - pos < header:
                need = frame_format.short_need(data, pos, n, max_frame)
                break
            verdict, size, field = frame_format.judge(data, pos, n, max_frame)
            if verdict == _FRAME:
                end = pos + size
                if end > n:
                    need = size
                    break
                ts_first = ts if pos >= old else _ts_at(chunk_ts, pos)
                # A frame is whole when its last byte arrived, and not before its first (a
                # reordered or backwards-running capture can time the first bytes later).
                if (
                    handle.frame(data, pos, end, field, offset + pos, ts_first, max(ts, ts_first))
                    is False
                ):
                    self._start_hunt(offset + pos)
                    self._skip(offset + pos, 1, ts)
                    pos += 1
                    continue
                pos = end
            elif verdict == _SKIP:
                self._step_over(data, pos, size, offset + pos, ts)
                end = pos + size
                if end >= n:
                    self._discard_next(end - n)
                    pos = n
                    break
                pos = end
            elif verdict == _WAIT:
                need = size
                break
            else:
                kind, bad_size, detail = frame_format.bad(data, pos, max_frame)
                self._report(kind, ts, offset + pos, bad_size, detail)
                self._start_hunt(offset + pos)
                self._skip(offset + pos, 1, ts)
                pos += 1
        if pos < n:
            self._keep(data, pos, offset, ts, old, chunk_ts, need)

    def _keep(
        self,
        data: bytes,
        pos: int,
        offset: int,
        ts: int,
        old: int,
        chunk_ts: list[tuple[int, int]] | None,
        need: int,
    ) -> None:
        """Hold ``data[pos:]``: the start of a frame (or of a hunt candidate)."""
        rest = data[pos:] if pos else data
        self._chunks = [rest]
        self._have = len(rest)
        self._need = need
        self._start_offset = offset + pos
        if chunk_ts and pos < old:
            self._chunk_ts = _ts_tail(chunk_ts, pos)
        else:
            self._chunk_ts = [(len(rest), ts)]

    def _step_over(self, data: bytes, pos: int, size: int, offset: int, ts: int) -> None:
        """A frame over the size limit that the format believes: reported, not decoded.

        Brokers raise their frame limit, so such a frame is real: stepping over it keeps
        the stream in sync, where hunting through its payload could not.
        """
        detail = self._format.skipped_detail(size, self._max_frame)
        self._report("oversize_frame", ts, offset, size, detail)
        if self._lost is not None:
            self._lost(data, pos, ts)

    def _discard_next(self, size: int) -> None:
        """The next ``size`` bytes finish a frame that is not decoded: drop them."""
        self._discard = size
        self._mode = DISCARDING if size else IN_SYNC

    def _start_hunt(self, offset: int) -> None:
        if self._mode != HUNTING:
            self._mode = HUNTING
            self._skipped = 0
            self._hunt_from = offset

    def _skip(self, at: int, count: int, ts: int) -> None:
        """``count`` bytes from stream offset ``at`` on are skipped by the hunt; the first
        skipped byte starts the hunt's `resync` (a stream may begin hunting: joined
        mid-frame, or its roles just settled)."""
        if self._hunt_from < 0:
            self._hunt_from = at
        self._skipped += count
        self._skip_ts = ts

    def _end_hunt(self, ts: int) -> None:
        """A confirmed boundary: in sync again, the bytes skipped reported as one resync."""
        self._mode = IN_SYNC
        if self._skipped:
            self._report(
                "resync",
                self._skip_ts if self._format.resync_at_last_skip else ts,
                self._hunt_from,
                self._skipped,
                f"skipped {self._skipped} bytes to the next frame boundary",
            )
        self._skipped = 0
        self._hunt_from = -1

    def on_gap(self, ts: int, offset: int, size: int) -> bool:
        """``size`` bytes at ``offset`` are missing from the stream. True when the framing
        knows what that cost (nothing, or one frame it reports lost); False when it lost
        track and hunts again."""
        if self._mode == DISCARDING:
            if size < self._discard:
                self._discard -= size
                return True
            lost_after = size - self._discard
            self._discard_next(0)
            if lost_after:
                self._start_hunt(offset + size)
                return False
            return True
        if not self._chunks or self._mode == HUNTING:
            if self._have and self._hunt_from < 0:
                self._hunt_from = self._start_offset
            self._skipped += self._have
            self._drop_pending()
            self._start_hunt(offset + size)
            return False
        missing = self._need - self._have if self._need else 0
        first = self._chunks[0]
        self._report(
            "truncated_frame",
            ts,
            self._start_offset,
            self._need or self._have,
            f"frame lost: {size} bytes of the stream at offset {offset} were not captured",
        )
        self._drop_pending()
        if missing and size <= missing:
            self._discard_next(missing - size)  # the frame's end is known: stay in step
            if self._lost is not None:
                self._lost(first, 0, ts)
            return True
        self._start_hunt(offset + size)
        return False

    def on_close(self, ts: int) -> None:
        """End of stream: what is still pending can never complete."""
        if self._mode == HUNTING:
            skipped = self._skipped + self._have
            if skipped:
                self._report(
                    "resync",
                    ts,
                    self._hunt_from if self._hunt_from >= 0 else self._start_offset,
                    skipped,
                    f"{skipped} bytes without a frame boundary before the end of the stream",
                )
            self._skipped = 0
        elif self._chunks:
            short = f"{self._need - self._have} bytes" if self._need else "some bytes"
            self._report(
                "truncated_frame",
                ts,
                self._start_offset,
                self._have,
                f"stream ended {short} short of a complete frame",
            )
            if self._lost is not None:
                self._lost(self._chunks[0], 0, ts)
        self._drop_pending()

    def give_up(self) -> None:
        """Memory is short: the incomplete frame is reported lost as a gap would cut it,
        and the rest of it is skipped as it arrives (a hunt's window is skipped)."""
        ts = self._chunk_ts[-1][1]
        after = self._start_offset + self._have
        if self._mode == HUNTING:
            self._skip(self._start_offset, self._have, ts)
        else:
            self._report(
                "truncated_frame",
                ts,
                self._start_offset,
                self._need or self._have,
                f"frame given up after {self._have} bytes: the incomplete frames of all"
                f" connections held more than {self._budget.limit} bytes",
            )
            if self._need:
                self._discard_next(self._need - self._have)
                if self._lost is not None:
                    self._lost(self._chunks[0], 0, ts)
            else:
                self._start_hunt(after)
        self._drop_pending()

    def drop(self) -> None:
        """Forget what is pending, unreported: the stream is replaced by another."""
        self._drop_pending()

    def _drop_pending(self) -> None:
        self._chunks = []
        self._chunk_ts = []
        if self._have:
            self._budget.hold(self, 0)
        self._have = self._need = 0


def _ts_at(chunk_ts: list[tuple[int, int]] | None, pos: int) -> int:
    """Capture time of the pending chunk holding byte ``pos`` of the joined buffer."""
    assert chunk_ts
    end = 0
    for length, ts in chunk_ts:
        end += length
        if pos < end:
            return ts
    return chunk_ts[-1][1]


def _ts_tail(chunk_ts: list[tuple[int, int]], pos: int) -> list[tuple[int, int]]:
    """The (length, ts) list of the joined buffer's bytes from ``pos`` on."""
    out = []
    start = 0
    for length, ts in chunk_ts:
        end = start + length
        if end > pos:
            out.append((end - max(start, pos), ts))
        start = end
    return out
