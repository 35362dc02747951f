# cython: annotation_typing=True
"""Protobuf's wire format, read field by field out of untrusted bytes.

The generated protobuf classes decode whole messages; the hot path reads a few fields of
the commands it sees millions of times, so it walks their bytes with a :class:`Fields`
cursor instead (see :mod:`pwcap.decode.pulsar.hot`). :func:`read_varint` is the one
base-128 varint reader of the project (snappy's length preamble is one too). The numbers
such a reader compares fields with are the schema's, read from the generated descriptors
by :func:`field_number`, never written by hand.

Compiled by Cython, the cursor runs on C integers over the bytes' buffer; every read is
checked against the end of the message first, so no input reads past it. Interpreted,
the same code runs on Python integers and gives the same values.
"""

from __future__ import annotations

from typing import Any

import cython
from google.protobuf.descriptor import FieldDescriptor

VARINT = 0
FIXED64 = 1
LENGTH_DELIMITED = 2
START_GROUP = 3
FIXED32 = 5
MAX_VARINT_BYTES = 10  # 64 bits, 7 per byte
SNAPPY_LENGTH_BYTES = 5  # a raw snappy block's length preamble: a varint of 32 bits
U64_MASK = (1 << 64) - 1
# The wire types again, as C constants when compiled: the cursor compares each field's
# with them, and a module global is a dict lookup and a boxed comparison at every use.
_VARINT = cython.declare(cython.int, VARINT)
_FIXED64 = cython.declare(cython.int, FIXED64)
_LENGTH_DELIMITED = cython.declare(cython.int, LENGTH_DELIMITED)
_FIXED32 = cython.declare(cython.int, FIXED32)


class WireError(ValueError):
    """Bytes that are not the field or varint they should be."""


class SchemaMismatch(LookupError):
    """A reader expects a field the schema does not have, or not with that wire type."""


# The declared types by the wire type their values travel with (the rest are varints).
_FIXED64_TYPES = frozenset(
    {FieldDescriptor.TYPE_FIXED64, FieldDescriptor.TYPE_SFIXED64, FieldDescriptor.TYPE_DOUBLE}
)
_FIXED32_TYPES = frozenset(
    {FieldDescriptor.TYPE_FIXED32, FieldDescriptor.TYPE_SFIXED32, FieldDescriptor.TYPE_FLOAT}
)
_DELIMITED_TYPES = frozenset(
    {FieldDescriptor.TYPE_STRING, FieldDescriptor.TYPE_BYTES, FieldDescriptor.TYPE_MESSAGE}
)


def wire_type(field: FieldDescriptor) -> int:
    """The wire type a declared field's values travel with (a packed repeated field's are
    one length-delimited run)."""
    if field.is_packed or field.type in _DELIMITED_TYPES:
        return LENGTH_DELIMITED
    if field.type in _FIXED64_TYPES:
        return FIXED64
    if field.type in _FIXED32_TYPES:
        return FIXED32
    if field.type == FieldDescriptor.TYPE_GROUP:
        return START_GROUP
    return VARINT  # the integers, bool and enum


def field_number(message: Any, name: str, wire: int) -> int:
    """The number of field ``name`` of the generated class ``message``, read from the
    schema, checked to travel as ``wire``.

    The readers that walk a message's bytes compare each field's number with these, so
    the ``.proto`` (regenerated) is the one place a protocol update is made. A field the
    schema renames, drops or gives another wire type fails here, when the reader is
    imported, rather than being misread on the wire.
    """
    field = message.DESCRIPTOR.fields_by_name.get(name)
    if field is None:
        raise SchemaMismatch(f"{message.DESCRIPTOR.full_name} has no field {name!r}")
    if wire_type(field) != wire:
        raise SchemaMismatch(
            f"{field.full_name} travels as wire type {wire_type(field)}, not {wire}"
        )
    return field.number


def tag(number: int, wire: int) -> bytes:
    """The key a field opens with on the wire: its number and wire type, as a varint."""
    key = number << 3 | wire
    encoded = bytearray()
    while key > 0x7F:
        encoded.append(key & 0x7F | 0x80)
        key >>= 7
    encoded.append(key)
    return bytes(encoded)


def read_varint(
    data: bytes, pos: int, end: int, max_bytes: int = MAX_VARINT_BYTES
) -> tuple[int, int]:
    """The varint at ``data[pos]`` read within ``data[:end]`` and ``max_bytes``: (value, next)."""
    cursor = Fields(data, pos, min(end, pos + max_bytes))
    value = cursor.varint()
    if cursor.broken:
        raise WireError(f"no valid varint at byte {pos}")
    return value, cursor.pos


