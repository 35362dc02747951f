# cython: annotation_typing=True, initializedcheck=False
# (initializedcheck: the constructor sets every memoryview, before any row.)
"""The fixed-width columns of a table (integers, timestamps, booleans): one 64-bit slot
per row of each column (a block of C ``long long`` when compiled) with a validity byte
beside it, and per column how many rows set it (a column no row set is all nulls, and
its validity bytes need no clearing).

A column's rows are contiguous in both blocks, so a batch's values are copied out to
Arrow as they are (:mod:`.arrow_copy`).
"""

from __future__ import annotations

import cython
import pyarrow as pa

from .arrow_copy import integers

if cython.compiled:
    from cython.cimports.libc.string import memset
    from cython.cimports.pwcap.tables.arrow_copy import flag_bits
else:
    from .arrow_copy import flag_bits


@cython.cclass  # final (slots.pxd): its C methods are called directly, not via a vtable
class SlotColumns:
    """``columns`` fixed-width columns of ``limit`` rows each."""

    def __init__(self, columns: cython.Py_ssize_t, limit: cython.Py_ssize_t) -> None:
        columns = max(1, columns)
        self.limit = limit
        self.data_bytes = bytearray(8 * columns * limit)
        self.valid_bytes = bytearray(columns * limit)
        self.data = memoryview(self.data_bytes).cast("q", (columns, limit))
        self.valid = memoryview(self.valid_bytes).cast("B", (columns, limit))
        self.filled = memoryview(bytearray(8 * columns)).cast("q")

    @cython.cfunc
    @cython.exceptval(check=False)  # raises nothing
    @cython.boundscheck(False)  # the caller's column index and row: checked against the limit
    @cython.wraparound(False)
    def put(
        self, index: cython.Py_ssize_t, at: cython.Py_ssize_t, value: cython.longlong
    ) -> cython.void:
        """Row ``at`` of column ``index`` is ``value``."""
        self.data[index, at] = value
        if not self.valid[index, at]:
            self.valid[index, at] = 1
            self.filled[index] += 1

    @cython.cfunc
    @cython.exceptval(check=False)  # raises nothing
    @cython.boundscheck(False)  # as put
    @cython.wraparound(False)
    def has(self, index: cython.Py_ssize_t, at: cython.Py_ssize_t) -> cython.bint:
        return self.valid[index, at] != 0

    @cython.cfunc
    @cython.exceptval(check=False)  # raises nothing
    @cython.boundscheck(False)  # as put
    @cython.wraparound(False)
    def get(self, index: cython.Py_ssize_t, at: cython.Py_ssize_t) -> cython.longlong:
        """Row ``at``'s value in column ``index`` (0 where null)."""
        return self.data[index, at]

    @cython.cfunc
    @cython.exceptval(check=False)  # raises nothing
    @cython.boundscheck(False)  # as put
    @cython.wraparound(False)
    def clear(self, index: cython.Py_ssize_t, at: cython.Py_ssize_t) -> cython.void:
        """Row ``at`` of column ``index`` (set) is null again."""
        self.valid[index, at] = 0
        self.filled[index] -= 1

    def array(
        self, index: cython.Py_ssize_t, field: pa.Field, count: cython.Py_ssize_t
    ) -> pa.Array:
        """Column ``index``'s first ``count`` rows as an Arrow array (copies, compiled)."""
        kind = field.type
        filled = self.filled[index]
        if not filled:
            return pa.nulls(count, kind)
        start: cython.Py_ssize_t = index * self.limit  # a column's rows: contiguous
        validity = None
        if filled < count:
            validity = flag_bits(self.valid_bytes, start, count, 1)
        if pa.types.is_boolean(kind):  # nonzero: true
            truths = flag_bits(self.data_bytes, start, count, 8)
            return pa.Array.from_buffers(kind, count, [validity, truths])
        return integers(field, count, validity, self.data_bytes, self.valid_bytes, start)

    @cython.cfunc
    @cython.exceptval(-1, check=False)
    def recycle(self, rows: cython.Py_ssize_t) -> cython.int:
        """(Compiled.) Empty, for the next batch (``rows``: how many rows may be set)."""
        i: cython.Py_ssize_t
        for i in range(self.filled.shape[0]):
            if self.filled[i]:
                memset(cython.address(self.valid[i, 0]), 0, rows)
                self.filled[i] = 0
        return 0
