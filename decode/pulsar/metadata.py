# cython: annotation_typing=True
"""Message metadata of the common shape, read straight from its wire bytes.

Every payload frame carries a ``MessageMetadata`` and every batched message a
``SingleMessageMetadata``; most carry a handful of scalar fields and a few properties.
:func:`read_metadata` and :func:`read_single` read those with the
:class:`pwcap.decode.wire.Fields` cursor into
objects that answer the attribute reads :mod:`pwcap.decode.pulsar.messages` makes, as the
generated classes would. Anything else (another field, a field twice, a wire type out
of place, an enum value the schema lacks, text that is not UTF-8, a required field
missing, damage) makes them return None, and the caller parses the bytes with the
generated classes, which also say what is wrong. A test holds both readings equal.
"""

from __future__ import annotations

import cython
from pwcap.decode.pulsar._pb.pulsar_api_pb2 import CompressionType
from pwcap.decode.wire import LENGTH_DELIMITED, VARINT

if cython.compiled:  # the C declarations (wire.pxd, hot.pxd): these are C calls
    from cython.cimports.cpython.bytes import PyBytes_AS_STRING
    from cython.cimports.cpython.unicode import PyUnicode_DecodeUTF8
    from cython.cimports.pwcap.decode.pulsar.hot import int32
    from cython.cimports.pwcap.decode.wire import Fields, cursor
else:
    from pwcap.decode.pulsar.hot import int32
    from pwcap.decode.wire import Fields, cursor

# Compiled, C constants: a module global is a dict lookup at every use.
WIRE_VARINT = cython.declare(cython.int, VARINT)
WIRE_LENGTH_DELIMITED = cython.declare(cython.int, LENGTH_DELIMITED)
CODECS = cython.declare(
    frozenset, frozenset(value.number for value in CompressionType.DESCRIPTOR.values)
)
U32_MASK = cython.declare(cython.ulonglong, (1 << 32) - 1)
# MessageMetadata: producer_name, sequence_id and publish_time are required.
_REQUIRED = (1 << 1) | (1 << 2) | (1 << 3)
_PAYLOAD_SIZE = 1 << 3  # SingleMessageMetadata's one required field


@cython.cclass
class _Plain:
    """One reading: the field walk both messages share, each field handed to
    :meth:`put`; ``seen`` has bit n set where field n was present. ``properties`` (the
    repeated field of both messages) are (key, value) pairs, in wire order."""

    seen = cython.declare(cython.ulonglong, visibility="readonly")
    properties = cython.declare(object, visibility="readonly")
    _required = cython.declare(cython.ulonglong)
    _repeated = cython.declare(cython.ulonglong)
    _pair = cython.declare(Fields)  # the cursor over a KeyValue, moved from one to the next

    def __init__(self, required: int, properties_field: int) -> None:
        self._start(required, properties_field)

    @cython.cfunc
    def _start(self, required: cython.ulonglong, properties_field: cython.int) -> cython.void:
        """Nothing read yet (a C call: a reading is made per entry and per batch member)."""
        self.seen = 0
        self.properties = ()
        self._required = required
        self._repeated = cython.cast(cython.ulonglong, 1) << properties_field

    @cython.ccall
    def read(self, data: bytes, start: cython.Py_ssize_t, end: cython.Py_ssize_t) -> cython.bint:
        """Fill in from ``data[start:end]``; False when these bytes are not this shape
        (a field twice, one :meth:`put` declines, a required one missing, damage)."""
        fields: Fields = cursor(data, start, end)
        number: cython.int
        bit: cython.ulonglong
        while True:
            number = fields.next()
            if number == 0:
                break
            if number > 63:
                return False
            bit = cython.cast(cython.ulonglong, 1) << number
            if self.seen & bit & ~self._repeated:  # the generated classes merge a field twice
                return False
            self.seen |= bit
            if not self.put(number, fields, data):
                return False
        return not fields.broken and self.seen & self._required == self._required

    @cython.ccall
    def put(self, number: cython.int, fields: Fields, data: bytes) -> cython.bint:
        """Keep field ``number`` (the cursor is on it); False when it is not this shape."""
        raise NotImplementedError

    @cython.cfunc
    def _property(self, fields: Fields, data: bytes) -> cython.bint:
        """One KeyValue of ``properties``; False unless exactly its key and value, as text."""
        if self._pair is None:
            self._pair = cursor(data, fields.start, fields.stop)
        else:
            self._pair.place(data, fields.start, fields.stop)
        pair = _key_value(self._pair, data)
        if pair is None:
            return False
        if self.properties:
            cython.cast(list, self.properties).append(pair)
        else:
            self.properties = [pair]
        return True


