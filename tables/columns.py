# cython: annotation_typing=True, initializedcheck=False
# (initializedcheck: the constructor sets every memoryview of the storage, before any row.)
"""The row builder of one table: rows set column by column, held in the layout Arrow
reads, handed to Arrow as ready-made buffers.

Decoders build their rows here directly (:class:`pwcap.decode.api.RowSink`): a column is
named by its position in its table (:func:`pwcap.tables.schema.position`, resolved once),
its value set with a typed setter (:meth:`ColumnBuffer.set_int`, :meth:`set_text`) or
the generic :meth:`set`, and :meth:`end_row` ends the row. No dict per row, no walk over
its items: a value goes straight to where its column keeps it, as the row is built:

- integers, timestamps and booleans into one 64-bit slot per row of their column (a
  block of C ``long long`` when compiled), with a validity byte beside it;
- strings and binaries as their bytes, appended to the column's data, with the end
  offset of each row beside them (Arrow's offsets buffer, filled as rows arrive);
- a map of strings (message properties) as its keys' and values' bytes end to end,
  with their end offsets and each row's (copied from the bytes a reader found them in:
  :meth:`ColumnBuffer.set_pairs`);
- a list of integer structs (message ids) as a 64-bit slot per element and field, with
  validity bytes and each row's end (:meth:`ColumnBuffer.add_struct`).

A batch then becomes Arrow arrays without a conversion per value (compiled: a copy of
each column's bytes made in C, the storage kept for the next batch; interpreted: views
of it), and a column no row set costs nothing per row, which suits tables of 40-odd
columns of which a row sets a dozen. Rows that are rare (connections, most anomalies)
may come whole as a dict (:meth:`add`); the row being built can be read back
(:meth:`get`) and taken out as a dict (:meth:`take_row`) for the decoders' few uses of
that.
"""

from __future__ import annotations

import struct
import sys
from collections.abc import Callable
from typing import Any

import cython
import pyarrow as pa

from .schema import Row, arrow_schema
from .schema import position as schema_position

if cython.compiled:  # a text value is copied to its column's bytes with memcpy
    from cython.cimports.cpython.bytearray import PyByteArray_AS_STRING, PyByteArray_Resize
    from cython.cimports.cpython.bytes import PyBytes_AS_STRING, PyBytes_FromStringAndSize
    from cython.cimports.cpython.unicode import PyUnicode_AsUTF8AndSize, PyUnicode_DecodeUTF8
    from cython.cimports.libc.string import memcpy, memset

# How a column keeps its values: the low two bits of its place (the rest: its index
# among the columns kept that way).
# (C constants when compiled: a Python object here would be looked up and compared as one
# for every value set.)
SLOT = cython.declare(cython.Py_ssize_t, 0)
STRING = cython.declare(cython.Py_ssize_t, 1)
BINARY = cython.declare(cython.Py_ssize_t, 2)
NESTED = cython.declare(cython.Py_ssize_t, 3)
MAX_OFFSET = cython.declare(cython.Py_ssize_t, 0x7FFFFFFF)  # Arrow's offsets are int32
INT32_MIN = cython.declare(cython.longlong, -0x80000000)
INT32_MAX = cython.declare(cython.longlong, 0x7FFFFFFF)
# A text column's bytes kept for the next batch, at most (compiled, storage is reused:
# larger ones, kept payloads, are let go rather than held between batches).
KEPT_TEXT_BYTES = cython.declare(cython.Py_ssize_t, 1 << 20)
# Values of the tallied column counted in C (by identity: decoders set a command's name
# as the same str object every time); more distinct ones are counted in a dict.
TALLY_SLOTS = cython.declare(cython.Py_ssize_t, 16)
# A list of structs kept in Arrow's layout has at most this many (integer) fields.
MAX_STRUCT_FIELDS = 4
# A map entry's span (add_span): its key's start and stop, its value's, as native int32.
_SPAN = struct.Struct("=4i")
SPAN_BYTES = cython.declare(cython.Py_ssize_t, _SPAN.size)
_TEXT_TYPES = (bytes, bytearray, memoryview)


def _storage(kind: pa.DataType) -> int:
    if pa.types.is_boolean(kind) or pa.types.is_integer(kind) or pa.types.is_timestamp(kind):
        return SLOT
    if kind == pa.string():
        return STRING
    if kind == pa.binary():
        return BINARY
    return NESTED


