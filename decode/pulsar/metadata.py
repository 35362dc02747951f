# cython: annotation_typing=True
"""Message metadata as the entry decoder reads it, straight from its wire bytes when it
has the common shape.

Every payload frame carries a ``MessageMetadata`` and every batched message a
``SingleMessageMetadata``; most carry a handful of scalar fields and a few properties.
:func:`read_metadata` and :func:`read_single` read those with the
:class:`pwcap.decode.wire.Fields` cursor into an :class:`EntryMetadata` or a
:class:`MemberMetadata`, whose fields answer as the generated classes would; a field the
decoder never reads is skipped. Anything else (encryption keys, a field it reads given
twice or with a wire type out of place, an enum value the schema lacks, text that is not
UTF-8, a required field missing, damage) makes them return None:
the caller parses the bytes with the generated classes, which also say what is wrong,
and hands their reading to :func:`entry_from_generated` / :func:`member_from_generated`.
The entry decoder so reads one type either way (compiled: C fields, ``metadata.pxd``).
A test holds the readings equal.
"""

from __future__ import annotations

from typing import Any

import cython

from ..wire import LENGTH_DELIMITED, VARINT, field_number, text
from ._pb.pulsar_api_pb2 import (
    CompressionType,
    KeyValue,
    MessageMetadata,
    SingleMessageMetadata,
)

if cython.compiled:  # the C declarations (wire.pxd, hot.pxd): these are C calls
    from cython.cimports.cpython.bytes import PyBytes_AS_STRING
    from cython.cimports.cpython.unicode import PyUnicode_DecodeUTF8
    from cython.cimports.pwcap.decode.pulsar.hot import int32
    from cython.cimports.pwcap.decode.wire import Fields, cursor
    from cython.cimports.pwcap.tables.nested import add_span, clear_spans
else:
    from ...tables.nested import add_span, clear_spans
    from ..wire import Fields, cursor
    from .hot import int32

# Compiled, C constants: a module global is a dict lookup at every use.
WIRE_VARINT = cython.declare(cython.int, VARINT)
WIRE_LENGTH_DELIMITED = cython.declare(cython.int, LENGTH_DELIMITED)
CODECS = cython.declare(
    frozenset, frozenset(value.number for value in CompressionType.DESCRIPTOR.values)
)
U32_MASK = cython.declare(cython.ulonglong, (1 << 32) - 1)


def _bits(*numbers: int) -> int:
    """Field numbers as bits of a C integer (a number past 63 does not fit: an error)."""
    return sum(1 << number for number in numbers)


def _required(message: Any) -> int:
    """The required fields of a generated class, as :func:`_bits`."""
    return _bits(*(f.number for f in message.DESCRIPTOR.fields if f.is_required))


