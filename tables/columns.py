# cython: annotation_typing=True
"""Rows of one table held column by column, handed to Arrow as ready-made buffers.

Converting a list of dicts to an Arrow struct array looks every field of the schema up
in every dict and boxes nothing less than a Python call per value; it cost more than
decoding the frame. Here a row's set values go straight to where their column keeps
them, in the layout Arrow reads, as the row arrives:

- integers, timestamps and booleans into one 64-bit slot per row of their column (a
  block of C ``long long`` when compiled), with a validity byte beside it;
- strings and binaries as their bytes, appended to the column's data, with the end
  offset of each row beside them (Arrow's offsets buffer, filled as rows arrive);
- nested values (message ids, properties) as (row, value) pairs, laid out child by
  child once per batch (Arrow's own conversion only for a shape it does not know).

A batch then becomes Arrow arrays over those bytes without a conversion per value, and a
column no row set costs nothing per row, which suits tables of 40-odd columns of which a
row sets a dozen. Compiled by Cython, :meth:`ColumnBuffer.add` walks the row's items on
C integers; interpreted, the same code runs over memoryviews.
"""

from __future__ import annotations

import sys
from typing import Any

import cython
import pyarrow as pa

if cython.compiled:  # a text value is copied to its column's bytes with memcpy
    from cython.cimports.cpython.bytearray import PyByteArray_AS_STRING, PyByteArray_Resize
    from cython.cimports.cpython.bytes import PyBytes_AS_STRING
    from cython.cimports.cpython.dict import PyDict_Next
    from cython.cimports.cpython.object import PyObject
    from cython.cimports.cpython.unicode import PyUnicode_AsUTF8AndSize
    from cython.cimports.libc.string import memcpy

# How a column keeps its values: the low two bits of its place (the rest: its index
# among the columns kept that way).
# (C constants when compiled: a Python object here would be looked up and compared as one
# for every value added.)
SLOT = cython.declare(cython.Py_ssize_t, 0)
STRING = cython.declare(cython.Py_ssize_t, 1)
BINARY = cython.declare(cython.Py_ssize_t, 2)
NESTED = cython.declare(cython.Py_ssize_t, 3)
MAX_OFFSET = cython.declare(cython.Py_ssize_t, 0x7FFFFFFF)  # Arrow's offsets are int32
SEEN_SLOTS = cython.declare(cython.Py_ssize_t, 1024)  # a power of two
_TEXT_TYPES = (bytes, bytearray, memoryview)


def _storage(kind: pa.DataType) -> int:
    if pa.types.is_boolean(kind) or pa.types.is_integer(kind) or pa.types.is_timestamp(kind):
        return SLOT
    if kind == pa.string():
        return STRING
    if kind == pa.binary():
        return BINARY
    return NESTED


