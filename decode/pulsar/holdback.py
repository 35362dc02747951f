"""Rows held back while a connection's roles are unproven.

Without the SYN, reassembly guesses which end is the client; the first command only one
side may send proves or disproves the guess. Rows decoded before that proof are held here
so that, when the guess was wrong, they leave with the corrected direction like every
later row, instead of contradicting them.
"""

from __future__ import annotations

from pwcap.decode.api import Row, RowSink

MAX_HELD = 1_000  # rows held before the capture's guess is taken as it stands
_FLIPPED = {"c2b": "b2c", "b2c": "c2b"}


class HeldRows:
    """A :class:`RowSink` that keeps rows, in order, until :meth:`release`."""

    __slots__ = ("_rows",)

    def __init__(self) -> None:
        self._rows: list[tuple[str, Row]] = []  # (sink method name, row)

    def frame(self, row: Row) -> None:
        self._rows.append(("frame", row))

    def message(self, row: Row) -> None:
        self._rows.append(("message", row))

    def anomaly(self, row: Row) -> None:
        self._rows.append(("anomaly", row))

    def full(self) -> bool:
        return len(self._rows) >= MAX_HELD

    def release(self, sink: RowSink, swapped: bool) -> None:
        """Pass every held row on to ``sink``, directions flipped when ``swapped``."""
        rows, self._rows = self._rows, []
        for method, row in rows:
            if swapped:
                row["direction"] = _FLIPPED[row["direction"]]
            getattr(sink, method)(row)