# The fields read, by number, from the schema (field_number checks each one's wire type
# is the one the reader expects). Compiled, C globals set once at import, not module
# globals looked up at every entry.
ENTRY_PRODUCER_NAME = cython.declare(
    cython.int, field_number(MessageMetadata, "producer_name", LENGTH_DELIMITED)
)
ENTRY_SEQUENCE_ID = cython.declare(cython.int, field_number(MessageMetadata, "sequence_id", VARINT))
ENTRY_PUBLISH_TIME = cython.declare(
    cython.int, field_number(MessageMetadata, "publish_time", VARINT)
)
ENTRY_PROPERTIES = cython.declare(
    cython.int, field_number(MessageMetadata, "properties", LENGTH_DELIMITED)
)
ENTRY_REPLICATED_FROM = cython.declare(
    cython.int, field_number(MessageMetadata, "replicated_from", LENGTH_DELIMITED)
)
ENTRY_PARTITION_KEY = cython.declare(
    cython.int, field_number(MessageMetadata, "partition_key", LENGTH_DELIMITED)
)
ENTRY_COMPRESSION = cython.declare(cython.int, field_number(MessageMetadata, "compression", VARINT))
ENTRY_UNCOMPRESSED_SIZE = cython.declare(
    cython.int, field_number(MessageMetadata, "uncompressed_size", VARINT)
)
ENTRY_NUM_MESSAGES_IN_BATCH = cython.declare(
    cython.int, field_number(MessageMetadata, "num_messages_in_batch", VARINT)
)
ENTRY_EVENT_TIME = cython.declare(cython.int, field_number(MessageMetadata, "event_time", VARINT))
ENTRY_ENCRYPTION_KEYS = cython.declare(
    cython.int, field_number(MessageMetadata, "encryption_keys", LENGTH_DELIMITED)
)
ENTRY_ORDERING_KEY = cython.declare(
    cython.int, field_number(MessageMetadata, "ordering_key", LENGTH_DELIMITED)
)
ENTRY_NULL_VALUE = cython.declare(cython.int, field_number(MessageMetadata, "null_value", VARINT))
ENTRY_UUID = cython.declare(cython.int, field_number(MessageMetadata, "uuid", LENGTH_DELIMITED))
ENTRY_NUM_CHUNKS_FROM_MSG = cython.declare(
    cython.int, field_number(MessageMetadata, "num_chunks_from_msg", VARINT)
)
ENTRY_TOTAL_CHUNK_MSG_SIZE = cython.declare(
    cython.int, field_number(MessageMetadata, "total_chunk_msg_size", VARINT)
)
ENTRY_CHUNK_ID = cython.declare(cython.int, field_number(MessageMetadata, "chunk_id", VARINT))
MEMBER_PROPERTIES = cython.declare(
    cython.int, field_number(SingleMessageMetadata, "properties", LENGTH_DELIMITED)
)
MEMBER_PARTITION_KEY = cython.declare(
    cython.int, field_number(SingleMessageMetadata, "partition_key", LENGTH_DELIMITED)
)
MEMBER_PAYLOAD_SIZE = cython.declare(
    cython.int, field_number(SingleMessageMetadata, "payload_size", VARINT)
)
MEMBER_EVENT_TIME = cython.declare(
    cython.int, field_number(SingleMessageMetadata, "event_time", VARINT)
)
MEMBER_ORDERING_KEY = cython.declare(
    cython.int, field_number(SingleMessageMetadata, "ordering_key", LENGTH_DELIMITED)
)
MEMBER_SEQUENCE_ID = cython.declare(
    cython.int, field_number(SingleMessageMetadata, "sequence_id", VARINT)
)
MEMBER_NULL_VALUE = cython.declare(
    cython.int, field_number(SingleMessageMetadata, "null_value", VARINT)
)
PAIR_KEY = cython.declare(cython.int, field_number(KeyValue, "key", LENGTH_DELIMITED))
PAIR_VALUE = cython.declare(cython.int, field_number(KeyValue, "value", LENGTH_DELIMITED))
# An entry's messages when it says nothing: the schema's default.
_BATCH_DEFAULT = cython.declare(
    object, MessageMetadata.DESCRIPTOR.fields_by_name["num_messages_in_batch"].default_value
)
# The fields each message must have, as bits by number (missing, the generated class
# refuses the bytes, so the wire reader declines them).
_ENTRY_REQUIRED = cython.declare(cython.ulonglong, _required(MessageMetadata))
_MEMBER_REQUIRED = cython.declare(cython.ulonglong, _required(SingleMessageMetadata))
# The fields the entry decoder reads, as bits by number: any other field the wire reader
# skips (schema_version, deliver_at_time, txnid_*, ...: the generated classes would keep
# them, unread; a field of the wrong wire type, or unknown, they would keep aside).
# Encryption keys are "read": their presence sends the entry to the generated class.
_ENTRY_READS = cython.declare(
    cython.ulonglong,
    _bits(
        ENTRY_PRODUCER_NAME,
        ENTRY_SEQUENCE_ID,
        ENTRY_PUBLISH_TIME,
        ENTRY_PROPERTIES,
        ENTRY_REPLICATED_FROM,
        ENTRY_PARTITION_KEY,
        ENTRY_COMPRESSION,
        ENTRY_UNCOMPRESSED_SIZE,
        ENTRY_NUM_MESSAGES_IN_BATCH,
        ENTRY_EVENT_TIME,
        ENTRY_ENCRYPTION_KEYS,
        ENTRY_ORDERING_KEY,
        ENTRY_NULL_VALUE,
        ENTRY_UUID,
        ENTRY_NUM_CHUNKS_FROM_MSG,
        ENTRY_TOTAL_CHUNK_MSG_SIZE,
        ENTRY_CHUNK_ID,
    ),
)
_MEMBER_READS = cython.declare(
    cython.ulonglong,
    _bits(
        MEMBER_PROPERTIES,
        MEMBER_PARTITION_KEY,
        MEMBER_PAYLOAD_SIZE,
        MEMBER_EVENT_TIME,
        MEMBER_ORDERING_KEY,
        MEMBER_SEQUENCE_ID,
        MEMBER_NULL_VALUE,
    ),
)


