"""Cutting one direction's byte stream into Pulsar frames: ``[totalSize][commandSize]...``.

The common case is many small frames inside one capture record: they are parsed straight
out of the record's bytes, no copy. Bytes of a frame that is not complete yet wait in a
list of chunks that is joined once, when the frame is whole, so a frame spread over many
segments costs linear time. After damage (a gap, an impossible header) the stream hunts
for the next plausible frame boundary and only trusts it once the command there decodes.
"""

from __future__ import annotations

import re
import struct
from collections.abc import Callable
from typing import Protocol

from pwcap.decode.api import FrameBudget

HEADER = struct.Struct(">II")
SIZE = struct.Struct(">I")
MIN_COMMAND_SIZE = 2  # a BaseCommand always has its `type` field: one tag byte, one varint
# The longest command checked to tell a frame from garbage (after damage, in sniffing, over
# the frame limit). A check costs the command's length and overlapping fake headers can
# ask for one every few bytes; real commands are a few hundred bytes, and one longer than
# this met after damage is hunted past (the frame after it resynchronises).
MAX_CHECKED_COMMAND = 64 * 1024

# A frame start as every known serializer writes it: totalSize and commandSize below 16 MiB
# (top byte zero) and the command opening with field 1 (`type`, varint) -> tag byte 0x08.
_CANDIDATE = re.compile(rb"\x00...\x00...\x08", re.DOTALL)
_CANDIDATE_LEN = 9


class FrameHandler(Protocol):
    def __call__(
        self,
        buf: bytes,
        start: int,
        end: int,
        command_size: int,
        offset: int,
        ts_first: int,
        ts: int,
    ) -> None:
        """One whole frame: ``buf[start:end]`` (length prefix included)."""


AnomalyReporter = Callable[[str, int, int, int, str], None]  # kind, ts, offset, size, detail
CommandCheck = Callable[[bytes, int, int], bool]  # buf, start, size -> decodes as a command