@cython.final  # its C methods are called directly, not through a vtable
@cython.cclass
class ColumnBuffer:
    """The pending rows of one table; :meth:`add` says when a batch's worth is held.

    A row is a dict keyed by column name: a column it lacks is null, a key the schema
    lacks is ignored. ``byte_limit`` (0 for none) also ends a batch once the rows' string
    and binary values held add up to it, so large values (kept payloads, long names)
    cannot pile up in memory.
    """

    schema = cython.declare(object, visibility="readonly")
    count = cython.declare(cython.Py_ssize_t, visibility="readonly")
    held_bytes = cython.declare(cython.Py_ssize_t, visibility="readonly")
    _limit = cython.declare(cython.Py_ssize_t)
    _byte_limit = cython.declare(cython.Py_ssize_t)
    _places = cython.declare(dict)  # column name -> index << 2 | storage
    # Compiled: the places of the keys seen last, found and told by the key's address (a
    # row's keys are the same str objects row after row), so most keys cost no dict
    # lookup and no call. A key cached is held, so its address stays its own.
    _seen_keys = cython.declare(list)  # per cache slot: the key, or None
    _seen = cython.declare(cython.longlong[:, ::1])  # per cache slot: its address, its place
    _positions = cython.declare(list)  # per storage: schema positions of its columns
    # Slots: [slot, row] values and validity bytes, and per slot the rows that set it.
    _data = cython.declare(cython.longlong[:, ::1])
    _valid = cython.declare(cython.uchar[:, ::1])
    _data_bytes = cython.declare(bytearray)
    _valid_bytes = cython.declare(bytearray)
    _set = cython.declare(cython.longlong[::1])
    # Texts (strings, then binaries): per text column its bytes, [text, row + 1] the end
    # offset of each row's value, how many rows have their end recorded, and validity.
    _text = cython.declare(list)
    _ends = cython.declare(cython.int[:, ::1])
    _ends_bytes = cython.declare(bytearray)
    _recorded = cython.declare(cython.longlong[::1])
    _text_valid = cython.declare(cython.uchar[:, ::1])
    _text_valid_bytes = cython.declare(bytearray)
    _text_set = cython.declare(cython.longlong[::1])
    _strings = cython.declare(cython.Py_ssize_t)  # text columns below this index are strings
    # Nested: per column the rows that set it and their values.
    _rows = cython.declare(list)
    _values = cython.declare(list)

    def __init__(self, schema: pa.Schema, limit: int, byte_limit: int = 0) -> None:
        self.schema = schema
        self._limit = max(1, limit)
        self._byte_limit = byte_limit
        self._places = {}
        self._seen_keys = [None] * SEEN_SLOTS
        self._seen = memoryview(bytearray(16 * SEEN_SLOTS)).cast("q", (SEEN_SLOTS, 2))
        by_storage: list[list[int]] = [[], [], [], []]
        for position, field in enumerate(schema):
            by_storage[_storage(field.type)].append(position)
        self._strings = len(by_storage[STRING])
        # Strings and binaries share one index space: text index = place >> 2 for both.
        texts = by_storage[STRING] + by_storage[BINARY]
        self._positions = [by_storage[SLOT], texts, by_storage[NESTED]]
        for storage, positions in ((SLOT, by_storage[SLOT]), (NESTED, by_storage[NESTED])):
            for index, position in enumerate(positions):
                self._places[sys.intern(schema.field(position).name)] = index << 2 | storage
        for index, position in enumerate(texts):
            storage = STRING if index < self._strings else BINARY
            self._places[sys.intern(schema.field(position).name)] = index << 2 | storage
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
        self._rows = [[] for _ in self._positions[2]]
        self._values = [[] for _ in self._positions[2]]
        self.count = 0
        self.held_bytes = 0

    def __len__(self) -> int:
        return self.count

    @cython.ccall
    def add(self, row: dict) -> cython.bint:
        """Take one row; True once the buffer holds a batch's worth."""
        if self.count >= self._limit:
            raise OverflowError("a full ColumnBuffer takes no row before take_batch()")
        at: cython.Py_ssize_t = self.count
        if cython.compiled:  # the dict's own walk: no iterator, no size check per item
            position: cython.Py_ssize_t = 0
            key_at = cython.declare(cython.pointer(PyObject))
            value_at = cython.declare(cython.pointer(PyObject))
            while PyDict_Next(
                row, cython.address(position), cython.address(key_at), cython.address(value_at)
            ):
                if value_at is not cython.cast(cython.pointer(PyObject), None):
                    key = cython.cast(object, key_at)  # held while added: the row may change
                    value = cython.cast(object, value_at)
                    self._add_item(at, key, value)
        else:
            for key, value in row.items():
                if value is not None:
                    self._add_item(at, key, value)
        self.count = at + 1
        if self._byte_limit and self.held_bytes >= self._byte_limit:
            return True
        return self.count >= self._limit

    @cython.cfunc
    @cython.boundscheck(False)  # indices below: `at` < the limit (add checks); places' own
    @cython.wraparound(False)
    def _add_item(self, at: cython.Py_ssize_t, key: object, value: object):
        """Put one set value of row ``at`` where its column keeps it (a key the schema
        lacks: nowhere)."""
        place: Any
        code: cython.Py_ssize_t
        if cython.compiled:
            address: cython.Py_ssize_t = cython.cast(
                cython.Py_ssize_t, cython.cast(cython.p_void, key)
            )
            slot: cython.Py_ssize_t = (address >> 4 ^ address >> 14) & (SEEN_SLOTS - 1)
            if self._seen[slot, 0] == address:
                code = self._seen[slot, 1]
            else:
                place = self._places.get(key)
                code = -1 if place is None else place
                self._seen_keys[slot] = key
                self._seen[slot, 0] = address
                self._seen[slot, 1] = code
            if code < 0:
                return
        else:
            place = self._places.get(key)
            if place is None:
                return
            code = place
        index: cython.Py_ssize_t = code >> 2
        code &= 3
        if code == SLOT:
            self._data[index, at] = value
            self._valid[index, at] = 1
            self._set[index] += 1
        elif code == NESTED:
            cython.cast(list, self._rows[index]).append(at)
            cython.cast(list, self._values[index]).append(value)
        else:
            self._add_text(index, at, key, value)

    @cython.cfunc
    @cython.boundscheck(False)  # called by add: its indices are in range
    @cython.wraparound(False)
    def _add_text(self, index: cython.Py_ssize_t, at: cython.Py_ssize_t, key: str, value: object):
        """Append one string or binary value; the rows since the column's last value are
        null (their end offsets stay where it ended).

        Compiled, a column's bytearray grows by doubling and only its first ``end`` bytes
        are values (cut to them at :meth:`take_batch`): resizing it for every value cost
        more than copying the value."""
        size: cython.Py_ssize_t = 0
        encoded: bytes = None
        if cython.compiled:  # a str's UTF-8 is read where the str keeps it: no bytes made
            source: cython.p_const_char
            if type(value) is str:
                source = PyUnicode_AsUTF8AndSize(value, cython.address(size))
            else:
                encoded = _encoded(value, index < self._strings, key)
                source = PyBytes_AS_STRING(encoded)
                size = len(encoded)
        else:
            encoded = _encoded(value, index < self._strings, key)
            size = len(encoded)
        data: bytearray = self._text[index]
        end: cython.Py_ssize_t = self._end_nulls(index, at) + size
        if end > MAX_OFFSET:
            raise OverflowError(f"{key}: over 2 GiB of values in one batch")
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
            arrays[position] = self._slot_array(slot, self.schema.field(position).type)
        for index, position in enumerate(texts):
            arrays[position] = self._text_array(index, self.schema.field(position).type)
        for index, position in enumerate(nested):
            arrays[position] = self._nested_array(index, self.schema.field(position).type)
        self._reset()
        return pa.RecordBatch.from_arrays(arrays, schema=self.schema)

    def _slot_array(self, slot: cython.Py_ssize_t, kind: pa.DataType) -> pa.Array:
        count = self.count
        filled = self._set[slot]
        if not filled:
            return pa.nulls(count, kind)
        start = slot * self._limit  # a slot's rows (values and flags) are contiguous
        validity = None
        if filled < count:
            validity = _validity(self._valid_bytes, start, count)
        if pa.types.is_boolean(kind):  # nonzero: true
            truths = _nonzero_bits(self._data_bytes, pa.int64(), start, count)
            return pa.Array.from_buffers(kind, count, [validity, truths])
        values = pa.py_buffer(memoryview(self._data_bytes)[8 * start : 8 * (start + count)])
        return _integers(kind, count, validity, values)

    def _text_array(self, index: cython.Py_ssize_t, kind: pa.DataType) -> pa.Array:
        count: cython.Py_ssize_t = self.count
        filled: cython.Py_ssize_t = self._text_set[index]
        if not filled:
            return pa.nulls(count, kind)
        data: bytearray = self._text[index]
        del data[self._end_nulls(index, count) :]  # nulls after its last value; spare room
        width = 4 * (self._limit + 1)
        offsets = memoryview(self._ends_bytes)[index * width : index * width + 4 * (count + 1)]
        validity = None
        if filled < count:
            validity = _validity(self._text_valid_bytes, index * self._limit, count)
        buffers = [validity, pa.py_buffer(offsets), pa.py_buffer(data)]
        return pa.Array.from_buffers(kind, count, buffers)

    def _nested_array(self, index: int, kind: pa.DataType) -> pa.Array:
        rows: list = self._rows[index]
        values: list = self._values[index]
        if not rows:
            return pa.nulls(self.count, kind)
        if pa.types.is_map(kind) or (
            pa.types.is_list(kind) and pa.types.is_struct(kind.value_type)
        ):
            built = _list_of_structs(rows, values, self.count, kind)
            if built is not None:
                return built
        if len(rows) == self.count:  # set on every row: the values are the column
            return pa.array(values, type=kind)
        full: list = [None] * self.count
        i: cython.Py_ssize_t
        row: cython.Py_ssize_t
        for i in range(len(rows)):
            row = rows[i]
            full[row] = values[i]
        return pa.array(full, type=kind)