@cython.cfunc
def _unread(reads: cython.ulonglong, number: cython.int) -> cython.bint:
    """True (skipped) for a field the decoder never reads; False (declined: the generated
    class reads the metadata) for one it reads, here in a shape it does not expect."""
    return (reads >> number) & 1 == 0


@cython.cclass
class _Reading:
    """One message read: the field walk both messages share, each field handed to
    :meth:`put`; ``seen`` has bit n set where field n was present. The properties (the
    repeated field of both messages) are where they were read: ``pairs`` holds the span
    of each key and value in ``pairs_data``, in wire order (None: no properties), for
    :meth:`pwcap.tables.columns.ColumnBuffer.set_pairs` to copy them; :attr:`properties`
    makes them (key, value) pairs.

    Its fields' C types are in ``metadata.pxd``, where the entry decoder reads them.
    """

    @cython.cfunc
    def _new(self) -> cython.void:
        """No read yet: the cursors and the property spans, kept from one read to the next
        (a batch's members are read into one reading), are made at the first."""
        self._fields = self._pair = None
        self._spans = None

    @cython.cfunc
    def _start(self, required: cython.ulonglong, properties_field: cython.int) -> cython.void:
        """Nothing read yet (a C call: a reading is made per entry, or read again)."""
        self.seen = 0
        self.pairs_data = None
        self.pairs = None
        self._required = required
        self._repeated = cython.cast(cython.ulonglong, 1) << properties_field

    @cython.ccall
    def read(self, data: bytes, start: cython.Py_ssize_t, end: cython.Py_ssize_t) -> cython.bint:
        """Fill in from ``data[start:end]``; False when these bytes are not this shape
        (a field twice, one :meth:`put` declines, a required one missing, damage)."""
        fields: Fields = self._fields
        if fields is None:
            fields = self._fields = cursor(data, start, end)
        else:
            fields.place(data, start, end)
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
        """One KeyValue of the properties, its span kept; False unless exactly its key and
        its value, both UTF-8."""
        if self._pair is None:
            self._pair = cursor(data, fields.start, fields.stop)
        else:
            self._pair.place(data, fields.start, fields.stop)
        if self.pairs is None:  # the first: the spans of the last read are forgotten
            if self._spans is None:
                self._spans = bytearray()
            else:
                clear_spans(self._spans)
            self.pairs = self._spans
            self.pairs_data = data
        return _key_value(self._pair, data, self.pairs)

    @property
    def properties(self) -> list[tuple[str, str]]:
        """The properties as (key, value) pairs, in wire order ([] for none)."""
        found = []
        if self.pairs is not None:
            spans = memoryview(self.pairs).cast("i")
            data = self.pairs_data
            for i in range(0, len(spans), 4):
                key = data[spans[i] : spans[i + 1]].decode()
                found.append((key, data[spans[i + 2] : spans[i + 3]].decode()))
        return found

    @cython.cfunc
    def has(self, number: cython.int) -> cython.bint:
        """Whether field ``number`` was present (``HasField``, by number: a C call)."""
        return (self.seen >> number) & 1 == 1

    def _adopt(self, generated: Any, numbers: dict[str, int]) -> None:
        """What this reading takes over from the generated class's: presence and
        properties (the rest is each subclass's)."""
        for name, number in numbers.items():
            if generated.HasField(name):
                self.seen |= cython.cast(cython.ulonglong, 1) << number
        if generated.properties:  # laid end to end, to be read as the wire reader's are
            joined = bytearray()
            self.pairs = bytearray()
            for pair in generated.properties:
                key = text(pair.key).encode("utf-8", "backslashreplace")
                value = text(pair.value).encode("utf-8", "backslashreplace")
                start = len(joined)
                joined += key
                joined += value
                add_span(self.pairs, start, start + len(key), start + len(key), len(joined))
            self.pairs_data = bytes(joined)


