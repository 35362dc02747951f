# cython: annotation_typing=True
"""Rows counted by their value in one column (a table's command or kind, for the run's
summary), as the row builder ends them.

The first :data:`TALLY_SLOTS` distinct values are counted in C, found by identity:
decoders set a command's name as the same str object every time. More distinct ones are
counted in a dict.
"""

from __future__ import annotations

import cython

TALLY_SLOTS = cython.declare(cython.Py_ssize_t, 16)


@cython.cclass  # final (tally.pxd): its C methods are called directly, not via a vtable
class Tally:
    """Counts per value of a column."""

    def __init__(self) -> None:
        self.values = []
        self.counts = memoryview(bytearray(8 * TALLY_SLOTS)).cast("q")
        self.more = {}

    @cython.cfunc
    @cython.exceptval(-1, check=False)
    @cython.boundscheck(False)  # slot i < len(values) <= TALLY_SLOTS
    @cython.wraparound(False)
    def count(self, value: object) -> cython.int:
        """One row more with ``value`` (None: null)."""
        seen: list = self.values
        i: cython.Py_ssize_t
        for i in range(len(seen)):
            if seen[i] is value:
                self.counts[i] += 1
                return 0
        if len(seen) < TALLY_SLOTS:
            self.counts[len(seen)] = 1
            seen.append(value)
            return 0
        self.more[value] = self.more.get(value, 0) + 1
        return 0

    def counted(self) -> dict[object, int]:
        """Rows counted per value (None: null)."""
        counts: dict[object, int] = dict(self.more)
        for i, value in enumerate(self.values):
            counts[value] = counts.get(value, 0) + self.counts[i]
        return counts