@cython.cclass  # final (columns.pxd): its C methods are called directly, not via a vtable
class ColumnBuffer:
    """The pending rows of one table, and the row being built.

    ``on_full`` (the owner's conversion: it takes the batch) is called by the
    :meth:`end_row` that completes a batch's worth: ``limit`` rows, or fewer once their
    string and binary values add up to ``byte_limit`` (0 for none), so large values (kept
    payloads, long names) cannot pile up in memory.
    """

    def __init__(
        self,
        schema: pa.Schema,
        limit: int,
        byte_limit: int = 0,
        on_full: Callable[[], None] | None = None,
    ) -> None:
        self.schema = schema
        self._limit = max(1, limit)
        self._byte_limit = byte_limit
        self._on_full = on_full
        self._names = {sys.intern(field.name): at for at, field in enumerate(schema)}
        self._columns = [field.name for field in schema]
        self._booleans = frozenset(
            at for at, field in enumerate(schema) if pa.types.is_boolean(field.type)
        )
        by_storage: list[list[int]] = [[], [], [], []]
        for position, field in enumerate(schema):
            by_storage[_storage(field.type)].append(position)
        self._strings = len(by_storage[STRING])
        # Strings and binaries share one index space: text index = place >> 2 for both.
        texts = by_storage[STRING] + by_storage[BINARY]
        self._positions = [by_storage[SLOT], texts, by_storage[NESTED]]
        self._place = memoryview(bytearray(8 * len(schema))).cast("q")
        for storage, positions in ((SLOT, by_storage[SLOT]), (NESTED, by_storage[NESTED])):
            for index, position in enumerate(positions):
                self._place[position] = index << 2 | storage
        for index, position in enumerate(texts):
            self._place[position] = index << 2 | (STRING if index < self._strings else BINARY)
        self._tallied_column = -1
        self._tally_value = None
        self._tally_values = []
        self._tally_counts = memoryview(bytearray(8 * TALLY_SLOTS)).cast("q")
        self._tally_more = {}
        self._reset()

    def _reset(self) -> None:
        """Empty the buffer, with fresh storage for a batch: the Arrow arrays of the last
        one may still be using the old."""
        capacity = self._limit
        slots = max(1, len(self._positions[0]))
        texts = max(1, len(self._positions[1]))
        self._data_bytes = bytearray(8 * slots * capacity)
        self._valid_bytes = bytearray(slots * capacity)
        self._data = memoryview(self._data_bytes).cast("q", (slots, capacity))
        self._valid = memoryview(self._valid_bytes).cast("B", (slots, capacity))
        self._set = memoryview(bytearray(8 * slots)).cast("q")
        self._text = [bytearray() for _ in range(texts)]
        self._ends_bytes = bytearray(4 * texts * (capacity + 1))
        self._ends = memoryview(self._ends_bytes).cast("i", (texts, capacity + 1))
        self._recorded = memoryview(bytearray(8 * texts)).cast("q")
        self._text_valid_bytes = bytearray(texts * capacity)
        self._text_valid = memoryview(self._text_valid_bytes).cast("B", (texts, capacity))
        self._text_set = memoryview(bytearray(8 * texts)).cast("q")
        self._lists = [_list_storage(self.schema.field(p), capacity) for p in self._positions[2]]
        self.count = 0
        self.held_bytes = 0

    def __len__(self) -> int:
        return self.count

    # -- the row being built ---------------------------------------------------------------

    @cython.cfunc
    @cython.exceptval(-1, check=True)
    def _index(self, column: cython.Py_ssize_t, storage: cython.Py_ssize_t) -> cython.Py_ssize_t:
        """Where column ``column`` keeps its values, checked to be kept as ``storage``
        (text: either kind) in a buffer with room for the row."""
        code: cython.Py_ssize_t = self._place[column]
        kept: cython.Py_ssize_t = code & 3
        if kept != storage and not (storage == STRING and kept == BINARY):
            raise TypeError(f"{self._columns[column]}: not a column of that type")
        if self.count >= self._limit:
            raise OverflowError("a full ColumnBuffer takes no row before take_batch()")
        return code >> 2

    @cython.ccall
    @cython.exceptval(-1, check=False)  # an error is -1: no PyErr_Occurred() after each call
    def set_int(self, column: cython.Py_ssize_t, value: cython.longlong) -> cython.int:
        """An integer, timestamp (microseconds) or boolean (0 or 1) column's value.
        (The setters return 0, compiled; -1 is a raised error.)"""
        self._put_slot(self._index(column, SLOT), value)
        return 0

    @cython.ccall
    @cython.exceptval(-1, check=False)  # an error is -1: no PyErr_Occurred() after each call
    def set_text(self, column: cython.Py_ssize_t, value: str) -> cython.int:
        """A string column's value."""
        return self._add_text(self._index(column, STRING), column, value)

    @cython.ccall
    @cython.exceptval(-1, check=False)  # an error is -1: no PyErr_Occurred() after each call
    def set(self, column: cython.Py_ssize_t, value: object) -> cython.int:
        """Any column's value, of any type its column takes; None makes it null again."""
        code: cython.Py_ssize_t = self._place[column]
        storage: cython.Py_ssize_t = code & 3
        if value is None:
            return self._clear(code)
        if storage == SLOT:
            self._put_slot(self._index(column, SLOT), value)
            return 0
        if storage == NESTED:
            self._index(column, NESTED)
            self._clear(code)
            return self._put_list(self._lists[code >> 2], column, value)
        return self._add_text(self._index(column, STRING), column, value)

    @cython.ccall
    @cython.exceptval(-1, check=False)  # an error is -1: no PyErr_Occurred() after each call
    def set_pairs(self, column: cython.Py_ssize_t, data: bytes, spans: bytearray) -> cython.int:
        """A map<string, string> column's value: an entry per span of ``spans`` (see
        :func:`add_span`), its key and value ``data``'s bytes there, which the caller has
        made sure are UTF-8 (a reader that checked them as it read: no str made)."""
        textmap: _TextMap = self._storage(column, _TextMap, "a map of strings to strings")
        if len(spans) % SPAN_BYTES:
            raise ValueError(f"spans of {len(spans)} bytes: not whole spans")
        self._clear(self._place[column])
        before: cython.Py_ssize_t = textmap.held()
        at: cython.Py_ssize_t = self.count
        textmap.begin(at)
        i: cython.Py_ssize_t
        try:
            for i in range(0, len(spans) // 4, 4):
                textmap.add(
                    at,
                    data,
                    _integer_at(spans, i, 4),
                    _integer_at(spans, i + 1, 4),
                    data,
                    _integer_at(spans, i + 2, 4),
                    _integer_at(spans, i + 3, 4),
                )
        except BaseException:  # a span beyond the data: the row keeps none of them
            textmap.clear(at)
            raise
        self.held_bytes += textmap.held() - before
        return 0

    @cython.ccall
    @cython.exceptval(-1, check=False)  # an error is -1: no PyErr_Occurred() after each call
    def add_struct(
        self,
        column: cython.Py_ssize_t,
        first: cython.longlong,
        second: cython.longlong,
        third: cython.longlong,
        fourth: cython.longlong,
        nulls: cython.int,
    ) -> cython.int:
        """One more element of a list<struct> column of integer fields (message ids) in
        the row being built (its list begins with the first): the fields' values in
        order, bit n of ``nulls`` set where field n is null (values past its fields are
        ignored)."""
        structs: _IntStructs = self._storage(column, _IntStructs, "a list of integer structs")
        at: cython.Py_ssize_t = self.count
        if not structs.has(at):
            structs.begin(at)
        return structs.add(at, first, second, third, fourth, nulls)

    @cython.cfunc
    def _storage(self, column: cython.Py_ssize_t, kind: type, what: str) -> _ListRows:
        """The storage of nested column ``column``, checked to be a ``kind``, in a buffer
        with room for the row."""
        self._index(column, NESTED)
        kept: _ListRows = self._lists[self._place[column] >> 2]
        if not isinstance(kept, kind):
            raise TypeError(f"{self._columns[column]}: not {what}")
        return kept

    @cython.cfunc
    @cython.exceptval(-1, check=False)
    def _put_list(self, kept: _ListRows, column: cython.Py_ssize_t, value: object) -> cython.int:
        """A nested column's value as :meth:`set` takes it. For a map: (key, value) pairs
        or a dict (values: str, or UTF-8 bytes; a value may be None, a key may not); for a
        list of structs: dicts by field name (a field left out is null) or None. A value of
        another shape is refused whole: the row keeps no part of it."""
        name: str = self._columns[column]
        before: cython.Py_ssize_t = kept.held()
        at: cython.Py_ssize_t = self.count
        kept.begin(at)
        try:
            kept.put(at, value, name)
        except BaseException:
            kept.clear(at)
            raise
        self.held_bytes += kept.held() - before
        return 0

    @cython.ccall
    def has(self, column: cython.Py_ssize_t) -> cython.bint:
        """Whether the row being built has a value in ``column``."""
        return self._has(self._place[column], self.count)

    @cython.ccall
    def get(self, column: cython.Py_ssize_t) -> object:
        """The value the row being built has in ``column`` (None: null), as :meth:`set`
        takes it (a string column's as str, a binary column's as bytes)."""
        return self._value(column, self.count)

    @cython.ccall
    @cython.exceptval(-1, check=False)  # an error is -1: no PyErr_Occurred() after each call
    def copy(
        self, source: ColumnBuffer, source_column: cython.Py_ssize_t, column: cython.Py_ssize_t
    ) -> cython.int:
        """Set ``column`` to the value ``source``'s row being built has in
        ``source_column`` (a column kept the same way): a frame's columns repeated on its
        messages' rows are copied as they are kept, text without a str made."""
        code: cython.Py_ssize_t = source._place[source_column]
        storage: cython.Py_ssize_t = code & 3
        at: cython.Py_ssize_t = source.count
        index: cython.Py_ssize_t = code >> 2
        if not source._has(code, at):
            return self._clear(self._place[column])
        if storage == SLOT:
            self._put_slot(self._index(column, SLOT), source._data[index, at])
            return 0
        if storage == NESTED:
            return self.set(column, source._value(source_column, at))
        start: cython.Py_ssize_t = source._ends[index, at]
        stop: cython.Py_ssize_t = source._ends[index, at + 1]
        data: bytearray = source._text[index]
        own: cython.Py_ssize_t = self._index(column, storage)
        if cython.compiled:
            value: cython.p_const_char = PyByteArray_AS_STRING(data) + start
            return self._append(own, column, value, stop - start, None)
        else:
            return self._append(own, column, None, stop - start, bytes(data[start:stop]))

    @cython.ccall
    @cython.exceptval(-1, check=False)  # an error is -1: no PyErr_Occurred() after each call
    def copy_columns(self, source: ColumnBuffer, pairs: cython.longlong[:, ::1]) -> cython.int:
        """:meth:`copy` for each (source column, column) of ``pairs`` (see :func:`pairs`)."""
        i: cython.Py_ssize_t
        for i in range(pairs.shape[0]):
            self.copy(source, pairs[i, 0], pairs[i, 1])
        return 0

    @cython.ccall
    @cython.exceptval(-1, check=True)
    def end_row(self) -> cython.bint:
        """The row being built is complete; True when it completed a batch's worth (the
        ``on_full`` given, if any, has then been called)."""
        if self.count >= self._limit:
            raise OverflowError("a full ColumnBuffer takes no row before take_batch()")
        if self._tallied_column >= 0:
            self._count_tallied()
        self.count += 1
        full: cython.bint = self.count >= self._limit
        if self._byte_limit and self.held_bytes >= self._byte_limit:
            full = True
        if full and self._on_full is not None:
            self._on_full()
        return full

    @cython.ccall
    @cython.exceptval(-1, check=False)  # an error is -1: no PyErr_Occurred() after each call
    def discard_row(self) -> cython.int:
        """Forget the row being built (a frame that turned out damaged midway)."""
        if self.count >= self._limit:
            return 0
        position: cython.Py_ssize_t
        for position in range(len(self._columns)):
            self._clear(self._place[position])
        return 0

    @cython.ccall
    def take_row(self) -> dict:
        """The row being built, as a dict of every column (None: null); then forgotten."""
        row: dict = self._row(self.count) if self.count < self._limit else {}
        self.discard_row()
        return row

    @cython.ccall
    @cython.exceptval(-1, check=True)
    def add(self, row: dict) -> cython.bint:
        """A whole row given as a dict keyed by column name (rare rows: a column it lacks
        is null, a key the schema lacks is ignored); as :meth:`end_row`."""
        for key, value in row.items():
            if value is not None:
                position = self._names.get(key)
                if position is not None:
                    self.set(position, value)
        return self.end_row()

    def take_rows(self) -> list[dict]:
        """The complete rows held, as dicts of every column (None: null); then empty."""
        rows = [self._row(at) for at in range(self.count)]
        self._recycle()
        return rows

    # -- the tallied column ----------------------------------------------------------------

    def tally(self, column: cython.Py_ssize_t) -> None:
        """Count the rows ended from now on by their value in ``column`` (a table's
        command or kind, for the run's summary): :meth:`tallied` says how many of each."""
        self._place[column]  # an IndexError for a column the table lacks
        self._tallied_column = column
        self._tally_value = None

    def tallied(self) -> dict[object, int]:
        """Rows ended since :meth:`tally` per value of the tallied column (None: null)."""
        counts: dict[object, int] = dict(self._tally_more)
        for i, value in enumerate(self._tally_values):
            counts[value] = counts.get(value, 0) + self._tally_counts[i]
        return counts

    @cython.cfunc
    @cython.exceptval(-1, check=False)
    @cython.boundscheck(False)  # slot i < len(_tally_values) <= TALLY_SLOTS
    @cython.wraparound(False)
    def _count_tallied(self) -> cython.int:
        """Count the row being ended. Its value is the str last set in the column, or,
        when it came another way (copied, not text), read back."""
        value = self._tally_value
        self._tally_value = None
        if value is None:
            value = self._value(self._tallied_column, self.count)
        seen: list = self._tally_values
        i: cython.Py_ssize_t
        for i in range(len(seen)):
            if seen[i] is value:
                self._tally_counts[i] += 1
                return 0
        if len(seen) < TALLY_SLOTS:
            self._tally_counts[len(seen)] = 1
            seen.append(value)
            return 0
        self._tally_more[value] = self._tally_more.get(value, 0) + 1
        return 0

    # -- storage ---------------------------------------------------------------------------

    @cython.cfunc
    @cython.exceptval(check=False)  # raises nothing
    @cython.boundscheck(False)  # a slot's index from _index; the row: below the limit
    @cython.wraparound(False)
    def _put_slot(self, index: cython.Py_ssize_t, value: cython.longlong) -> cython.void:
        at: cython.Py_ssize_t = self.count
        self._data[index, at] = value
        if not self._valid[index, at]:
            self._valid[index, at] = 1
            self._set[index] += 1

    @cython.cfunc
    @cython.boundscheck(False)  # an index from a place; the row: below the limit
    @cython.wraparound(False)
    def _has(self, code: cython.Py_ssize_t, at: cython.Py_ssize_t) -> cython.bint:
        storage: cython.Py_ssize_t = code & 3
        index: cython.Py_ssize_t = code >> 2
        if at >= self._limit:
            return False
        if storage == SLOT:
            return self._valid[index, at] != 0
        if storage == NESTED:
            return cython.cast(_ListRows, self._lists[index]).has(at)
        return self._text_valid[index, at] != 0

    @cython.cfunc
    @cython.exceptval(-1, check=False)
    @cython.boundscheck(False)  # as _has
    @cython.wraparound(False)
    def _clear(self, code: cython.Py_ssize_t) -> cython.int:
        """Make the row being built null in the column of place ``code``."""
        at: cython.Py_ssize_t = self.count
        if not self._has(code, at):
            return 0
        if self._tallied_column >= 0 and code == self._place[self._tallied_column]:
            self._tally_value = None
        storage: cython.Py_ssize_t = code & 3
        index: cython.Py_ssize_t = code >> 2
        if storage == SLOT:
            self._valid[index, at] = 0
            self._set[index] -= 1
        elif storage == NESTED:
            kept: _ListRows = self._lists[index]
            held: cython.Py_ssize_t = kept.held()
            kept.clear(at)
            self.held_bytes -= held - kept.held()
        else:  # its end goes back to where the row's value began
            start: cython.Py_ssize_t = self._ends[index, at]
            self.held_bytes -= self._ends[index, at + 1] - start
            self._recorded[index] = at
            self._text_valid[index, at] = 0
            self._text_set[index] -= 1
            if not cython.compiled:  # interpreted, a column's bytes end where its values do
                del cython.cast(bytearray, self._text[index])[start:]
        return 0

    @cython.cfunc
    def _value(self, position: cython.Py_ssize_t, at: cython.Py_ssize_t) -> object:
        """Row ``at``'s value in column ``position`` (None: null)."""
        code: cython.Py_ssize_t = self._place[position]
        if not self._has(code, at):
            return None
        storage: cython.Py_ssize_t = code & 3
        index: cython.Py_ssize_t = code >> 2
        if storage == SLOT:
            value = self._data[index, at]
            return bool(value) if position in self._booleans else value
        if storage == NESTED:
            return cython.cast(_ListRows, self._lists[index]).value(at)
        data: bytearray = self._text[index]
        start: cython.Py_ssize_t = self._ends[index, at]
        size: cython.Py_ssize_t = self._ends[index, at + 1] - start
        if not cython.compiled:
            value = bytes(data[start : start + size])
            return value.decode() if storage == STRING else value
        if start < 0 or size < 0 or start + size > len(data):
            raise IndexError(f"text {start}:{start + size} beyond the {len(data)} bytes kept")
        source: cython.p_const_char = PyByteArray_AS_STRING(data) + start  # made from it at once
        if storage == STRING:
            return PyUnicode_DecodeUTF8(source, size, cython.NULL)
        return PyBytes_FromStringAndSize(source, size)

    def _row(self, at: cython.Py_ssize_t) -> dict:
        """Row ``at`` as a dict of every column (None: null), as the table will hold it."""
        return {name: self._value(position, at) for position, name in enumerate(self._columns)}

    @cython.cfunc
    @cython.exceptval(-1, check=False)
    def _add_text(
        self, index: cython.Py_ssize_t, column: cython.Py_ssize_t, value: object
    ) -> cython.int:
        """Set a string or binary value (str for a string column: its UTF-8)."""
        size: cython.Py_ssize_t = 0
        encoded: bytes = None
        if cython.compiled:  # a str's UTF-8 is read where the str keeps it: no bytes made
            source: cython.p_const_char
            if type(value) is str:
                source = PyUnicode_AsUTF8AndSize(value, cython.address(size))
            else:
                encoded = _encoded(value, index < self._strings, self._columns[column])
                source = PyBytes_AS_STRING(encoded)
                size = len(encoded)
            self._append(index, column, source, size, encoded)
        else:
            encoded = _encoded(value, index < self._strings, self._columns[column])
            self._append(index, column, None, len(encoded), encoded)
        if column == self._tallied_column and type(value) is str:
            self._tally_value = value
        return 0

    @cython.cfunc
    @cython.exceptval(-1, check=False)
    @cython.boundscheck(False)  # a text column's index, the row below the limit (_index)
    @cython.wraparound(False)
    def _append(
        self,
        index: cython.Py_ssize_t,
        column: cython.Py_ssize_t,
        source: cython.p_const_char,
        size: cython.Py_ssize_t,
        encoded: object,
    ) -> cython.int:
        """Append one value's ``size`` bytes (compiled: at ``source``; interpreted:
        ``encoded``) as the row's value, replacing one it had; the rows since the
        column's last value are null (their end offsets stay where it ended).

        Compiled, a column's bytearray grows by doubling and only its first ``end`` bytes
        are values (the rest is room for more): resizing it for every value cost more
        than copying the value."""
        at: cython.Py_ssize_t = self.count
        if column == self._tallied_column:  # the str _add_text sets is the value, if any
            self._tally_value = None
        if self._recorded[index] == at + 1:  # the row has a value already: it goes
            self._clear(index << 2 | STRING)
        data: bytearray = self._text[index]
        end: cython.Py_ssize_t = self._end_nulls(index, at) + size
        if end > MAX_OFFSET:
            raise OverflowError(f"{self._columns[column]}: over 2 GiB of values in one batch")
        if cython.compiled:  # what `data += encoded` does, without its buffer protocol
            if end > len(data):
                PyByteArray_Resize(data, max(end, min(2 * len(data), MAX_OFFSET)))
            memcpy(PyByteArray_AS_STRING(data) + end - size, source, size)
        else:
            data += encoded
        self._ends[index, at + 1] = end
        self._recorded[index] = at + 1
        self._text_valid[index, at] = 1
        self._text_set[index] += 1
        self.held_bytes += size
        return 0

    @cython.cfunc
    @cython.boundscheck(False)  # a text column's index; rows up to the limit: its ends' width
    @cython.wraparound(False)
    @cython.exceptval(-1, check=True)
    def _end_nulls(self, index: cython.Py_ssize_t, upto: cython.Py_ssize_t) -> cython.Py_ssize_t:
        """Record the end offset of text column ``index``'s rows before row ``upto`` that
        set no value: where its values end now (a null takes no bytes), returned."""
        recorded: cython.Py_ssize_t = self._recorded[index]
        end: cython.Py_ssize_t = self._ends[index, recorded]
        while recorded < upto:
            recorded += 1
            self._ends[index, recorded] = end
        self._recorded[index] = recorded
        return end

    def take_batch(self) -> pa.RecordBatch | None:
        """The held rows as one record batch (None when there are none), then empty."""
        count = self.count
        if not count:
            return None
        arrays: list[Any] = [None] * len(self.schema)
        slots, texts, nested = self._positions
        for slot, position in enumerate(slots):
            arrays[position] = self._slot_array(slot, self.schema.field(position))
        for index, position in enumerate(texts):
            arrays[position] = self._text_array(index, self.schema.field(position).type)
        for index, position in enumerate(nested):
            arrays[position] = self._nested_array(index, self.schema.field(position).type)
        self._recycle()
        return pa.RecordBatch.from_arrays(arrays, schema=self.schema)

    def _recycle(self) -> None:
        """Empty the buffer after its rows became Arrow arrays.

        Compiled, the arrays hold copies (made in C) and the storage is kept: fresh storage
        for every batch cost more, in zero-filled pages the kernel faults in, than copying
        what the batch holds. Interpreted, the arrays are views of the storage: it is new.
        """
        if not cython.compiled:
            self._reset()
            return
        rows: cython.Py_ssize_t = min(self.count + 1, self._limit)  # a row being built too
        i: cython.Py_ssize_t
        for i in range(len(self._positions[0])):
            if self._set[i]:
                memset(cython.address(self._valid[i, 0]), 0, rows)
                self._set[i] = 0
        for i in range(len(self._text)):
            if self._text_set[i]:
                memset(cython.address(self._text_valid[i, 0]), 0, rows)
                self._text_set[i] = 0
            self._recorded[i] = 0
            if len(cython.cast(bytearray, self._text[i])) > KEPT_TEXT_BYTES:
                self._text[i] = bytearray()
        for kept in self._lists:
            cython.cast(_ListRows, kept).recycle(rows)
        self.count = 0
        self.held_bytes = 0

    def _slot_array(self, slot: cython.Py_ssize_t, field: pa.Field) -> pa.Array:
        count: cython.Py_ssize_t = self.count
        kind = field.type
        filled = self._set[slot]
        if not filled:
            return pa.nulls(count, kind)
        start: cython.Py_ssize_t = slot * self._limit  # a slot's rows (values, flags): contiguous
        validity = None
        if filled < count:
            validity = _flag_bits(self._valid_bytes, start, count)
        if pa.types.is_boolean(kind):  # nonzero: true
            truths = _flag_bits(self._data_bytes, start, count, 8)
            return pa.Array.from_buffers(kind, count, [validity, truths])
        return _integers(field, count, validity, self._data_bytes, self._valid_bytes, start)

    def _text_array(self, index: cython.Py_ssize_t, kind: pa.DataType) -> pa.Array:
        count: cython.Py_ssize_t = self.count
        filled: cython.Py_ssize_t = self._text_set[index]
        if not filled:
            return pa.nulls(count, kind)
        data: bytearray = self._text[index]
        end: cython.Py_ssize_t = self._end_nulls(index, count)  # nulls after its last value
        validity = None
        if filled < count:
            validity = _flag_bits(self._text_valid_bytes, index * self._limit, count)
        if cython.compiled:
            values = _copy(data, end)
            offsets = pa.allocate_buffer(4 * (count + 1))
            memcpy(_address(offsets), cython.address(self._ends[index, 0]), 4 * (count + 1))
        else:
            del data[end:]
            width = 4 * (self._limit + 1)
            offsets = pa.py_buffer(memoryview(self._ends_bytes)[index * width :][: 4 * (count + 1)])
            values = pa.py_buffer(data)
        return pa.Array.from_buffers(kind, count, [validity, offsets, values])

    def _nested_array(self, index: int, kind: pa.DataType) -> pa.Array:
        kept: _ListRows = self._lists[index]
        return kept.array(self.count, kind) if kept.filled else pa.nulls(self.count, kind)


def pairs(source: str, table: str, columns: tuple[str, ...]) -> memoryview:
    """(position in table ``source``, position in ``table``) of each of ``columns``, for
    :meth:`ColumnBuffer.copy_columns`: the columns a row repeats from another table's."""
    found = memoryview(bytearray(16 * len(columns))).cast("q", (len(columns), 2))
    for i, column in enumerate(columns):
        found[i, 0] = schema_position(source, column)
        found[i, 1] = schema_position(table, column)
    return found


class RowSink:
    """Where decoders put rows: the row builder of each table they fill. Its owner (the
    dataset writer, a Spark task) gives each builder the ``on_full`` that takes its
    batches; :meth:`calling` makes one that hands rows on one by one."""

    __slots__ = ("anomalies", "frames", "messages")

    def __init__(
        self, frames: ColumnBuffer, messages: ColumnBuffer, anomalies: ColumnBuffer
    ) -> None:
        self.frames = frames
        self.messages = messages
        self.anomalies = anomalies

    @classmethod
    def calling(
        cls,
        frame: Callable[[Row], None],
        message: Callable[[Row], None],
        anomaly: Callable[[Row], None],
    ) -> RowSink:
        """A sink whose rows, each as a dict once ended, go to the callable of their table
        (``pwcap show`` prints frames as they are decoded; rows held back wait in a list)."""
        return cls(
            _OneByOne("frames", frame).buffer,
            _OneByOne("messages", message).buffer,
            _OneByOne("anomalies", anomaly).buffer,
        )


class _OneByOne:
    """A builder of one row at a time, each handed on as a dict when it ends."""

    __slots__ = ("_each", "buffer")

    def __init__(self, table: str, each: Callable[[Row], None]) -> None:
        self._each = each
        self.buffer = ColumnBuffer(arrow_schema(table), 1, 0, self._ended)

    def _ended(self) -> None:
        for row in self.buffer.take_rows():
            self._each(row)


@cython.ccall
@cython.exceptval(-1, check=False)
def add_span(
    spans: bytearray,
    key_start: cython.Py_ssize_t,
    key_stop: cython.Py_ssize_t,
    value_start: cython.Py_ssize_t,
    value_stop: cython.Py_ssize_t,
) -> cython.int:
    """Append one map entry's span to ``spans``, for :meth:`ColumnBuffer.set_pairs`: where
    its key and its value are in the data that will be given with them (four int32)."""
    if len(spans) % SPAN_BYTES:
        raise ValueError(f"spans of {len(spans)} bytes: not whole spans")
    key_fits: cython.bint = 0 <= key_start <= key_stop <= MAX_OFFSET
    if not key_fits or not 0 <= value_start <= value_stop <= MAX_OFFSET:
        raise OverflowError(f"{key_start}:{key_stop}, {value_start}:{value_stop}: not int32 spans")
    size: cython.Py_ssize_t = len(spans)
    if not cython.compiled:
        spans += _SPAN.pack(key_start, key_stop, value_start, value_stop)
        return 0
    PyByteArray_Resize(spans, size + SPAN_BYTES)
    out: cython.p_int = cython.cast(cython.p_int, PyByteArray_AS_STRING(spans) + size)
    out[0] = key_start
    out[1] = key_stop
    out[2] = value_start
    out[3] = value_stop
    return 0


def _list_storage(column: pa.Field, limit: cython.Py_ssize_t) -> _ListRows:
    """The storage of a nested column, in Arrow's layout: a map of strings to strings
    (properties), or a list of structs of up to four integer fields (message ids), the
    nested shapes of the tables; any other is refused."""
    kind = column.type
    if pa.types.is_map(kind) and kind.key_type == pa.string() and kind.item_type == pa.string():
        return _TextMap(limit)
    if pa.types.is_list(kind) and pa.types.is_struct(kind.value_type):
        fields = list(kind.value_type)
        if 0 < len(fields) <= MAX_STRUCT_FIELDS and all(
            pa.types.is_integer(field.type) for field in fields
        ):
            return _IntStructs(limit, fields)
    raise TypeError(f"{column.name}: no storage for a nested column of type {kind}")


@cython.cclass
class _ListRows:
    """What every nested column kept in Arrow's layout has: per row, whether it has a
    value and where its elements end (Arrow's list offsets), the elements themselves
    being each storage's own. The rows before the one being built that set no value are
    null; only the row being built can be cleared.
    """

    def __init__(self, limit: cython.Py_ssize_t) -> None:
        self.row_ends = bytearray(4 * (limit + 1))  # int32: 0, then each row's elements' end
        self.valid = bytearray(limit)  # a byte per row: 1 where the row has a value
        self.entries = self.recorded = self.filled = 0

    @cython.cfunc
    @cython.exceptval(-1, check=True)
    def held(self) -> cython.Py_ssize_t:
        """Bytes of text held (the batch's byte limit counts them)."""
        return 0

    @cython.cfunc
    def has(self, at: cython.Py_ssize_t) -> cython.bint:
        return 0 <= at < len(self.valid) and self.valid[at] != 0

    @cython.cfunc
    @cython.exceptval(-1, check=False)
    def begin(self, at: cython.Py_ssize_t) -> cython.int:
        """Row ``at`` (the row being built, without a value) has one, empty so far."""
        self._end_nulls(at)
        self.valid[at] = 1
        self.filled += 1
        self.recorded = at + 1
        return _put_integer(self.row_ends, at + 1, self.entries, 4)

    @cython.cfunc
    @cython.exceptval(-1, check=False)
    def _added(self, at: cython.Py_ssize_t) -> cython.int:
        """One element more in row ``at`` (begun)."""
        if self.entries >= MAX_OFFSET:
            raise OverflowError("a nested column: over 2**31 elements in one batch")
        self.entries += 1
        return _put_integer(self.row_ends, at + 1, self.entries, 4)

    @cython.cfunc
    @cython.exceptval(-1, check=False)
    def clear(self, at: cython.Py_ssize_t) -> cython.int:
        """Row ``at`` (the row being built) has no value: its elements go."""
        if not self.has(at):
            return 0
        self.entries = _integer_at(self.row_ends, at, 4)
        self.valid[at] = 0
        self.filled -= 1
        self.recorded = at
        return 0

    @cython.cfunc
    def value(self, at: cython.Py_ssize_t) -> object:
        """Row ``at``'s value as :meth:`ColumnBuffer.set` takes it (its elements, in a
        list), or None."""
        if not self.has(at):
            return None
        start: cython.Py_ssize_t = _integer_at(self.row_ends, at, 4)
        stop: cython.Py_ssize_t = _integer_at(self.row_ends, at + 1, 4)
        return [self._element(entry) for entry in range(start, stop)]

    @cython.cfunc
    def _element(self, entry: cython.Py_ssize_t) -> object:
        """Element ``entry`` as :meth:`ColumnBuffer.set` takes it."""
        raise NotImplementedError

    @cython.cfunc
    @cython.exceptval(-1, check=False)
    def put(self, at: cython.Py_ssize_t, value: object, name: str) -> cython.int:
        """Row ``at``'s value (begun) as :meth:`ColumnBuffer.set` takes it; ``name``: its
        column's, for errors."""
        raise NotImplementedError

    @cython.cfunc
    @cython.exceptval(-1, check=False)
    def _end_nulls(self, upto: cython.Py_ssize_t) -> cython.int:
        """The rows before ``upto`` that set no value end where the last one did."""
        while self.recorded < upto:
            self.recorded += 1
            _put_integer(self.row_ends, self.recorded, self.entries, 4)
        return 0

    def _list_array(self, count: cython.Py_ssize_t, kind: pa.DataType, child: pa.Array) -> pa.Array:
        """The first ``count`` rows as a list (or map) array of the elements ``child``."""
        self._end_nulls(count)
        validity = None if self.filled == count else _flag_bits(self.valid, 0, count)
        offsets = _copy(self.row_ends, 4 * (count + 1))
        return pa.Array.from_buffers(kind, count, [validity, offsets], children=[child])

    @cython.cfunc
    @cython.exceptval(-1, check=False)
    def recycle(self, rows: cython.Py_ssize_t) -> cython.int:
        """Empty, after a batch became arrays (``rows``: how many rows may hold a value)."""
        self.valid[:rows] = bytes(rows)
        self.entries = self.recorded = self.filled = 0
        return 0


@cython.cclass
class _TextMap(_ListRows):
    """A map<string, string> column (message properties): every key and every value end
    to end, each with its end offset. An entry read off the wire is copied from the bytes
    that carry it (:meth:`ColumnBuffer.set_pairs`): no str, tuple or list per entry, and
    no walk over the entries when the batch becomes Arrow arrays.

    Byte buffers grow by doubling: only the part their offsets reach holds values.
    """

    def __init__(self, limit: cython.Py_ssize_t) -> None:
        super().__init__(limit)
        self.keys = bytearray()
        self.items = bytearray()
        self.key_ends = bytearray(4)  # int32: 0, then the end of each entry's key
        self.item_ends = bytearray(4)
        self.item_valid = bytearray()  # a byte per entry: 0 where its value is null

    @cython.cfunc
    @cython.exceptval(-1, check=True)
    def held(self) -> cython.Py_ssize_t:
        return _integer_at(self.key_ends, self.entries, 4) + _integer_at(
            self.item_ends, self.entries, 4
        )

    @cython.cfunc
    @cython.exceptval(-1, check=False)
    def add(
        self,
        at: cython.Py_ssize_t,
        key_data: bytes,
        key_start: cython.Py_ssize_t,
        key_stop: cython.Py_ssize_t,
        item_data: bytes,
        item_start: cython.Py_ssize_t,
        item_stop: cython.Py_ssize_t,
    ) -> cython.int:
        """One entry of row ``at`` (begun): its key ``key_data[key_start:key_stop]`` and
        its value ``item_data[item_start:item_stop]`` (null when ``item_data`` is None).
        Both are UTF-8: the caller has made sure of it."""
        entry: cython.Py_ssize_t = self.entries
        _put_text(self.keys, self.key_ends, entry, key_data, key_start, key_stop)
        null: cython.bint = item_data is None
        if null:
            item_data, item_start, item_stop = b"", 0, 0
        _put_text(self.items, self.item_ends, entry, item_data, item_start, item_stop)
        _put_flag(self.item_valid, entry, not null)
        return self._added(at)

    @cython.cfunc
    @cython.exceptval(-1, check=False)
    def put(self, at: cython.Py_ssize_t, value: object, name: str) -> cython.int:
        """A map's (key, value) pairs or dict into row ``at`` of this map (begun)."""
        for pair in value.items() if isinstance(value, dict) else value:
            key, item = pair
            if key is None:
                raise TypeError(f"{name}: a map's key is never null")
            key_data: bytes = _encoded(key, True, name)
            item_data: bytes = None if item is None else _encoded(item, True, name)
            item_size = 0 if item_data is None else len(item_data)
            self.add(at, key_data, 0, len(key_data), item_data, 0, item_size)
        return 0

    @cython.cfunc
    def _element(self, entry: cython.Py_ssize_t) -> object:
        """Entry ``entry`` as (key, value)."""
        key = _text_at(self.keys, self.key_ends, entry)
        item = _text_at(self.items, self.item_ends, entry) if self.item_valid[entry] else None
        return (key, item)

    def array(self, count: cython.Py_ssize_t, kind: pa.MapType) -> pa.Array:
        """The first ``count`` rows as a map array (copies: the storage is kept)."""
        entries: cython.Py_ssize_t = self.entries
        keys = _texts(kind.key_type, entries, None, self.keys, self.key_ends)
        item_validity = _validity(self.item_valid, entries)
        items = _texts(kind.item_type, entries, item_validity, self.items, self.item_ends)
        structs = pa.Array.from_buffers(
            pa.struct([kind.key_field, kind.item_field]), entries, [None], children=[keys, items]
        )
        return self._list_array(count, kind, structs)

    @cython.cfunc
    @cython.exceptval(-1, check=False)
    def recycle(self, rows: cython.Py_ssize_t) -> cython.int:
        _ListRows.recycle(self, rows)
        if len(self.keys) > KEPT_TEXT_BYTES:
            self.keys = bytearray()
        if len(self.items) > KEPT_TEXT_BYTES:
            self.items = bytearray()
        return 0


@cython.cclass
class _IntStructs(_ListRows):
    """A list of structs of up to four integer fields (message ids): each field's values
    in a 64-bit slot per element with a validity byte, added with
    :meth:`ColumnBuffer.add_struct` (no dict per element, no walk over them when the
    batch becomes Arrow arrays)."""

    def __init__(self, limit: cython.Py_ssize_t, fields: list[pa.Field]) -> None:
        super().__init__(limit)
        self.fields = fields
        self.width = len(fields)
        self.slots = [bytearray() for _ in fields]  # per field: int64 per element
        self.present = [bytearray() for _ in fields]  # per field: 0 where it is null
        self.element_valid = bytearray()  # per element: 0 where the element is null

    @cython.cfunc
    @cython.exceptval(-1, check=False)
    def add(
        self,
        at: cython.Py_ssize_t,
        first: cython.longlong,
        second: cython.longlong,
        third: cython.longlong,
        fourth: cython.longlong,
        nulls: cython.int,
    ) -> cython.int:
        """One element of row ``at`` (begun): its fields' values, in order, bit n of
        ``nulls`` set where field n is null (the values past its fields are ignored)."""
        entry: cython.Py_ssize_t = self.entries
        field: cython.Py_ssize_t
        value: cython.longlong
        for field in range(self.width):
            value = (
                first if field == 0 else second if field == 1 else third if field == 2 else fourth
            )
            null: cython.bint = (nulls >> field) & 1
            _put_integer(self.slots[field], entry, 0 if null else value, 8)
            _put_flag(self.present[field], entry, not null)
        _put_flag(self.element_valid, entry, True)
        return self._added(at)

    @cython.cfunc
    @cython.exceptval(-1, check=False)
    def add_null(self, at: cython.Py_ssize_t) -> cython.int:
        """A null element of row ``at`` (begun)."""
        self.add(at, 0, 0, 0, 0, (1 << self.width) - 1)
        self.element_valid[self.entries - 1] = 0
        return 0

    @cython.cfunc
    @cython.exceptval(-1, check=False)
    def put(self, at: cython.Py_ssize_t, value: object, name: str) -> cython.int:
        """A list of dicts (or None) into row ``at`` of these structs (begun)."""
        values = [0] * MAX_STRUCT_FIELDS
        field: cython.Py_ssize_t
        nulls: cython.int
        for element in value:
            if element is None:
                self.add_null(at)
                continue
            if type(element) is not dict:
                raise TypeError(f"{name}: a {type(element).__name__} is not a struct (a dict)")
            nulls = 0
            for field in range(self.width):
                found = cython.cast(dict, element).get(self.fields[field].name)
                if found is None:
                    nulls |= 1 << field
                    values[field] = 0
                else:
                    values[field] = found
            self.add(at, values[0], values[1], values[2], values[3], nulls)
        return 0

    @cython.cfunc
    def _element(self, entry: cython.Py_ssize_t) -> object:
        """Element ``entry`` as a dict by field name, or None."""
        if not self.element_valid[entry]:
            return None
        element = {}
        field: cython.Py_ssize_t
        for field in range(self.width):
            present: bytearray = self.present[field]
            value = _integer_at(self.slots[field], entry, 8) if present[entry] else None
            element[self.fields[field].name] = value
        return element

    def array(self, count: cython.Py_ssize_t, kind: pa.ListType) -> pa.Array:
        """The first ``count`` rows as a list array (copies: the storage is kept)."""
        entries: cython.Py_ssize_t = self.entries
        children = []
        for field, slots, present in zip(self.fields, self.slots, self.present, strict=True):
            _reserve(slots, 8 * entries)
            _reserve(present, entries)
            validity = _validity(present, entries)
            children.append(_integers(field, entries, validity, slots, present, 0))
        structs = pa.Array.from_buffers(
            kind.value_type, entries, [_validity(self.element_valid, entries)], children=children
        )
        return self._list_array(count, kind, structs)


@cython.cfunc
@cython.exceptval(-1, check=False)
def _reserve(buffer: bytearray, size: cython.Py_ssize_t) -> cython.int:
    """Make ``buffer`` at least ``size`` bytes long, doubling as it grows."""
    if len(buffer) < size:
        grown: cython.Py_ssize_t = max(size, min(2 * len(buffer), 2 * MAX_OFFSET))
        if cython.compiled:
            PyByteArray_Resize(buffer, grown)
        else:
            buffer.extend(bytes(grown - len(buffer)))
    return 0


@cython.cfunc
@cython.exceptval(-1, check=False)
def _put_integer(
    buffer: bytearray, index: cython.Py_ssize_t, value: cython.longlong, width: cython.Py_ssize_t
) -> cython.int:
    """Integer number ``index`` of ``buffer``, ``width`` bytes each (4 or 8, native
    order), is ``value``; the buffer grows to hold it."""
    if index < 0 or (width != 4 and width != 8):
        raise IndexError(f"integer {index} of {width} bytes")
    _reserve(buffer, width * (index + 1))
    if not cython.compiled:
        buffer[width * index : width * (index + 1)] = value.to_bytes(
            width, sys.byteorder, signed=True
        )
    elif width == 4:
        cython.cast(cython.p_int, PyByteArray_AS_STRING(buffer))[index] = cython.cast(
            cython.int, value
        )
    else:
        cython.cast(cython.p_longlong, PyByteArray_AS_STRING(buffer))[index] = value
    return 0


@cython.cfunc
def _integer_at(
    buffer: bytearray, index: cython.Py_ssize_t, width: cython.Py_ssize_t
) -> cython.longlong:
    """Integer number ``index`` of ``buffer``, ``width`` bytes each (4 or 8)."""
    if index < 0 or (width != 4 and width != 8) or width * (index + 1) > len(buffer):
        raise IndexError(f"integer {index} of {width} bytes in a buffer of {len(buffer)}")
    if not cython.compiled:
        return int.from_bytes(
            buffer[width * index : width * (index + 1)], sys.byteorder, signed=True
        )
    if width == 4:
        return cython.cast(cython.p_int, PyByteArray_AS_STRING(buffer))[index]
    return cython.cast(cython.p_longlong, PyByteArray_AS_STRING(buffer))[index]


@cython.cfunc
@cython.exceptval(-1, check=False)
def _put_flag(flags: bytearray, index: cython.Py_ssize_t, value: cython.bint) -> cython.int:
    """Byte ``index`` of ``flags`` (grown to hold it) is 1 where ``value``, else 0."""
    if index < 0:
        raise IndexError(f"flag {index} of a buffer")
    _reserve(flags, index + 1)
    flags[index] = 1 if value else 0
    return 0


@cython.cfunc
def _validity(flags: bytearray, count: cython.Py_ssize_t) -> object:
    """Arrow's validity bits of the first ``count`` flags; None when none is 0."""
    if flags.find(0, 0, count) < 0:
        return None
    return _flag_bits(flags, 0, count)


@cython.cfunc
@cython.exceptval(-1, check=False)
def _put_text(
    data: bytearray,
    ends: bytearray,
    entry: cython.Py_ssize_t,
    source: bytes,
    start: cython.Py_ssize_t,
    stop: cython.Py_ssize_t,
) -> cython.int:
    """Text number ``entry`` of ``data`` (whose int32 ``ends`` say where each ends) is
    ``source[start:stop]``."""
    if start < 0 or stop < start or stop > len(source):
        raise IndexError(f"bytes {start}:{stop} of {len(source)}")
    begin: cython.Py_ssize_t = _integer_at(ends, entry, 4)
    end: cython.Py_ssize_t = begin + stop - start
    if end > MAX_OFFSET:
        raise OverflowError("a map column: over 2 GiB of text in one batch")
    _reserve(data, end)
    if cython.compiled:
        memcpy(PyByteArray_AS_STRING(data) + begin, PyBytes_AS_STRING(source) + start, stop - start)
    else:
        data[begin:end] = source[start:stop]
    return _put_integer(ends, entry + 1, end, 4)


@cython.cfunc
def _text_at(data: bytearray, ends: bytearray, entry: cython.Py_ssize_t) -> str:
    """Text number ``entry`` of ``data``, as str."""
    start: cython.Py_ssize_t = _integer_at(ends, entry, 4)
    stop: cython.Py_ssize_t = _integer_at(ends, entry + 1, 4)
    if start < 0 or stop < start or stop > len(data):
        raise IndexError(f"text {start}:{stop} beyond the {len(data)} bytes kept")
    return bytes(data[start:stop]).decode()


def _texts(
    kind: pa.DataType, count: cython.Py_ssize_t, validity: Any, data: bytearray, ends: bytearray
) -> pa.Array:
    """A string array of the first ``count`` texts of ``data``, each ending at its int32
    of ``ends`` (after a 0), copied."""
    offsets = _copy(ends, 4 * (count + 1))
    return pa.Array.from_buffers(
        kind, count, [validity, offsets, _copy(data, _integer_at(ends, count, 4))]
    )


@cython.cfunc
def _copy(buffer: bytearray, size: cython.Py_ssize_t) -> object:
    """The first ``size`` bytes of ``buffer`` as a new Arrow buffer."""
    if size < 0 or size > len(buffer):
        raise IndexError(f"{size} bytes of a buffer of {len(buffer)}")
    if not cython.compiled:
        return pa.py_buffer(bytes(buffer[:size]))
    copied = pa.allocate_buffer(size)
    memcpy(_address(copied), PyByteArray_AS_STRING(buffer), size)
    return copied


def _integers(
    field: pa.Field,
    count: cython.Py_ssize_t,
    validity: Any,
    data: bytearray,
    flags: bytearray,
    start: cython.Py_ssize_t,
) -> pa.Array:
    """An integer or timestamp column of ``count`` rows from the 64-bit values in ``data``
    and the flag bytes in ``flags`` (nonzero: set) from row ``start`` on. A value out of a
    narrower type's range is an error, never wrapped."""
    kind = field.type
    copied = kind == pa.int64() or kind == pa.int32() or pa.types.is_timestamp(kind)
    if cython.compiled and copied:
        width: cython.Py_ssize_t = 4 if kind == pa.int32() else 8
        values = _copied(data, flags, start, count, width, field.name)
        return pa.Array.from_buffers(kind, count, [validity, values])
    values = pa.py_buffer(memoryview(data)[8 * start : 8 * (start + count)])
    if pa.types.is_timestamp(kind):
        return pa.Array.from_buffers(kind, count, [validity, values])
    wide = pa.Array.from_buffers(pa.int64(), count, [validity, values])
    return wide if kind == pa.int64() else wide.cast(kind)  # Arrow's checked cast


@cython.cfunc
def _copied(
    data: bytearray,
    flags: bytearray,
    start: cython.Py_ssize_t,
    count: cython.Py_ssize_t,
    width: cython.Py_ssize_t,
    column: str,
) -> object:
    """(Compiled only.) A new buffer of the ``count`` 64-bit values in ``data`` from
    ``start`` on, ``width`` bytes each (8, or 4 checked to be in range as Arrow's checked
    cast checks), a null's as 0."""
    if start < 0 or count < 0 or start + count > len(flags) or 8 * (start + count) > len(data):
        raise IndexError(f"{column}: values out of range")
    values = pa.allocate_buffer(width * count)
    source: cython.p_longlong = cython.cast(cython.p_longlong, PyByteArray_AS_STRING(data)) + start
    valid: cython.p_char = PyByteArray_AS_STRING(flags) + start
    wide: cython.p_longlong = cython.cast(cython.p_longlong, _address(values))
    narrow: cython.p_int = cython.cast(cython.p_int, _address(values))
    i: cython.Py_ssize_t
    value: cython.longlong
    for i in range(count):
        value = source[i] if valid[i] else 0
        if width == 8:
            wide[i] = value
        elif value < INT32_MIN or value > INT32_MAX:
            raise pa.ArrowInvalid(
                f"{column}: integer value {value} not in range: {INT32_MIN} to {INT32_MAX}"
            )
        else:
            narrow[i] = cython.cast(cython.int, value)
    return values


@cython.cfunc
def _encoded(value: object, string: cython.bint, column: str) -> bytes:
    """A string or binary column's value as the bytes Arrow keeps: UTF-8 for text (bytes
    given for a string column must be UTF-8 already, as Arrow's own conversion demands)."""
    if type(value) is str:
        return cython.cast(str, value).encode()
    if isinstance(value, _TEXT_TYPES):
        encoded = bytes(value)
        if string:
            encoded.decode()  # raises UnicodeDecodeError on bytes that are not UTF-8
        return encoded
    if isinstance(value, str):
        return str(value).encode()
    raise TypeError(f"{column}: a {type(value).__name__} is not a string or bytes value")


@cython.cfunc
def _flag_bits(
    flags: bytearray,
    start: cython.Py_ssize_t,
    count: cython.Py_ssize_t,
    width: cython.Py_ssize_t = 1,
) -> object:
    """``count`` values of ``width`` bytes (1: flag bytes, 8: 64-bit slots) in ``flags``
    from value ``start`` on as Arrow bits: 1 where nonzero (a new buffer: the storage the
    values are in may be reused)."""
    if not cython.compiled:
        return _nonzero_bits(flags, pa.uint8() if width == 1 else pa.int64(), start, count)
    if start < 0 or count < 0 or width * (start + count) > len(flags):
        raise IndexError("values out of range")
    bits = pa.allocate_buffer((count + 7) >> 3)
    _pack(PyByteArray_AS_STRING(flags) + width * start, width, count, _address(bits))
    return bits


@cython.cfunc
@cython.inline
def _address(buffer: pa.Buffer) -> cython.p_char:
    """Where a buffer Arrow allocated (pa.allocate_buffer: mutable) keeps its bytes."""
    return cython.cast(cython.p_char, cython.cast(cython.size_t, buffer.address))


@cython.cfunc
@cython.boundscheck(False)  # C pointers: the callers size both to count values
@cython.wraparound(False)
def _pack(
    values: cython.p_char, width: cython.Py_ssize_t, count: cython.Py_ssize_t, bits: cython.p_char
) -> cython.void:
    """Set bit i of ``bits`` (Arrow's order: least significant first) where value i of
    ``values``, ``width`` bytes each (1 or 8), is nonzero."""
    i: cython.Py_ssize_t
    j: cython.Py_ssize_t
    byte: cython.uchar
    for i in range(0, count, 8):
        byte = 0
        for j in range(min(8, count - i)):
            if width == 1:
                if values[i + j]:
                    byte |= 1 << j
            elif cython.cast(cython.p_longlong, values)[i + j]:
                byte |= 1 << j
        bits[i >> 3] = byte


def _nonzero_bits(data: Any, kind: pa.DataType, start: int, count: int) -> pa.Buffer:
    """Arrow's bits for ``count`` values of ``kind`` in ``data`` from value ``start`` on:
    1 where the value is nonzero, packed by Arrow's cast to boolean (the interpreted path:
    compiled, :func:`_pack` packs them in C)."""
    values = pa.Array.from_buffers(kind, count, [None, pa.py_buffer(data)], offset=start)
    return values.cast(pa.bool_()).buffers()[1]
