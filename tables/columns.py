# cython: annotation_typing=True
"""Rows of one table held column by column, handed to Arrow as ready-made buffers.

Converting a list of dicts to an Arrow struct array looks every field of the schema up
in every dict and boxes nothing less than a Python call per value; it cost more than
decoding the frame. Here a row's set values go straight to where their column keeps
them, as the row arrives:

- integers, timestamps and booleans into one 64-bit slot per row of their column (a
  block of C ``long long`` when compiled), with a validity byte beside it: the column
  becomes an Arrow array from those bytes without a conversion per value;
- strings, binaries and nested values (message ids, properties) as (row, value) pairs,
  converted by Arrow's own sequence conversion once per batch.

A column no row set costs nothing per row, which suits tables of 40-odd columns of
which a row sets a dozen. Compiled by Cython, :meth:`ColumnBuffer.add` walks the row's
items on C integers; interpreted, the same code runs over memoryviews.
"""

from __future__ import annotations

import sys
from typing import Any

import cython
import pyarrow as pa

_INTEGERS = (pa.types.is_integer, pa.types.is_timestamp)


def _slotted(kind: pa.DataType) -> bool:
    """Whether a column's values fit a 64-bit slot (else they are kept as objects)."""
    return pa.types.is_boolean(kind) or any(test(kind) for test in _INTEGERS)