def _list_of_structs(
    rows: list, values: list, count: cython.Py_ssize_t, kind: pa.ListType
) -> pa.Array | None:
    """A list<struct> column (message ids: dicts) or a map (properties: (key, value)
    pairs) built child by child: Arrow's conversion of nested values costs microseconds
    per element. None for an element of another shape: Arrow's own conversion decides."""
    pairs: cython.bint = pa.types.is_map(kind)
    fields = [kind.key_field, kind.item_field] if pairs else list(kind.value_type)
    names = [field.name for field in fields]
    width: cython.Py_ssize_t = len(names)
    children: list = [[] for _ in names]
    item_flags = bytearray()  # 1 for each element that is a struct, 0 for a null one
    offsets_bytes = bytearray(4 * (count + 1))
    offsets: cython.int[::1] = memoryview(offsets_bytes).cast("i")
    row_flags = bytearray(count)
    row_valid: cython.uchar[::1] = row_flags
    total: cython.Py_ssize_t = 0
    filled: cython.Py_ssize_t = 0
    i: cython.Py_ssize_t
    j: cython.Py_ssize_t
    row: cython.Py_ssize_t
    for i in range(len(rows)):
        row = rows[i]
        while filled < row:  # rows in between are null: their offsets do not move
            filled += 1
            offsets[filled] = total
        for item in values[i]:
            if pairs:  # a map's entries are never null
                if type(item) is not tuple or len(item) != 2 or item[0] is None:
                    return None
                item_flags.append(1)
                cython.cast(list, children[0]).append(item[0])
                cython.cast(list, children[1]).append(item[1])
            elif item is None:
                item_flags.append(0)
                for j in range(width):
                    cython.cast(list, children[j]).append(None)
            elif type(item) is dict:
                item_flags.append(1)
                for j in range(width):
                    cython.cast(list, children[j]).append(cython.cast(dict, item).get(names[j]))
            else:
                return None
            total += 1
        if total > MAX_OFFSET:
            raise OverflowError(f"{kind}: over 2**31 elements in one batch")
        row_valid[row] = 1
        filled = row + 1
        offsets[filled] = total
    while filled < count:
        filled += 1
        offsets[filled] = total
    arrays = [_child_array(child, field) for child, field in zip(children, fields, strict=True)]
    items = pa.Array.from_buffers(
        pa.struct(fields), total, [_validity(item_flags, 0, total)], children=arrays
    )
    buffers = [_validity(row_flags, 0, count), pa.py_buffer(offsets_bytes)]
    return pa.Array.from_buffers(kind, count, buffers, children=[items])