def snappy_length(data: bytes | memoryview) -> int:
    """The uncompressed length a raw snappy block opens with (a varint)."""
    preamble = bytes(data[:SNAPPY_LENGTH_BYTES])
    return read_varint(preamble, 0, len(preamble))[0]


@cython.cclass
class Fields:
    """A cursor over the fields of one message, ``data[pos:end]``.

    :meth:`next` steps to the next field and returns its number (0 at the end); its
    value is then in ``value`` (a varint, or a fixed-size integer) or, for a
    length-delimited field, between ``start`` and ``stop``. Damage (a truncated field, a
    varint over 64 bits, a wire type that does not exist) sets ``broken`` and ends the
    walk: the caller then leaves the message to the generated classes, which say why.

    Its fields' C types are in ``wire.pxd``, where the other compiled modules read them.
    """

    def __init__(self, data: bytes, pos: cython.Py_ssize_t, end: cython.Py_ssize_t) -> None:
        self.place(data, pos, end)

    @cython.cfunc
    @cython.exceptval(-1, check=False)
    def place(self, data: bytes, pos: cython.Py_ssize_t, end: cython.Py_ssize_t) -> cython.int:
        """Start over on the fields of ``data[pos:end]`` (a reader that walks many
        messages moves one cursor so instead of making one per message)."""
        if pos < 0 or end > len(data) or pos > end:
            raise WireError(f"bytes {pos}:{end} are not within the {len(data)} given")
        self.data = data
        self.pos = pos
        self.end = end
        self.wire_type = 0
        self.value = 0
        self.start = self.stop = 0
        self.broken = False
        return 0

    @cython.ccall
    def varint(self) -> cython.ulonglong:
        """The varint at the cursor (0 and ``broken`` when there is none)."""
        data: bytes = self.data
        pos: cython.Py_ssize_t = self.pos
        end: cython.Py_ssize_t = self.end
        value: cython.ulonglong = 0
        shift: cython.int = 0
        byte: cython.ulonglong
        while pos < end:
            byte = data[pos]
            pos += 1
            if shift == 63 and byte > 1:  # a tenth byte beyond the 64th bit
                break
            value |= (byte & 0x7F) << shift
            if byte < 0x80:
                self.pos = pos
                return value
            shift += 7
            if shift > 63:
                break
        self.broken = True
        return 0

    @cython.ccall
    def next(self) -> cython.int:
        """Step to the next field: its number, or 0 at the end of the message or damage."""
        if self.pos >= self.end or self.broken:
            return 0
        key: cython.ulonglong = self.varint()
        number: cython.ulonglong = key >> 3
        if self.broken or number == 0 or number > 0x1FFFFFFF:
            self.broken = True
            return 0
        wire_type: cython.int = key & 7
        self.wire_type = wire_type
        if wire_type == _VARINT:
            self.value = self.varint()
        elif wire_type == _LENGTH_DELIMITED:
            size: cython.ulonglong = self.varint()
            if not self.broken and size <= cython.cast(cython.ulonglong, self.end - self.pos):
                self.start = self.pos
                self.stop = self.pos + size
                self.pos = self.stop
            else:
                self.broken = True
        elif wire_type in (_FIXED64, _FIXED32):
            self.value = self._fixed(8 if wire_type == _FIXED64 else 4)
        else:  # groups (3, 4) and the undefined 6 and 7
            self.broken = True
        return 0 if self.broken else number

    @cython.cfunc
    def _fixed(self, size: cython.Py_ssize_t) -> cython.ulonglong:
        if self.end - self.pos < size:
            self.broken = True
            return 0
        data: bytes = self.data
        value: cython.ulonglong = 0
        i: cython.Py_ssize_t
        for i in range(size - 1, -1, -1):  # little-endian
            value = (value << 8) | data[self.pos + i]
        self.pos += size
        return value


@cython.ccall
def cursor(data: bytes, pos: cython.Py_ssize_t, end: cython.Py_ssize_t) -> Fields:
    """``Fields(data, pos, end)``; compiled, without the Python call that constructs it."""
    fields: Fields = Fields.__new__(Fields)
    fields.place(data, pos, end)
    return fields


def text(value: str | bytes) -> str:
    """A protobuf string as a str. The parser hands back bytes when a string field is not
    valid UTF-8 (damage: commands carry no checksum); the text stays readable, escaped."""
    if isinstance(value, str):
        return value
    return value.decode("utf-8", "backslashreplace")