@cython.cclass
class ColumnBuffer:
    """The pending rows of one table; :meth:`add` says when a batch's worth is held.

    A row is a dict keyed by column name: a column it lacks is null, a key the schema
    lacks is ignored. ``payload_limit`` (bytes, 0 for none) also ends a batch once the
    rows' ``payload`` values add up to it, so kept payloads cannot pile up.
    """

    schema = cython.declare(object, visibility="readonly")
    count = cython.declare(cython.Py_ssize_t, visibility="readonly")
    _limit = cython.declare(cython.Py_ssize_t)
    _capacity = cython.declare(cython.Py_ssize_t)
    _payload_limit = cython.declare(cython.Py_ssize_t)
    _payload_bytes = cython.declare(cython.Py_ssize_t)
    _places = cython.declare(dict)  # column name -> slot (>= 0) or -1 - object index
    _slotted = cython.declare(list)  # schema positions of the slotted columns
    _objects = cython.declare(list)  # schema positions of the object columns
    _rows = cython.declare(list)  # per object column: the rows that set it
    _values = cython.declare(list)  # per object column: their values
    _data = cython.declare(cython.longlong[:, ::1])  # [slot, row]
    _valid = cython.declare(cython.uchar[:, ::1])  # [slot, row]: 1 where set
    _data_bytes = cython.declare(bytearray)  # what _data and _valid view
    _valid_bytes = cython.declare(bytearray)
    _set = cython.declare(cython.longlong[::1])  # [slot]: rows that set it

    def __init__(self, schema: pa.Schema, limit: int, payload_limit: int = 0) -> None:
        self.schema = schema
        self._limit = max(1, limit)
        self._payload_limit = payload_limit
        self._places = {}
        self._slotted = []
        self._objects = []
        for position, field in enumerate(schema):
            name = sys.intern(field.name)  # as the rows' keys are: found by identity
            if _slotted(field.type):
                self._places[name] = len(self._slotted)
                self._slotted.append(position)
            else:
                self._places[name] = -1 - len(self._objects)
                self._objects.append(position)
        self._capacity = 0
        self._reset()

    def _reset(self) -> None:
        """Empty the buffer, with room for a batch (nothing held refers to old storage)."""
        slots = max(1, len(self._slotted))
        capacity = self._limit
        self._data_bytes = bytearray(8 * slots * capacity)
        self._valid_bytes = bytearray(slots * capacity)
        self._data = memoryview(self._data_bytes).cast("q", (slots, capacity))
        self._valid = memoryview(self._valid_bytes).cast("B", (slots, capacity))
        self._set = memoryview(bytearray(8 * slots)).cast("q")
        self._capacity = capacity
        self._rows = [[] for _ in self._objects]
        self._values = [[] for _ in self._objects]
        self.count = 0
        self._payload_bytes = 0

    def __len__(self) -> int:
        return self.count

    @property
    def payload_bytes(self) -> int:
        """Bytes of `payload` values held (counted only with a ``payload_limit``)."""
        return self._payload_bytes

    @cython.ccall
    def add(self, row: dict) -> cython.bint:
        """Take one row; True once the buffer holds a batch's worth."""
        if self.count >= self._capacity:
            raise OverflowError("a full ColumnBuffer takes no row before take_batch()")
        at: cython.Py_ssize_t = self.count
        places: dict = self._places
        place: Any
        slot: cython.Py_ssize_t
        for key, value in row.items():
            if value is None:
                continue
            place = places.get(key)
            if place is None:
                continue
            slot = place
            if slot >= 0:
                self._data[slot, at] = value
                self._valid[slot, at] = 1
                self._set[slot] += 1
            else:
                slot = -1 - slot
                cython.cast(list, self._rows[slot]).append(at)
                cython.cast(list, self._values[slot]).append(value)
        self.count = at + 1
        if self._payload_limit:
            payload: Any = row.get("payload")
            if payload is not None:
                self._payload_bytes += len(payload)
            if self._payload_bytes >= self._payload_limit:
                return True
        return self.count >= self._limit

    def take_batch(self) -> pa.RecordBatch | None:
        """The held rows as one record batch (None when there are none), then empty."""
        count = self.count
        if not count:
            return None
        arrays: list[Any] = [None] * len(self.schema)
        for slot, position in enumerate(self._slotted):
            arrays[position] = self._slot_array(slot, self.schema.field(position).type)
        for index, position in enumerate(self._objects):
            arrays[position] = self._object_array(index, self.schema.field(position).type)
        self._reset()
        return pa.RecordBatch.from_arrays(arrays, schema=self.schema)

    def _slot_array(self, slot: int, kind: pa.DataType) -> pa.Array:
        count = self.count
        filled = self._set[slot]
        if not filled:
            return pa.nulls(count, kind)
        start = slot * self._capacity  # a slot's rows (values and flags) are contiguous
        validity = None
        if filled < count:
            validity = pa.py_buffer(_flag_bits(self._valid_bytes[start : start + count], count))
        if pa.types.is_boolean(kind):
            return pa.Array.from_buffers(kind, count, [validity, pa.py_buffer(self._truths(slot))])
        values = pa.py_buffer(bytes(self._data_bytes[8 * start : 8 * (start + count)]))
        if pa.types.is_timestamp(kind):
            return pa.Array.from_buffers(kind, count, [validity, values])
        wide = pa.Array.from_buffers(pa.int64(), count, [validity, values])
        return wide if kind == pa.int64() else wide.cast(kind)  # checked: no silent wrap

    def _truths(self, slot: cython.Py_ssize_t) -> bytearray:
        """A boolean column's values as Arrow's bits (nonzero: true)."""
        count: cython.Py_ssize_t = self.count
        out = bytearray((count + 7) // 8)
        bits: cython.uchar[::1] = out
        data: cython.longlong[:, ::1] = self._data
        row: cython.Py_ssize_t
        for row in range(count):
            if data[slot, row]:
                bits[row >> 3] |= 1 << (row & 7)
        return out

    def _object_array(self, index: int, kind: pa.DataType) -> pa.Array:
        rows: list = self._rows[index]
        values: list = self._values[index]
        if not rows:
            return pa.nulls(self.count, kind)
        if kind == pa.string():
            strings = _string_array(rows, values, self.count)
            if strings is not None:
                return strings
        if len(rows) == self.count:  # set on every row: the values are the column
            return pa.array(values, type=kind)
        full: list = [None] * self.count
        i: cython.Py_ssize_t
        row: cython.Py_ssize_t
        for i in range(len(rows)):
            row = rows[i]
            full[row] = values[i]
        return pa.array(full, type=kind)


def _string_array(rows: list, values: list, count: cython.Py_ssize_t) -> pa.Array | None:
    """A string column from Arrow's three buffers, built here: the text of all values
    encoded at once, offsets from their lengths (a str's length is its UTF-8 size when
    it is ASCII, as nearly every value of these tables is). None when a value is not a
    str, or not encodable: Arrow's own conversion then decides."""
    offsets_bytes = bytearray(4 * (count + 1))
    offsets: cython.int[::1] = memoryview(offsets_bytes).cast("i")
    flags = bytearray(count)
    valid: cython.uchar[::1] = flags
    i: cython.Py_ssize_t
    row: cython.Py_ssize_t
    filled: cython.Py_ssize_t = 0
    end: cython.longlong = 0
    value: object
    for i in range(len(rows)):
        value = values[i]
        if type(value) is not str:
            return None
        row = rows[i]
        while filled < row:  # rows in between are null: their offsets do not move
            filled += 1
            offsets[filled] = end
        end += len(value) if cython.cast(str, value).isascii() else len(value.encode())
        if end > 0x7FFFFFFF:
            return None
        valid[row] = 1
        filled = row + 1
        offsets[filled] = end
    while filled < count:
        filled += 1
        offsets[filled] = end
    try:
        data = "".join(values).encode()
    except UnicodeEncodeError:
        return None
    validity = None if len(rows) == count else pa.py_buffer(_flag_bits(flags, count))
    buffers = [validity, pa.py_buffer(offsets_bytes), pa.py_buffer(data)]
    return pa.Array.from_buffers(pa.string(), count, buffers)


def _flag_bits(flags: cython.uchar[::1], count: cython.Py_ssize_t) -> bytearray:
    """The first ``count`` flag bytes as Arrow's validity bits (nonzero: set)."""
    out = bytearray((count + 7) // 8)
    bits: cython.uchar[::1] = out
    row: cython.Py_ssize_t
    for row in range(count):
        if flags[row]:
            bits[row >> 3] |= 1 << (row & 7)
    return out