def _child_array(values: list, field: pa.Field) -> pa.Array:
    """One child of a nested column. Integers and texts are laid out here as the columns
    are: ``pa.array`` would cost more, and its first call in a process imports pandas."""
    kind = field.type
    if kind == pa.string() or kind == pa.binary():
        return _text_child(values, field)
    if not pa.types.is_integer(kind):
        return pa.array(values, type=kind)
    count: cython.Py_ssize_t = len(values)
    data = bytearray(8 * count)
    flags = bytearray(count)
    slots: cython.longlong[::1] = memoryview(data).cast("q")
    valid: cython.uchar[::1] = flags
    i: cython.Py_ssize_t
    for i in range(count):
        value = values[i]
        if value is not None:
            slots[i] = value
            valid[i] = 1
    return _integers(kind, count, _validity(flags, 0, count), pa.py_buffer(data))


def _text_child(values: list, field: pa.Field) -> pa.Array:
    """A string or binary child from its values (None: null)."""
    string: cython.bint = field.type == pa.string()
    count: cython.Py_ssize_t = len(values)
    offsets_bytes = bytearray(4 * (count + 1))
    offsets: cython.int[::1] = memoryview(offsets_bytes).cast("i")
    flags = bytearray(count)
    valid: cython.uchar[::1] = flags
    parts: list = []
    end: cython.Py_ssize_t = 0
    i: cython.Py_ssize_t
    for i in range(count):
        value = values[i]
        if value is not None:
            if type(value) is str:
                encoded = cython.cast(str, value).encode()
            else:
                encoded = _encoded(value, string, field.name)
            parts.append(encoded)
            end += len(encoded)
            if end > MAX_OFFSET:
                raise OverflowError(f"{field.name}: over 2 GiB of values in one batch")
            valid[i] = 1
        offsets[i + 1] = end
    buffers = [
        _validity(flags, 0, count),
        pa.py_buffer(offsets_bytes),
        pa.py_buffer(b"".join(parts)),
    ]
    return pa.Array.from_buffers(field.type, count, buffers)


def _integers(kind: pa.DataType, count: int, validity: Any, values: pa.Buffer) -> pa.Array:
    """An integer or timestamp column from 64-bit values; narrower integers are cast with
    Arrow's checked cast, so a value out of range is an error, never wrapped."""
    if pa.types.is_timestamp(kind):
        return pa.Array.from_buffers(kind, count, [validity, values])
    wide = pa.Array.from_buffers(pa.int64(), count, [validity, values])
    return wide if kind == pa.int64() else wide.cast(kind)


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


def _validity(flags: bytearray, start: int, count: int) -> pa.Buffer:
    """Flag bytes ``flags[start:start + count]`` as an Arrow validity buffer (nonzero: set)."""
    return _nonzero_bits(flags, pa.uint8(), start, count)


def _nonzero_bits(data: Any, kind: pa.DataType, start: int, count: int) -> pa.Buffer:
    """Arrow's bits for ``count`` values of ``kind`` in ``data`` from value ``start`` on:
    1 where the value is nonzero. Arrow's cast to boolean packs them: a loop over the
    rows here cost more than the rest of a batch's conversion."""
    values = pa.Array.from_buffers(kind, count, [None, pa.py_buffer(data)], offset=start)
    return values.cast(pa.bool_()).buffers()[1]