@cython.cclass
class PlainMetadata(_Plain):
    """A MessageMetadata holding only producer_name, sequence_id, publish_time,
    properties, partition_key, compression, uncompressed_size, num_messages_in_batch,
    event_time."""

    producer_name = cython.declare(str, visibility="readonly")
    sequence_id = cython.declare(object, visibility="readonly")
    publish_time = cython.declare(object, visibility="readonly")
    partition_key = cython.declare(str, visibility="readonly")
    compression = cython.declare(cython.int, visibility="readonly")
    uncompressed_size = cython.declare(object, visibility="readonly")
    num_messages_in_batch = cython.declare(object, visibility="readonly")
    event_time = cython.declare(object, visibility="readonly")
    # Fields this shape never holds, at their defaults.
    encryption_keys = ()
    ordering_key = b""
    replicated_from = ""
    null_value = False
    uuid = ""
    num_chunks_from_msg = 0
    chunk_id = 0
    total_chunk_msg_size = 0

    def __init__(self) -> None:
        self.producer_name = self.partition_key = ""
        self.sequence_id = self.publish_time = self.uncompressed_size = self.event_time = 0
        self.num_messages_in_batch = 1  # the schema's default
        self.compression = 0
        self._start(_REQUIRED, 4)

    def HasField(self, name: str) -> bool:
        number: cython.int = _METADATA_NUMBERS[name]
        return (self.seen >> number) & 1 == 1

    @cython.ccall
    def put(self, number: cython.int, fields: Fields, data: bytes) -> cython.bint:
        wire_type: cython.int = fields.wire_type
        if wire_type == WIRE_LENGTH_DELIMITED and number == 4:
            return self._property(fields, data)
        if wire_type == WIRE_LENGTH_DELIMITED and (number == 1 or number == 6):
            text = _utf8(data, fields.start, fields.stop)
            if text is None:
                return False
            if number == 1:
                self.producer_name = text
            else:
                self.partition_key = text
            return True
        if wire_type != WIRE_VARINT:
            return False
        value = fields.value
        if number == 2:
            self.sequence_id = value
        elif number == 3:
            self.publish_time = value
        elif number == 8 and value in CODECS:
            self.compression = value
        elif number == 9:
            self.uncompressed_size = value & U32_MASK
        elif number == 11:
            self.num_messages_in_batch = int32(value)
        elif number == 12:
            self.event_time = value
        else:
            return False
        return True


@cython.cclass
class PlainSingle(_Plain):
    """A SingleMessageMetadata holding only properties, payload_size, partition_key,
    event_time, ordering_key and sequence_id."""

    payload_size = cython.declare(object, visibility="readonly")
    partition_key = cython.declare(str, visibility="readonly")
    event_time = cython.declare(object, visibility="readonly")
    ordering_key = cython.declare(bytes, visibility="readonly")
    sequence_id = cython.declare(object, visibility="readonly")
    null_value = False

    def __init__(self) -> None:
        self.payload_size = self.event_time = self.sequence_id = 0
        self.partition_key = ""
        self.ordering_key = b""
        self._start(_PAYLOAD_SIZE, 1)

    def HasField(self, name: str) -> bool:
        number: cython.int = _SINGLE_NUMBERS[name]
        return (self.seen >> number) & 1 == 1

    @cython.ccall
    def put(self, number: cython.int, fields: Fields, data: bytes) -> cython.bint:
        wire_type: cython.int = fields.wire_type
        if wire_type == WIRE_LENGTH_DELIMITED and number == 1:
            return self._property(fields, data)
        if wire_type == WIRE_LENGTH_DELIMITED and number == 2:
            text = _utf8(data, fields.start, fields.stop)
            if text is None:
                return False
            self.partition_key = text
        elif wire_type == WIRE_LENGTH_DELIMITED and number == 7:
            self.ordering_key = data[fields.start : fields.stop]
        elif wire_type != WIRE_VARINT:
            return False
        elif number == 3:
            self.payload_size = int32(fields.value)
        elif number == 5:
            self.event_time = fields.value
        elif number == 8:
            self.sequence_id = fields.value
        else:
            return False
        return True


_METADATA_NUMBERS = {
    "producer_name": 1,
    "sequence_id": 2,
    "publish_time": 3,
    "partition_key": 6,
    "compression": 8,
    "uncompressed_size": 9,
    "num_messages_in_batch": 11,
    "event_time": 12,
    "uuid": 26,
}
_SINGLE_NUMBERS = {
    "partition_key": 2,
    "payload_size": 3,
    "event_time": 5,
    "ordering_key": 7,
    "sequence_id": 8,
}


def read_metadata(data: bytes, start: int, end: int) -> PlainMetadata | None:
    """The MessageMetadata in ``data[start:end]`` as a :class:`PlainMetadata`, or None."""
    md = PlainMetadata()
    return md if md.read(data, start, end) else None


def read_single(data: bytes, start: int, end: int) -> PlainSingle | None:
    """The SingleMessageMetadata in ``data[start:end]`` as a :class:`PlainSingle`, or None."""
    single = PlainSingle()
    return single if single.read(data, start, end) else None


@cython.cfunc
def _key_value(fields: Fields, data: bytes) -> object:
    """The KeyValue ``fields`` is placed on, as (key, value): both required, each once,
    both UTF-8; else None."""
    key = value = None
    number: cython.int
    while True:
        number = fields.next()
        if number == 0:
            break
        if fields.wire_type != WIRE_LENGTH_DELIMITED:
            return None
        if number == 1 and key is None:
            key = _utf8(data, fields.start, fields.stop)
            if key is None:
                return None
        elif number == 2 and value is None:
            value = _utf8(data, fields.start, fields.stop)
            if value is None:
                return None
        else:
            return None
    if fields.broken or key is None or value is None:
        return None
    return (key, value)


@cython.cfunc
def _utf8(data: bytes, start: cython.Py_ssize_t, stop: cython.Py_ssize_t) -> object:
    """The text of a string field, or None when it is not UTF-8 (the generated classes
    then decide what it reads as). Compiled, decoded in place: no bytes object between."""
    if start < 0 or stop < start or stop > len(data):
        raise ValueError(f"bytes {start}:{stop} are not within the {len(data)} given")
    try:
        if not cython.compiled:
            return data[start:stop].decode()
        return PyUnicode_DecodeUTF8(PyBytes_AS_STRING(data) + start, stop - start, cython.NULL)
    except UnicodeDecodeError:
        return None