@cython.cclass
class EntryMetadata(_Reading):
    """An entry's MessageMetadata as the entry decoder reads it: from the wire bytes
    (:func:`read_metadata`) unless they hold encryption keys or a field the decoder reads
    in another shape than the common one, else from the generated class's reading
    (:func:`entry_from_generated`). Text fields are str (escaped when not UTF-8)."""

    def __init__(self) -> None:
        self._new()
        self._defaults()

    @cython.cfunc
    def _defaults(self) -> cython.void:
        """Every field at its default, nothing read (a C call: :func:`read_metadata` makes
        one per entry without calling the class)."""
        self.producer_name = self.partition_key = ""
        self.sequence_id = self.publish_time = self.uncompressed_size = self.event_time = 0
        self.num_messages_in_batch = _BATCH_DEFAULT
        self.compression = 0
        self.encrypted = self.null_value = False
        self.ordering_key = b""
        self.replicated_from = self.uuid = ""
        self.num_chunks_from_msg = self.chunk_id = self.total_chunk_msg_size = 0
        self._start(_ENTRY_REQUIRED, ENTRY_PROPERTIES)

    def HasField(self, name: str) -> bool:
        return self.has(_METADATA_NUMBERS[name])

    @cython.ccall
    def put(self, number: cython.int, fields: Fields, data: bytes) -> cython.bint:
        wire_type: cython.int = fields.wire_type
        if wire_type == WIRE_LENGTH_DELIMITED:
            if number == ENTRY_PROPERTIES:
                return self._property(fields, data)
            if number in (
                ENTRY_PRODUCER_NAME,
                ENTRY_REPLICATED_FROM,
                ENTRY_PARTITION_KEY,
                ENTRY_UUID,
            ):
                decoded = _utf8(data, fields.start, fields.stop)
                if decoded is None:
                    return False
                if number == ENTRY_PRODUCER_NAME:
                    self.producer_name = decoded
                elif number == ENTRY_REPLICATED_FROM:
                    self.replicated_from = decoded
                elif number == ENTRY_PARTITION_KEY:
                    self.partition_key = decoded
                else:
                    self.uuid = decoded
                return True
            if number == ENTRY_ORDERING_KEY:
                self.ordering_key = data[fields.start : fields.stop]
                return True
            return _unread(_ENTRY_READS, number)
        if wire_type != WIRE_VARINT:
            return _unread(_ENTRY_READS, number)
        value = fields.value
        if number == ENTRY_SEQUENCE_ID:
            self.sequence_id = value
        elif number == ENTRY_PUBLISH_TIME:
            self.publish_time = value
        elif number == ENTRY_COMPRESSION and value in CODECS:
            self.compression = value
        elif number == ENTRY_UNCOMPRESSED_SIZE:
            self.uncompressed_size = value & U32_MASK
        elif number == ENTRY_NUM_MESSAGES_IN_BATCH:
            self.num_messages_in_batch = int32(value)
        elif number == ENTRY_EVENT_TIME:
            self.event_time = value
        elif number == ENTRY_NULL_VALUE:
            self.null_value = value != 0
        elif number == ENTRY_NUM_CHUNKS_FROM_MSG:
            self.num_chunks_from_msg = int32(value)
        elif number == ENTRY_TOTAL_CHUNK_MSG_SIZE:
            self.total_chunk_msg_size = int32(value)
        elif number == ENTRY_CHUNK_ID:
            self.chunk_id = int32(value)
        else:
            return _unread(_ENTRY_READS, number)
        return True


