# cython: annotation_typing=True, initializedcheck=False
# (initializedcheck: the constructor sets every memoryview, before any row.)
"""The text columns of a table (strings, then binaries): each column's values as their
bytes end to end, with the end offset of each row beside them (Arrow's offsets buffer,
filled as rows arrive) and a validity byte per row.

A row that sets no value takes no bytes: its end offset is the last value's, recorded
when a later row sets one or the batch is taken. Compiled, a column's bytes grow by
doubling and only the part the offsets reach holds values; they are kept for the next
batch up to :data:`KEPT_TEXT_BYTES` (larger ones, kept payloads, are let go).
"""

from __future__ import annotations

import cython
import pyarrow as pa

if cython.compiled:  # a value is copied to its column's bytes with memcpy
    from cython.cimports.cpython.bytearray import PyByteArray_AS_STRING, PyByteArray_Resize
    from cython.cimports.cpython.bytes import PyBytes_AS_STRING, PyBytes_FromStringAndSize
    from cython.cimports.cpython.unicode import PyUnicode_AsUTF8AndSize, PyUnicode_DecodeUTF8
    from cython.cimports.libc.string import memcpy, memset
    from cython.cimports.pwcap.tables.arrow_copy import copy, flag_bits
else:
    from .arrow_copy import copy, flag_bits

MAX_OFFSET = cython.declare(cython.Py_ssize_t, 0x7FFFFFFF)  # Arrow's offsets are int32
# A column's bytes kept for the next batch, at most (compiled, storage is reused).
KEPT_TEXT_BYTES = cython.declare(cython.Py_ssize_t, 1 << 20)
_TEXT_TYPES = (bytes, bytearray, memoryview)


