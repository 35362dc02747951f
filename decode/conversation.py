"""What a decoder reports about one connection besides its frames, the same way for
every protocol: its ``anomalies`` rows (counted for the ``connections`` row) and the
responses whose request was not seen.

A response without its request is an anomaly only if the request was never sent. But
reassembly reports a gap only once later bytes arrive, so the verdict waits: until the
request's direction shows bytes captured after the response with no gap before them (the
request was never sent), or the connection ends. A gap in that direction acquits.
"""

from __future__ import annotations

import cython

from ..capture.events import LABELS, Direction
from ..tables.schema import positions
from .api import RowSink

if cython.compiled:  # the row builder's C declarations (columns.pxd)
    from cython.cimports.pwcap.tables.columns import ColumnBuffer
else:
    from ..tables.columns import ColumnBuffer

MAX_SUSPECTS = 10_000  # unmatched responses awaiting proof, kept per connection

_TS, _CAPTURE, _CONN_ID, _DIRECTION, _PROTOCOL, _KIND, _OFFSET, _SIZE, _COMMAND, _DETAIL = (
    positions(
        "anomalies",
        "ts",
        "capture",
        "conn_id",
        "direction",
        "protocol",
        "kind",
        "stream_offset",
        "size",
        "command",
        "detail",
    )
)
# The columns of a frame an anomaly of that frame repeats.
_FRAME_TS, _FRAME_DIRECTION, _FRAME_OFFSET, _FRAME_SIZE, _FRAME_COMMAND = positions(
    "frames", "ts", "direction", "stream_offset", "frame_size", "command"
)
# An anomaly's values: direction label, ts, offset, size, command, kind, detail.
Anomaly = tuple[str | None, int, int | None, int | None, str | None, str, str]


@cython.cclass
class Conversation:
    """One connection's anomalies and unmatched responses (compiled: its fields are C's,
    in ``conversation.pxd``, and a delivery is told of with a C call)."""

    def __init__(
        self, sink: RowSink, capture: str, conn_id: int, protocol: str, unmatched: str
    ) -> None:
        # Where anomaly rows are built (a decoder may hold rows back for a while).
        self.rows = sink.anomalies
        self.anomalies = 0  # rows reported so far
        self._capture = capture
        self._conn_id = conn_id
        self._protocol = protocol
        self._unmatched = unmatched  # the `detail` of an unmatched_response
        # (direction of the missing request, ts of the response, its anomaly)
        self._suspects = []

    # -- anomalies -------------------------------------------------------------------------

    def anomaly(
        self,
        direction: Direction,
        ts: int,
        offset: int | None,
        size: int | None,
        command: str | None,
        kind: str,
        detail: str,
    ) -> None:
        self.report((LABELS[direction], ts, offset, size, command, kind, detail))

    def frame_anomaly(self, kind: str, frame: ColumnBuffer, detail: str) -> None:
        """An anomaly of the frame being built in ``frame``: its direction, time, place
        and command."""
        self.report(self._frame_anomaly(kind, frame, detail))

    def report(self, anomaly: Anomaly) -> None:
        """Its row, built and ended."""
        label, ts, offset, size, command, kind, detail = anomaly
        self.anomalies += 1
        rows = self.rows
        rows.set(_TS, ts)
        rows.set(_CAPTURE, self._capture)
        rows.set(_CONN_ID, self._conn_id)
        rows.set(_DIRECTION, label)
        rows.set(_PROTOCOL, self._protocol)
        rows.set(_KIND, kind)
        rows.set(_OFFSET, offset)
        rows.set(_SIZE, size)
        rows.set(_COMMAND, command)
        rows.set(_DETAIL, detail)
        rows.end_row()

    def _frame_anomaly(self, kind: str, frame: ColumnBuffer, detail: str) -> Anomaly:
        return (
            frame.get(_FRAME_DIRECTION),
            frame.get(_FRAME_TS),
            frame.get(_FRAME_OFFSET),
            frame.get(_FRAME_SIZE),
            frame.get(_FRAME_COMMAND),
            kind,
            detail,
        )

    # -- responses without their request ---------------------------------------------------

    def unmatched(self, frame: ColumnBuffer, request: Direction) -> None:
        """The response being built in ``frame`` matched no request, which ``request``
        would have sent."""
        anomaly = self._frame_anomaly("unmatched_response", frame, self._unmatched)
        suspects = self._suspects
        suspects.append((request, anomaly[1], anomaly))
        if len(suspects) > MAX_SUSPECTS:  # a silent peer: judge the oldest now
            self.report(suspects.pop(0)[2])

    @cython.ccall
    @cython.returns(cython.void)
    def on_data(self, direction: Direction, ts: int) -> None:
        """Bytes of ``direction`` captured at ``ts``: the suspects they prove are reported."""
        if self._suspects:
            self._judge(direction, ts)

    def on_gap(self, direction: Direction) -> None:
        """The requests awaited from ``direction`` may have been in the missing bytes."""
        if self._suspects:
            self._suspects = [s for s in self._suspects if s[0] != direction]

    def on_close(self) -> None:
        """The connection ended: every request still awaited was never sent."""
        self._judge(None, 0)

    def withdraw_oldest(self) -> bool:
        """A request was lost whole (its extent known) and answered the oldest suspect;
        False when there is none."""
        if not self._suspects:
            return False
        self._suspects.pop(0)
        return True

    def _judge(self, direction: Direction | None, ts: int) -> None:
        waiting = []
        for suspect in self._suspects:
            if direction is None or (suspect[0] == direction and ts >= suspect[1]):
                self.report(suspect[2])
            else:
                waiting.append(suspect)
        self._suspects = waiting
