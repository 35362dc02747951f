# cython: annotation_typing=True
"""The nested columns of a table, each in Arrow's layout as rows are built: per row,
whether it has a value and where its elements end (Arrow's list offsets, :class:`ListRows`),
the elements being each storage's own:

- :class:`TextMap`, a map of strings to strings (message properties): its keys' and values'
  bytes end to end, with their end offsets, copied from the bytes a reader found them in
  (:meth:`TextMap.add_spans`, the spans made with :func:`add_span`);
- :class:`IntStructs`, a list of structs of integer fields (message ids): a 64-bit slot per
  element and field, with validity bytes.

The byte buffers here grow by doubling: only the part their offsets reach holds values.
"""

from __future__ import annotations

import struct
import sys
from typing import Any

import cython
import pyarrow as pa

from .arrow_copy import integers

if cython.compiled:
    from cython.cimports.cpython.bytearray import PyByteArray_AS_STRING, PyByteArray_Resize
    from cython.cimports.cpython.bytes import PyBytes_AS_STRING
    from cython.cimports.libc.string import memcpy
    from cython.cimports.pwcap.tables.arrow_copy import copy, flag_bits, validity
    from cython.cimports.pwcap.tables.texts import encode
else:
    from .arrow_copy import copy, flag_bits, validity
    from .texts import encode

MAX_OFFSET = cython.declare(cython.Py_ssize_t, 0x7FFFFFFF)  # Arrow's offsets are int32
# A map's bytes kept for the next batch, at most (compiled, storage is reused: larger
# ones are let go rather than held between batches).
KEPT_BYTES = cython.declare(cython.Py_ssize_t, 1 << 20)
# A list of structs kept in Arrow's layout has at most this many (integer) fields.
MAX_STRUCT_FIELDS = 4
# A map entry's span (add_span): its key's start and stop, its value's, as native int32.
_SPAN = struct.Struct("=4i")
SPAN_BYTES = cython.declare(cython.Py_ssize_t, _SPAN.size)


@cython.cfunc
@cython.exceptval(-1, check=False)
def whole_spans(spans: bytearray) -> cython.int:
    """Check that ``spans`` holds whole spans (see :func:`add_span`)."""
    if len(spans) % SPAN_BYTES:
        raise ValueError(f"spans of {len(spans)} bytes: not whole spans")
    return 0


@cython.ccall
@cython.exceptval(-1, check=False)
def add_span(
    spans: bytearray,
    key_start: cython.Py_ssize_t,
    key_stop: cython.Py_ssize_t,
    value_start: cython.Py_ssize_t,
    value_stop: cython.Py_ssize_t,
) -> cython.int:
    """Append one map entry's span to ``spans``, for :meth:`TextMap.add_spans`: where
    its key and its value are in the data that will be given with them (four int32)."""
    whole_spans(spans)
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


@cython.ccall
@cython.exceptval(-1, check=False)
def clear_spans(spans: bytearray) -> cython.int:
    """Empty ``spans`` for :func:`add_span` to fill again (a reader that reads message
    after message into one bytearray)."""
    if not cython.compiled:
        del spans[:]
        return 0
    PyByteArray_Resize(spans, 0)
    return 0


def list_storage(column: pa.Field, limit: cython.Py_ssize_t) -> ListRows:
    """The storage of a nested column, in Arrow's layout: a map of strings to strings
    (properties), or a list of structs of up to four integer fields (message ids), the
    nested shapes of the tables; any other is refused."""
    kind = column.type
    if pa.types.is_map(kind) and kind.key_type == pa.string() and kind.item_type == pa.string():
        return TextMap(limit)
    if pa.types.is_list(kind) and pa.types.is_struct(kind.value_type):
        fields = list(kind.value_type)
        if 0 < len(fields) <= MAX_STRUCT_FIELDS and all(
            pa.types.is_integer(field.type) for field in fields
        ):
            return IntStructs(limit, fields)
    raise TypeError(f"{column.name}: no storage for a nested column of type {kind}")


@cython.cclass
class ListRows:
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
        validity = None if self.filled == count else flag_bits(self.valid, 0, count, 1)
        offsets = copy(self.row_ends, 0, 4 * (count + 1))
        return pa.Array.from_buffers(kind, count, [validity, offsets], children=[child])

    @cython.cfunc
    @cython.exceptval(-1, check=False)
    def recycle(self, rows: cython.Py_ssize_t) -> cython.int:
        """Empty, after a batch became arrays (``rows``: how many rows may hold a value)."""
        self.valid[:rows] = bytes(rows)
        self.entries = self.recorded = self.filled = 0
        return 0


@cython.cclass
class TextMap(ListRows):
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
    def add_spans(self, at: cython.Py_ssize_t, data: bytes, spans: bytearray) -> cython.int:
        """An entry of row ``at`` (begun) per span of ``spans`` (whole: see
        :func:`whole_spans`), its key and value ``data``'s bytes there; a span beyond the
        data: the row keeps none of them."""
        i: cython.Py_ssize_t
        try:
            for i in range(0, len(spans) // 4, 4):
                self.add(
                    at,
                    data,
                    _integer_at(spans, i, 4),
                    _integer_at(spans, i + 1, 4),
                    data,
                    _integer_at(spans, i + 2, 4),
                    _integer_at(spans, i + 3, 4),
                )
        except BaseException:
            self.clear(at)
            raise
        return 0

    @cython.cfunc
    @cython.exceptval(-1, check=False)
    def put(self, at: cython.Py_ssize_t, value: object, name: str) -> cython.int:
        """A map's (key, value) pairs or dict into row ``at`` of this map (begun)."""
        for pair in value.items() if isinstance(value, dict) else value:
            key, item = pair
            if key is None:
                raise TypeError(f"{name}: a map's key is never null")
            key_data: bytes = encode(key, True, name)
            item_data: bytes = None if item is None else encode(item, True, name)
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
        item_validity = validity(self.item_valid, entries)
        items = _texts(kind.item_type, entries, item_validity, self.items, self.item_ends)
        structs = pa.Array.from_buffers(
            pa.struct([kind.key_field, kind.item_field]), entries, [None], children=[keys, items]
        )
        return self._list_array(count, kind, structs)

    @cython.cfunc
    @cython.exceptval(-1, check=False)
    def recycle(self, rows: cython.Py_ssize_t) -> cython.int:
        ListRows.recycle(self, rows)
        if len(self.keys) > KEPT_BYTES:
            self.keys = bytearray()
        if len(self.items) > KEPT_BYTES:
            self.items = bytearray()
        return 0


@cython.cclass
class IntStructs(ListRows):
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
            present_bits = validity(present, entries)
            children.append(integers(field, entries, present_bits, slots, present, 0))
        structs = pa.Array.from_buffers(
            kind.value_type, entries, [validity(self.element_valid, entries)], children=children
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
    kind: pa.DataType, count: cython.Py_ssize_t, bits: Any, data: bytearray, ends: bytearray
) -> pa.Array:
    """A string array of the first ``count`` texts of ``data``, each ending at its int32
    of ``ends`` (after a 0), copied."""
    offsets = copy(ends, 0, 4 * (count + 1))
    return pa.Array.from_buffers(
        kind, count, [bits, offsets, copy(data, 0, _integer_at(ends, count, 4))]
    )
