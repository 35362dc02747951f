"""What a decoder reports about one connection besides its frames, the same way for
every protocol: its ``anomalies`` rows (counted for the ``connections`` row) and the
responses whose request was not seen.

A response without its request is an anomaly only if the request was never sent. But
reassembly reports a gap only once later bytes arrive, so the verdict waits: until the
request's direction shows bytes captured after the response with no gap before them (the
request was never sent), or the connection ends. A gap in that direction acquits.
"""

from __future__ import annotations

from pwcap.capture.events import LABELS, Direction
from pwcap.decode.api import Row, RowSink

MAX_SUSPECTS = 10_000  # unmatched responses awaiting proof, kept per connection


class Conversation:
    """One connection's anomalies and unmatched responses."""

    __slots__ = (
        "_capture",
        "_conn_id",
        "_protocol",
        "_suspects",
        "_unmatched",
        "anomalies",
        "sink",
    )

    def __init__(
        self, sink: RowSink, capture: str, conn_id: int, protocol: str, unmatched: str
    ) -> None:
        self.sink = sink  # where anomaly rows go (a decoder may hold rows back for a while)
        self.anomalies = 0  # rows reported so far
        self._capture = capture
        self._conn_id = conn_id
        self._protocol = protocol
        self._unmatched = unmatched  # the `detail` of an unmatched_response
        # (direction of the missing request, ts of the response, its anomaly row)
        self._suspects: list[tuple[Direction, int, Row]] = []

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
        self.report(self._row(LABELS[direction], ts, offset, size, command, kind, detail))

    def frame_anomaly(self, kind: str, row: Row, detail: str) -> None:
        """An anomaly of the frame ``row``: its direction, time, place and command."""
        self.report(self._frame_anomaly_row(kind, row, detail))

    def report(self, anomaly: Row) -> None:
        self.anomalies += 1
        self.sink.anomaly(anomaly)

    def _frame_anomaly_row(self, kind: str, row: Row, detail: str) -> Row:
        return self._row(
            row["direction"],
            row["ts"],
            row["stream_offset"],
            row["frame_size"],
            row["command"],
            kind,
            detail,
        )

    def _row(
        self,
        label: str,
        ts: int,
        offset: int | None,
        size: int | None,
        command: str | None,
        kind: str,
        detail: str,
    ) -> Row:
        return {
            "ts": ts,
            "capture": self._capture,
            "conn_id": self._conn_id,
            "direction": label,
            "protocol": self._protocol,
            "kind": kind,
            "stream_offset": offset,
            "size": size,
            "command": command,
            "detail": detail,
        }

    # -- responses without their request ---------------------------------------------------

    def unmatched(self, row: Row, request: Direction) -> None:
        """The response ``row`` matched no request, which ``request`` would have sent."""
        anomaly = self._frame_anomaly_row("unmatched_response", row, self._unmatched)
        suspects = self._suspects
        suspects.append((request, row["ts"], anomaly))
        if len(suspects) > MAX_SUSPECTS:  # a silent peer: judge the oldest now
            self.report(suspects.pop(0)[2])

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
