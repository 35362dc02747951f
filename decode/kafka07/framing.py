"""Cutting one direction's byte stream into 0.7 frames: ``[int32 length][length bytes]``.

Whole frames inside one capture record are handed out straight from its bytes; a frame
spread over records waits as a list of chunks joined once it is complete. The length
prefix alone proves little, so after damage (a gap, an impossible length, a frame its
handler rejects) the stream hunts: it skips to the next position that a direction-specific
:class:`BoundaryFinder` confirms (a request or response whose fields fit together) and
reports the bytes skipped as one ``resync`` anomaly. A frame longer than the limit (up to
:data:`MAX_SKIPPED_FRAME`) is stepped over rather than hunted through: in step, its length
is trustworthy, and hunting inside megabytes of message data would be slow and risky.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import NamedTuple, Protocol

from pwcap.decode.api import FrameBudget
from pwcap.decode.kafka07.wire import I32

MIN_LENGTH = 2  # every request has its type, every response its error code


class Candidate(NamedTuple):
    """Result of a boundary search in ``buf`` from some position.

    ``confirmed``: a frame starts at ``pos``. Otherwise nothing before ``pos`` can start
    one, and ``need`` is how many bytes from ``pos`` on must be seen to decide (0: any more).
    """

    pos: int
    confirmed: bool
    need: int = 0


HEAD_BYTES = 6  # length and request type, or length and error code
MAX_SKIPPED_FRAME = 256 * 1024 * 1024  # oversize frames up to this are stepped over, not hunted


class BoundaryFinder(Protocol):
    def __call__(self, buf: bytes, pos: int, max_frame_size: int) -> Candidate: ...


class FrameHandler(Protocol):
    def __call__(
        self, buf: bytes, start: int, end: int, offset: int, ts_first: int, ts: int
    ) -> bool:
        """One whole frame ``buf[start:end]`` (prefix included); False: it does not parse,
        the framing is wrong and must hunt again from the next byte."""


AnomalyReporter = Callable[[str, int, int, int, str], None]  # kind, ts, offset, size, detail
LostFrame = Callable[[bytes, int], None]  # first bytes seen (<= HEAD_BYTES), ts


class FrameStream:
    """Frames of one direction of one connection."""

    __slots__ = (
        "_budget",
        "_chunk_ts",
        "_chunks",
        "_discard",
        "_find",
        "_handle",
        "_have",
        "_hunt_from",
        "_hunting",
        "_lost",
        "_max_frame",
        "_need",
        "_report",
        "_skip_ts",
        "_skipped",
        "_start_offset",
    )

    def __init__(
        self,
        handle: FrameHandler,
        report: AnomalyReporter,
        find: BoundaryFinder,
        max_frame_size: int,
        in_sync: bool,
        lost: LostFrame,
        budget: FrameBudget | None = None,
    ) -> None:
        self._handle = handle
        self._budget = budget or FrameBudget()  # shared by every stream of a capture
        self._lost = lost  # told of each whole frame known lost (oversize, inside a gap)
        self._report = report
        self._find = find
        self._max_frame = max_frame_size
        self._chunks: list[bytes] = []  # bytes of an incomplete frame or hunt candidate
        self._chunk_ts: list[tuple[int, int]] = []  # (length, ts) of each pending chunk
        self._have = 0
        self._need = 0  # pending bytes needed before parsing again; 0 while unknown
        self._start_offset = 0  # stream offset of the first pending byte
        self._discard = 0  # bytes still to drop: the rest of a frame lost in a gap
        self._hunting = not in_sync
        self._skipped = 0  # bytes skipped by the current hunt
        self._skip_ts = 0  # capture time of the last byte it skipped
        self._hunt_from = -1  # stream offset where the current hunt started skipping

    @property
    def in_sync(self) -> bool:
        return not self._hunting

    def feed(self, ts: int, offset: int, data: bytes) -> None:
        """Bytes of one capture record, all captured at ``ts``."""
        if self._discard:
            dropped = min(self._discard, len(data))
            self._discard -= dropped
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
            if self._have < self._need and not self._hunting:
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

    def _parse(
        self, data: bytes, offset: int, ts: int, chunk_ts: list[tuple[int, int]] | None
    ) -> None:
        """Hand out every whole frame of ``data``; keep what is left."""
        pos = 0
        n = len(data)
        old = n - chunk_ts[-1][0] if chunk_ts else 0  # bytes that came in earlier records
        need = 0
        while True:
            if self._hunting:
                found = self._find(data, pos, self._max_frame)
                if found.pos > pos:
                    last = found.pos - 1
                    last_ts = ts if last >= old or not chunk_ts else _ts_at(chunk_ts, last)
                    self._skip(offset + pos, found.pos - pos, last_ts)
                pos = found.pos
                if not found.confirmed:
                    need = found.need
                    break
                self._end_hunt()
            if n - pos < 4:
                break
            (length,) = I32.unpack_from(data, pos)
            end = pos + 4 + length
            if self._max_frame < length <= MAX_SKIPPED_FRAME:
                self._step_over(data, pos, length, offset + pos, ts)
                if end >= n:
                    self._discard = end - n
                    pos = n
                    break
                pos = end
                continue
            if not MIN_LENGTH <= length <= self._max_frame:
                self._bad_length(length, ts, offset + pos)
                self._skip(offset + pos, 1, ts)
                pos += 1
                continue
            if end > n:
                need = 4 + length
                break
            ts_first = ts if pos >= old or chunk_ts is None else _ts_at(chunk_ts, pos)
            # Whole when its last byte arrived, never before its first (see Pulsar's).
            if not self._handle(data, pos, end, offset + pos, ts_first, max(ts, ts_first)):
                self._start_hunt(offset + pos)
                self._skip(offset + pos, 1, ts)
                pos += 1
                continue
            pos = end
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
        rest = data[pos:] if pos else data
        self._chunks = [rest]
        self._have = len(rest)
        self._need = need
        self._start_offset = offset + pos
        if chunk_ts and pos < old:
            self._chunk_ts = _ts_tail(chunk_ts, pos)
        else:
            self._chunk_ts = [(len(rest), ts)]

    def _step_over(self, data: bytes, pos: int, length: int, offset: int, ts: int) -> None:
        """A frame longer than the limit: reported, not decoded, its bytes dropped."""
        self._report(
            "oversize_frame",
            ts,
            offset,
            length + 4,
            f"length {length} exceeds the {self._max_frame}-byte limit: frame skipped",
        )
        self._lost(data[pos : pos + HEAD_BYTES], ts)

    def _bad_length(self, length: int, ts: int, offset: int) -> None:
        if length > self._max_frame:
            kind, detail = "oversize_frame", f"length {length} is beyond any frame"
        else:
            kind, detail = "bad_frame_header", f"length {length} is too short for a frame"
        self._report(kind, ts, offset, max(length, 0) + 4, detail)
        self._start_hunt(offset)

    def _start_hunt(self, offset: int) -> None:
        if not self._hunting:
            self._hunting = True
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

    def _end_hunt(self) -> None:
        self._hunting = False
        if self._skipped:
            self._report(
                "resync",
                self._skip_ts,
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
        if self._discard:
            if size < self._discard:
                self._discard -= size
                return True
            lost_after = size - self._discard
            self._discard = 0
            if lost_after:
                self._start_hunt(offset + size)
                return False
            return True
        if not self._chunks or self._hunting:
            if self._have and self._hunt_from < 0:
                self._hunt_from = self._start_offset
            self._skipped += self._have
            self._drop_pending()
            self._start_hunt(offset + size)
            return False
        missing = self._need - self._have if self._need else 0
        head = self._chunks[0][:HEAD_BYTES]
        self._report(
            "truncated_frame",
            ts,
            self._start_offset,
            self._need or self._have,
            f"frame lost: {size} bytes of the stream at offset {offset} were not captured",
        )
        self._drop_pending()
        if missing and size <= missing:
            self._discard = missing - size  # the frame's end is known: stay in step
            self._lost(head, ts)
            return True
        self._start_hunt(offset + size)
        return False

    def on_close(self, ts: int) -> None:
        """End of stream: what is still pending can never complete."""
        if self._hunting:
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
            self._lost(self._chunks[0][:HEAD_BYTES], ts)
        self._drop_pending()

    def give_up(self) -> None:
        """Memory is short: the incomplete frame is reported lost as a gap would cut it,
        and the rest of it is skipped as it arrives (a hunt's window is skipped)."""
        ts = self._chunk_ts[-1][1]
        after = self._start_offset + self._have
        if self._hunting:
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
                self._discard = self._need - self._have
                self._lost(self._chunks[0][:HEAD_BYTES], ts)
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


def _ts_at(chunk_ts: list[tuple[int, int]], pos: int) -> int:
    """Capture time of the pending chunk holding byte ``pos`` of the joined buffer."""
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