@cython.cclass
class MemberMetadata(_Reading):
    """A batch member's SingleMessageMetadata as the entry decoder reads it: from the wire
    bytes (:meth:`reread`, :func:`read_single`) unless a field the decoder reads is in
    another shape than the common one, else from the generated class's reading
    (:func:`member_from_generated`). Its integers are C integers when compiled, and its
    partition key is where it was read (``key_data[key_start:key_stop]``, UTF-8): a
    member read makes no Python object."""

    def __init__(self) -> None:
        self._new()
        self._defaults()

    @cython.cfunc
    def _defaults(self) -> cython.void:
        """Every field at its default, nothing read (a C call, as EntryMetadata's)."""
        self.payload_size = self.event_time = self.sequence_id = 0
        self.key_data = None
        self.key_start = self.key_stop = 0
        self.ordering_key = b""
        self.null_value = False
        self._start(_MEMBER_REQUIRED, MEMBER_PROPERTIES)

    @cython.ccall
    def reread(self, data: bytes, start: cython.Py_ssize_t, end: cython.Py_ssize_t) -> cython.bint:
        """Forget the last member read and read the one in ``data[start:end]``: False when
        it is not of the common shape (this reading is then not to be used)."""
        self._defaults()
        return self.read(data, start, end)

    @property
    def partition_key(self) -> str:
        """The partition key ("" when absent)."""
        if self.key_data is None:
            return ""
        return self.key_data[self.key_start : self.key_stop].decode()

    def HasField(self, name: str) -> bool:
        return self.has(_SINGLE_NUMBERS[name])

    @cython.ccall
    def put(self, number: cython.int, fields: Fields, data: bytes) -> cython.bint:
        wire_type: cython.int = fields.wire_type
        if wire_type == WIRE_LENGTH_DELIMITED and number == MEMBER_PROPERTIES:
            return self._property(fields, data)
        if wire_type == WIRE_LENGTH_DELIMITED and number == MEMBER_PARTITION_KEY:
            if not _is_utf8(data, fields.start, fields.stop):
                return False
            self.key_data = data
            self.key_start = fields.start
            self.key_stop = fields.stop
        elif wire_type == WIRE_LENGTH_DELIMITED and number == MEMBER_ORDERING_KEY:
            self.ordering_key = data[fields.start : fields.stop]
        elif wire_type != WIRE_VARINT:
            return _unread(_MEMBER_READS, number)
        elif number == MEMBER_PAYLOAD_SIZE:
            self.payload_size = int32(fields.value)
        elif number == MEMBER_EVENT_TIME:
            self.event_time = fields.value
        elif number == MEMBER_SEQUENCE_ID:
            self.sequence_id = fields.value
        elif number == MEMBER_NULL_VALUE:
            self.null_value = fields.value != 0
        else:
            return _unread(_MEMBER_READS, number)
        return True


def _numbers(message: Any, *names: str) -> dict[str, int]:
    return {name: message.DESCRIPTOR.fields_by_name[name].number for name in names}


# Field numbers by name, of the fields whose presence is asked (HasField).
_METADATA_NUMBERS = _numbers(
    MessageMetadata,
    "producer_name",
    "sequence_id",
    "publish_time",
    "partition_key",
    "compression",
    "uncompressed_size",
    "num_messages_in_batch",
    "event_time",
    "uuid",
)
_SINGLE_NUMBERS = _numbers(
    SingleMessageMetadata,
    "partition_key",
    "payload_size",
    "event_time",
    "ordering_key",
    "sequence_id",
)


@cython.ccall
def read_metadata(data: bytes, start: cython.Py_ssize_t, end: cython.Py_ssize_t) -> EntryMetadata:
    """The MessageMetadata in ``data[start:end]`` read from its wire bytes, or None when
    it is not of the common shape."""
    md: EntryMetadata = EntryMetadata.__new__(EntryMetadata)
    md._new()
    md._defaults()
    return md if md.read(data, start, end) else None


