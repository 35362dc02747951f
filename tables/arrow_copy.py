# cython: annotation_typing=True
"""The copy-out to Arrow: a batch's values, kept in Arrow's layout by the column storages
(:mod:`.slots`, :mod:`.texts`, :mod:`.nested`), become Arrow buffers.

Compiled, every buffer is a copy made in C, so the storage can be reused for the next
batch; interpreted, buffers are views of the storage, which is then made anew. A value
out of a narrower column type's range is an error here, never wrapped.
"""

from __future__ import annotations

from typing import Any

import cython
import pyarrow as pa

if cython.compiled:
    from cython.cimports.cpython.bytearray import PyByteArray_AS_STRING
    from cython.cimports.libc.string import memcpy

INT32_MIN = cython.declare(cython.longlong, -0x80000000)
INT32_MAX = cython.declare(cython.longlong, 0x7FFFFFFF)


@cython.cfunc
def copy(buffer: bytearray, start: cython.Py_ssize_t, size: cython.Py_ssize_t) -> object:
    """Bytes ``start`` to ``start + size`` of ``buffer`` as a new Arrow buffer."""
    if start < 0 or size < 0 or start + size > len(buffer):
        raise IndexError(f"{size} bytes from {start} of a buffer of {len(buffer)}")
    if not cython.compiled:
        return pa.py_buffer(bytes(buffer[start : start + size]))
    copied = pa.allocate_buffer(size)
    memcpy(_address(copied), PyByteArray_AS_STRING(buffer) + start, size)
    return copied


def integers(
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
def validity(flags: bytearray, count: cython.Py_ssize_t) -> object:
    """Arrow's validity bits of the first ``count`` flags; None when none is 0."""
    if flags.find(0, 0, count) < 0:
        return None
    return flag_bits(flags, 0, count, 1)


@cython.cfunc
def flag_bits(
    flags: bytearray,
    start: cython.Py_ssize_t,
    count: cython.Py_ssize_t,
    width: cython.Py_ssize_t,
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