@cython.cclass  # final (texts.pxd): its C methods are called directly, not via a vtable
class TextColumns:
    """The text columns ``names`` (the first ``strings`` of them strings, the rest
    binaries), ``limit`` rows each."""

    def __init__(
        self, names: list[str], strings: cython.Py_ssize_t, limit: cython.Py_ssize_t
    ) -> None:
        columns: cython.Py_ssize_t = max(1, len(names))
        self.names = names
        self.strings = strings
        self.limit = limit
        self.text = [bytearray() for _ in range(columns)]
        self.ends_bytes = bytearray(4 * columns * (limit + 1))
        self.ends = memoryview(self.ends_bytes).cast("i", (columns, limit + 1))
        self.recorded = memoryview(bytearray(8 * columns)).cast("q")
        self.valid_bytes = bytearray(columns * limit)
        self.valid = memoryview(self.valid_bytes).cast("B", (columns, limit))
        self.filled = memoryview(bytearray(8 * columns)).cast("q")

    @cython.cfunc
    @cython.exceptval(check=False)  # raises nothing
    @cython.boundscheck(False)  # the caller's column index and row: checked against the limit
    @cython.wraparound(False)
    def has(self, index: cython.Py_ssize_t, at: cython.Py_ssize_t) -> cython.bint:
        return self.valid[index, at] != 0

    @cython.cfunc
    @cython.exceptval(-1, check=True)
    def put(
        self, index: cython.Py_ssize_t, at: cython.Py_ssize_t, value: object
    ) -> cython.Py_ssize_t:
        """Row ``at`` of column ``index`` is ``value`` (str for a string column: its UTF-8;
        bytes-like: as they are, UTF-8 for a string column); returns how many more bytes
        the columns hold."""
        size: cython.Py_ssize_t = 0
        encoded: bytes = None
        if cython.compiled:  # a str's UTF-8 is read where the str keeps it: no bytes made
            source: cython.p_const_char
            if type(value) is str:
                source = PyUnicode_AsUTF8AndSize(value, cython.address(size))
            else:
                encoded = encode(value, index < self.strings, self.names[index])
                source = PyBytes_AS_STRING(encoded)
                size = len(encoded)
            return self.append(index, at, source, size, encoded)
        encoded = encode(value, index < self.strings, self.names[index])
        return self.append(index, at, None, len(encoded), encoded)

    @cython.cfunc
    @cython.exceptval(-1, check=True)
    @cython.boundscheck(False)  # as has
    @cython.wraparound(False)
    def append(
        self,
        index: cython.Py_ssize_t,
        at: cython.Py_ssize_t,
        source: cython.p_const_char,
        size: cython.Py_ssize_t,
        encoded: object,
    ) -> cython.Py_ssize_t:
        """Append one value's ``size`` bytes (compiled: at ``source``; interpreted:
        ``encoded``) as row ``at``'s value, replacing one it had; the rows since the
        column's last value are null (their end offsets stay where it ended). Returns how
        many more bytes the columns hold.

        Compiled, a column's bytearray grows by doubling and only its first ``end`` bytes
        are values (the rest is room for more): resizing it for every value cost more
        than copying the value."""
        freed: cython.Py_ssize_t = 0
        if self.recorded[index] == at + 1:  # the row has a value already: it goes
            freed = self.clear(index, at)
        data: bytearray = self.text[index]
        end: cython.Py_ssize_t = self.end_nulls(index, at) + size
        if end > MAX_OFFSET:
            raise OverflowError(f"{self.names[index]}: over 2 GiB of values in one batch")
        if cython.compiled:  # what `data += encoded` does, without its buffer protocol
            if end > len(data):
                PyByteArray_Resize(data, max(end, min(2 * len(data), MAX_OFFSET)))
            memcpy(PyByteArray_AS_STRING(data) + end - size, source, size)
        else:
            data += encoded
        self.ends[index, at + 1] = end
        self.recorded[index] = at + 1
        self.valid[index, at] = 1
        self.filled[index] += 1
        return size - freed

    @cython.cfunc
    @cython.exceptval(-1, check=True)
    def copy_to(
        self,
        index: cython.Py_ssize_t,
        at: cython.Py_ssize_t,
        target: TextColumns,
        target_index: cython.Py_ssize_t,
        target_at: cython.Py_ssize_t,
    ) -> cython.Py_ssize_t:
        """Row ``at``'s value in column ``index`` (set) becomes row ``target_at``'s in
        ``target``'s column ``target_index``, its bytes copied (no str made); returns how
        many more bytes ``target`` holds."""
        start: cython.Py_ssize_t = self.ends[index, at]
        stop: cython.Py_ssize_t = self.ends[index, at + 1]
        data: bytearray = self.text[index]
        if start < 0 or stop < start or stop > len(data):
            raise IndexError(f"text {start}:{stop} beyond the {len(data)} bytes kept")
        if cython.compiled:
            value: cython.p_const_char = PyByteArray_AS_STRING(data) + start
            return target.append(target_index, target_at, value, stop - start, None)
        return target.append(target_index, target_at, None, stop - start, bytes(data[start:stop]))

    @cython.cfunc
    @cython.exceptval(-1, check=True)
    @cython.boundscheck(False)  # as has
    @cython.wraparound(False)
    def clear(self, index: cython.Py_ssize_t, at: cython.Py_ssize_t) -> cython.Py_ssize_t:
        """Row ``at`` of column ``index`` (set) is null again: its end goes back to where
        its value began. Returns the bytes it held."""
        start: cython.Py_ssize_t = self.ends[index, at]
        freed: cython.Py_ssize_t = self.ends[index, at + 1] - start
        self.recorded[index] = at
        self.valid[index, at] = 0
        self.filled[index] -= 1
        if not cython.compiled:  # interpreted, a column's bytes end where its values do
            del cython.cast(bytearray, self.text[index])[start:]
        return freed

    @cython.cfunc
    @cython.boundscheck(False)  # a column's index; rows up to the limit: its ends' width
    @cython.wraparound(False)
    @cython.exceptval(-1, check=True)
    def end_nulls(self, index: cython.Py_ssize_t, upto: cython.Py_ssize_t) -> cython.Py_ssize_t:
        """Record the end offset of column ``index``'s rows before row ``upto`` that set
        no value: where its values end now (a null takes no bytes), returned."""
        recorded: cython.Py_ssize_t = self.recorded[index]
        end: cython.Py_ssize_t = self.ends[index, recorded]
        while recorded < upto:
            recorded += 1
            self.ends[index, recorded] = end
        self.recorded[index] = recorded
        return end

    @cython.cfunc
    def value(self, index: cython.Py_ssize_t, at: cython.Py_ssize_t) -> object:
        """Row ``at``'s value in column ``index`` (set): str for a string column, bytes
        for a binary one."""
        data: bytearray = self.text[index]
        start: cython.Py_ssize_t = self.ends[index, at]
        size: cython.Py_ssize_t = self.ends[index, at + 1] - start
        string: cython.bint = index < self.strings
        if not cython.compiled:
            value = bytes(data[start : start + size])
            return value.decode() if string else value
        if start < 0 or size < 0 or start + size > len(data):
            raise IndexError(f"text {start}:{start + size} beyond the {len(data)} bytes kept")
        source: cython.p_const_char = PyByteArray_AS_STRING(data) + start  # made from it at once
        if string:
            return PyUnicode_DecodeUTF8(source, size, cython.NULL)
        return PyBytes_FromStringAndSize(source, size)

    def array(
        self, index: cython.Py_ssize_t, kind: pa.DataType, count: cython.Py_ssize_t
    ) -> pa.Array:
        """Column ``index``'s first ``count`` rows as an Arrow array (copies, compiled)."""
        filled: cython.Py_ssize_t = self.filled[index]
        if not filled:
            return pa.nulls(count, kind)
        data: bytearray = self.text[index]
        end: cython.Py_ssize_t = self.end_nulls(index, count)  # nulls after its last value
        validity = None
        if filled < count:
            validity = flag_bits(self.valid_bytes, index * self.limit, count, 1)
        width: cython.Py_ssize_t = 4 * (self.limit + 1)  # a column's offsets: contiguous
        if cython.compiled:
            values = copy(data, 0, end)
            offsets = copy(self.ends_bytes, index * width, 4 * (count + 1))
        else:
            del data[end:]
            offsets = pa.py_buffer(memoryview(self.ends_bytes)[index * width :][: 4 * (count + 1)])
            values = pa.py_buffer(data)
        return pa.Array.from_buffers(kind, count, [validity, offsets, values])

    @cython.cfunc
    @cython.exceptval(-1, check=False)
    def recycle(self, rows: cython.Py_ssize_t) -> cython.int:
        """(Compiled.) Empty, for the next batch (``rows``: how many rows may be set)."""
        i: cython.Py_ssize_t
        for i in range(len(self.text)):
            if self.filled[i]:
                memset(cython.address(self.valid[i, 0]), 0, rows)
                self.filled[i] = 0
            self.recorded[i] = 0
            if len(cython.cast(bytearray, self.text[i])) > KEPT_TEXT_BYTES:
                self.text[i] = bytearray()
        return 0


@cython.cfunc
def encode(value: object, string: cython.bint, column: str) -> bytes:
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