@cython.ccall
def read_single(data: bytes, start: cython.Py_ssize_t, end: cython.Py_ssize_t) -> MemberMetadata:
    """The SingleMessageMetadata in ``data[start:end]`` read from its wire bytes, or None
    when it is not of the common shape."""
    single: MemberMetadata = MemberMetadata.__new__(MemberMetadata)
    single._new()
    return single if single.reread(data, start, end) else None


@cython.ccall
def entry_from_generated(md: Any) -> EntryMetadata:
    """The generated class's reading of a MessageMetadata, as the entry decoder reads it."""
    entry = EntryMetadata()
    entry._adopt(md, _METADATA_NUMBERS)
    entry.producer_name = text(md.producer_name)
    entry.sequence_id = md.sequence_id
    entry.publish_time = md.publish_time
    entry.partition_key = text(md.partition_key)
    entry.compression = md.compression
    entry.uncompressed_size = md.uncompressed_size
    entry.num_messages_in_batch = md.num_messages_in_batch
    entry.event_time = md.event_time
    entry.encrypted = len(md.encryption_keys) > 0
    entry.ordering_key = md.ordering_key
    entry.replicated_from = md.replicated_from
    entry.null_value = md.null_value
    entry.uuid = md.uuid
    entry.num_chunks_from_msg = md.num_chunks_from_msg
    entry.chunk_id = md.chunk_id
    entry.total_chunk_msg_size = md.total_chunk_msg_size
    return entry


@cython.ccall
def member_from_generated(single: Any) -> MemberMetadata:
    """The generated class's reading of a SingleMessageMetadata, as the entry decoder
    reads it."""
    member = MemberMetadata()
    member._adopt(single, _SINGLE_NUMBERS)
    member.payload_size = single.payload_size
    key = text(single.partition_key).encode("utf-8", "backslashreplace")
    member.key_data = key
    member.key_stop = len(key)
    member.event_time = single.event_time
    member.ordering_key = single.ordering_key
    member.sequence_id = single.sequence_id
    member.null_value = single.null_value
    return member


@cython.cfunc
def _key_value(fields: Fields, data: bytes, spans: bytearray) -> cython.bint:
    """The span of the KeyValue ``fields`` is placed on, added to ``spans``: False unless
    its key and its value (both required) are each there once, both UTF-8."""
    key_start: cython.Py_ssize_t = -1
    key_stop: cython.Py_ssize_t = -1
    value_start: cython.Py_ssize_t = -1
    value_stop: cython.Py_ssize_t = -1
    number: cython.int
    while True:
        number = fields.next()
        if number == 0:
            break
        if fields.wire_type != WIRE_LENGTH_DELIMITED:
            return False
        if number == PAIR_KEY and key_start < 0:
            key_start, key_stop = fields.start, fields.stop
        elif number == PAIR_VALUE and value_start < 0:
            value_start, value_stop = fields.start, fields.stop
        else:
            return False
    if fields.broken or key_start < 0 or value_start < 0:
        return False
    if not _is_utf8(data, key_start, key_stop) or not _is_utf8(data, value_start, value_stop):
        return False
    add_span(spans, key_start, key_stop, value_start, value_stop)
    return True


@cython.cfunc
def _is_utf8(data: bytes, start: cython.Py_ssize_t, stop: cython.Py_ssize_t) -> cython.bint:
    """Whether ``data[start:stop]`` is UTF-8. Compiled, ASCII (nearly every property) is
    checked byte by byte in C, anything else by decoding it."""
    if start < 0 or stop < start or stop > len(data):
        raise ValueError(f"bytes {start}:{stop} are not within the {len(data)} given")
    if not cython.compiled:
        return _utf8(data, start, stop) is not None
    text_bytes: cython.p_const_uchar = cython.cast(cython.p_const_uchar, PyBytes_AS_STRING(data))
    i: cython.Py_ssize_t
    for i in range(start, stop):
        if text_bytes[i] >= 0x80:
            return _utf8(data, start, stop) is not None
    return True


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