class FrameStream:
    """Frames of one direction of one connection."""

    __slots__ = (
        "_budget",
        "_chunk_ts",
        "_chunks",
        "_confirm",
        "_discard",
        "_handle",
        "_have",
        "_hunt_from",
        "_hunting",
        "_max_frame",
        "_need",
        "_report",
        "_skipped",
        "_start_offset",
    )

    def __init__(
        self,
        handle: FrameHandler,
        report: AnomalyReporter,
        confirm: CommandCheck,
        max_frame_size: int,
        in_sync: bool,
        budget: FrameBudget | None = None,
    ) -> None:
        self._handle = handle
        self._budget = budget or FrameBudget()  # shared by every stream of a capture
        self._report = report
        self._confirm = confirm
        self._max_frame = max_frame_size
        self._chunks: list[bytes] = []  # bytes of an incomplete frame (or hunt window)
        self._chunk_ts: list[tuple[int, int]] = []  # (length, ts) of each pending chunk
        self._have = 0
        self._need = 0  # pending bytes that complete the frame; 0 while unknown
        self._start_offset = 0  # stream offset of the first pending byte
        self._discard = 0  # bytes still to drop: the rest of a frame lost in a gap
        self._hunting = not in_sync
        self._skipped = 0  # bytes skipped by the current hunt
        self._hunt_from = -1  # stream offset where the current hunt started skipping

    def feed(self, ts: int, offset: int, data: bytes) -> None:
        """Bytes of one capture record, all captured at ``ts``."""
        if self._discard:
            dropped = min(self._discard, len(data))
            self._discard -= dropped
            data = data[dropped:]
            offset += dropped
            if not data:
                return
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
            self._chunks = []
            self._chunk_ts = []
            self._have = self._need = 0
        else:
            chunk_ts = None
        self._parse(data, offset, ts, chunk_ts)
        if self._have != held:
            self._budget.hold(self, self._have)

    def _parse(
        self, data: bytes, offset: int, ts: int, chunk_ts: list[tuple[int, int]] | None
    ) -> None:
        """Hand out every whole frame of ``data``; keep what is left."""
        pos = 0
        n = len(data)
        # Frames that start before this boundary started in an earlier record.
        old = n - chunk_ts[-1][0] if chunk_ts else 0
        handle = self._handle
        max_frame = self._max_frame
        unpack = HEADER.unpack_from
        while True:
            if self._hunting:
                pos = self._hunt(data, pos, offset, ts)
                if self._hunting:
                    break
            if n - pos < 8:
                break
            total, command_size = unpack(data, pos)
            if total > max_frame or command_size < MIN_COMMAND_SIZE or command_size > total - 4:
                if _skippable(total, command_size, max_frame):
                    if n - pos < 8 + command_size:
                        break  # wait for the command that tells a frame from garbage
                    if self._confirm(data, pos + 8, command_size):
                        pos = self._skip_oversize(data, pos, total, offset, ts)
                        continue
                self._bad_header(total, command_size, ts, offset + pos)
                self._skipped += 1
                pos += 1
                continue
            end = pos + 4 + total
            if end > n:
                break
            ts_first = ts if pos >= old else _ts_at(chunk_ts, pos)
            # A frame is whole when its last byte arrived, and not before its first (a
            # reordered or backwards-running capture can time the first bytes later).
            handle(data, pos, end, command_size, offset + pos, ts_first, max(ts, ts_first))
            pos = end
        if pos < n:
            self._keep(data, pos, offset, ts, old, chunk_ts)

    def _keep(
        self,
        data: bytes,
        pos: int,
        offset: int,
        ts: int,
        old: int,
        chunk_ts: list[tuple[int, int]] | None,
    ) -> None:
        """Hold ``data[pos:]``: the start of a frame (or of a hunt candidate)."""
        rest = data[pos:] if pos else data
        self._chunks = [rest]
        self._have = len(rest)
        self._start_offset = offset + pos
        if pos < old and chunk_ts:
            self._chunk_ts = _ts_tail(chunk_ts, pos)
        else:
            self._chunk_ts = [(len(rest), ts)]
        if self._hunting:
            # A hunt keeps bytes only from a candidate on, or a tail too short to be one.
            if len(rest) >= _CANDIDATE_LEN:
                self._need = 8 + HEADER.unpack_from(rest, 0)[1]
            else:
                self._need = 0
        elif len(rest) >= 8:
            total, command_size = HEADER.unpack_from(rest, 0)
            if total <= self._max_frame:
                self._need = 4 + total
            elif _skippable(total, command_size, self._max_frame):
                self._need = 8 + command_size  # enough to confirm, then skip the frame
            else:
                self._need = 0
        elif len(rest) >= 4:
            (total,) = SIZE.unpack_from(rest, 0)
            self._need = 4 + total if total <= self._max_frame else 0
        else:
            self._need = 0

    def _skip_oversize(self, data: bytes, pos: int, total: int, offset: int, ts: int) -> int:
        """Report a sound frame over the size limit and skip it whole; return where it ends.

        Brokers raise their frame limit, so a frame over ours whose command decodes is
        real: stepping over it keeps the stream in sync, where hunting through its
        payload could not.
        """
        self._report(
            "oversize_frame",
            ts,
            offset + pos,
            total + 4,
            f"frame of totalSize {total} over the {self._max_frame}-byte limit skipped",
        )
        end = pos + 4 + total
        if end > len(data):
            self._discard = end - len(data)
            return len(data)
        return end

    def _bad_header(self, total: int, command_size: int, ts: int, offset: int) -> None:
        if total > self._max_frame:
            self._report(
                "oversize_frame",
                ts,
                offset,
                total + 4,
                f"totalSize {total} exceeds the {self._max_frame}-byte frame limit",
            )
        else:
            self._report(
                "bad_frame_header",
                ts,
                offset,
                total + 4,
                f"commandSize {command_size} impossible in a frame of totalSize {total}",
            )
        self._start_hunt(offset)

    def _start_hunt(self, offset: int) -> None:
        if not self._hunting:
            self._hunting = True
            self._skipped = 0
            self._hunt_from = offset

    def _hunt(self, data: bytes, pos: int, offset: int, ts: int) -> int:
        """Skip to the next confirmed frame start at or after ``pos``; return where it is."""
        if self._hunt_from < 0:
            self._hunt_from = offset + pos
        found = find_frame_start(data, pos, self._max_frame, self._confirm)
        if found.confirmed:
            self._skipped += found.pos - pos
            self._hunting = False
            if self._skipped:
                self._report(
                    "resync",
                    ts,
                    self._hunt_from,
                    self._skipped,
                    f"skipped {self._skipped} bytes to the next frame boundary",
                )
            self._skipped = 0
            self._hunt_from = -1
            return found.pos
        # No confirmed boundary yet: drop what cannot start one, keep the rest for later.
        self._skipped += found.pos - pos
        return found.pos

    def on_gap(self, ts: int, offset: int, size: int) -> None:
        """``size`` bytes at ``offset`` are missing from the stream."""
        if self._discard:
            if size < self._discard:
                self._discard -= size
                return
            lost_after = size - self._discard
            self._discard = 0
            if lost_after:
                self._start_hunt(offset + size)
            return
        if not self._chunks:
            self._start_hunt(offset + size)
            return
        if self._hunting:
            self._skipped += self._have
            self._drop_pending()
            return
        missing = self._need - self._have if self._need else 0
        self._report(
            "truncated_frame",
            ts,
            self._start_offset,
            self._need or self._have,
            f"frame lost: {size} bytes of the stream at offset {offset} were not captured",
        )
        self._drop_pending()
        if missing and size < missing:
            self._discard = missing - size
        elif not missing or size > missing:
            self._start_hunt(offset + size)

    def on_close(self, ts: int) -> None:
        """End of stream: what is still pending can never complete."""
        if self._hunting:
            skipped = self._skipped + self._have
            if skipped:
                self._report(
                    "resync",
                    ts,
                    self._hunt_from,
                    skipped,
                    f"{skipped} bytes without a frame boundary before the end of the stream",
                )
        elif self._chunks:
            self._report(
                "truncated_frame",
                ts,
                self._start_offset,
                self._have,
                f"stream ended {self._need - self._have if self._need else 'some'} bytes "
                f"short of a complete frame",
            )
        self._drop_pending()
        self._skipped = 0

    def give_up(self) -> None:
        """Memory is short: the incomplete frame is reported lost as a gap would cut it,
        and the rest of it is skipped as it arrives (a hunt's window is skipped)."""
        ts = self._chunk_ts[-1][1]
        after = self._start_offset + self._have
        if self._hunting:
            self._skipped += self._have
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
            else:
                self._start_hunt(after)
        self._drop_pending()

    def _drop_pending(self) -> None:
        self._chunks = []
        self._chunk_ts = []
        if self._have:
            self._budget.hold(self, 0)
        self._have = self._need = 0


class Candidate:
    """Result of a boundary search: a confirmed frame start, or where to resume looking."""

    __slots__ = ("confirmed", "pos")

    def __init__(self, pos: int, confirmed: bool) -> None:
        self.pos = pos
        self.confirmed = confirmed


def find_frame_start(buf: bytes, pos: int, max_frame_size: int, confirm: CommandCheck) -> Candidate:
    """Find the next plausible frame boundary in ``buf`` at or after ``pos``.

    A boundary is confirmed when its sizes are consistent and its command decodes (checked
    by ``confirm``). When none is, the returned position is the first byte that could still
    begin one once more data arrives; everything before it can be skipped.
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
                return Candidate(start, False)
            if confirm(buf, start + 8, command_size):
                return Candidate(start, True)
        pos = start + 1


def _skippable(total: int, command_size: int, max_frame_size: int) -> bool:
    """An over-limit header whose command is small enough to check before skipping."""
    return MIN_COMMAND_SIZE <= command_size <= min(total - 4, max_frame_size, MAX_CHECKED_COMMAND)


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
