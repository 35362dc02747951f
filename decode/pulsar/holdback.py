"""Rows held back while a connection's roles are unproven.

Without the SYN, reassembly guesses which end is the client; the first command only one
side may send proves or disproves the guess. Rows decoded before that proof are held here
so that, when the guess was wrong, they leave with the corrected direction like every
later row, instead of contradicting them.
"""

from __future__ import annotations

from collections.abc import Callable

from ..api import Row, RowSink

MAX_HELD = 1_000  # rows held before the capture's guess is taken as it stands
_FLIPPED = {"c2b": "b2c", "b2c": "c2b"}


class HeldRows:
    """Keeps the rows built in its :attr:`sink`, in order, until :meth:`release`."""

    __slots__ = ("_rows", "sink")

    def __init__(self) -> None:
        self._rows: list[tuple[str, Row]] = []  # (table, row)
        self.sink = RowSink.calling(
            self._keeper("frames"), self._keeper("messages"), self._keeper("anomalies")
        )

    def _keeper(self, table: str) -> Callable[[Row], None]:
        def keep(row: Row) -> None:
            self._rows.append((table, row))

        return keep

    def full(self) -> bool:
        return len(self._rows) >= MAX_HELD

    def release(self, sink: RowSink, swapped: bool) -> None:
        """Pass every held row on to ``sink``, directions flipped when ``swapped``."""
        rows, self._rows = self._rows, []
        for table, row in rows:
            if swapped:
                row["direction"] = _FLIPPED[row["direction"]]
            getattr(sink, table).add(row)
