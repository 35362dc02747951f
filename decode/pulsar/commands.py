# cython: annotation_typing=True
"""Every BaseCommand type: its name, who sends it, how it pairs, and its row columns.

Each command's column extractor is built from the protobuf descriptors when the module
loads: a field whose name means a `frames` column (``request_id``, ``consumer_id``,
``messagePermits``, ``message_id``...) is copied into that column, whatever command it
sits in, by one :class:`Step` of the command's plan; the other fields (credentials
excepted) are summarised in `info`. A compiled loop runs the plan on every frame of the
command (:meth:`Extractor.copy`). The semantic
table below (sender and pairing role) is written out by hand for every type of the
current protocol, and a test checks it covers the whole enum.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from typing import Any

import cython
from google.protobuf.descriptor import Descriptor, FieldDescriptor

from ...tables.schema import FRAMES, I32, position
from ..wire import LENGTH_DELIMITED, text
from ._pb.pulsar_api_pb2 import BaseCommand, MessageIdData
from .info import Field, fields, is_secret, summarize

if cython.compiled:
    from cython.cimports.cpython.bytearray import PyByteArray_AS_STRING, PyByteArray_Resize
    from cython.cimports.cpython.bytes import PyBytes_AS_STRING, PyBytes_FromStringAndSize
    from cython.cimports.libc.string import memcpy
    from cython.cimports.pwcap.decode.pulsar.hot import id_nulls
    from cython.cimports.pwcap.decode.wire import Fields, cursor
    from cython.cimports.pwcap.tables.columns import ColumnBuffer
else:
    from ...tables.columns import ColumnBuffer
    from ..wire import Fields, cursor
    from .hot import id_nulls

_I32_COLUMNS = frozenset(column.name for column in FRAMES if column.type == I32)

I31 = (1 << 31) - 1
I63 = (1 << 63) - 1
U64 = 1 << 64

CLIENT, BROKER, EITHER = "client", "broker", "either"

# Pairing roles (see state.py): a request and the response that answers it.
REQUEST = "request"  # carries request_id; answered by a RESPONSE with the same id
RESPONSE = "response"
SEND = "send"  # answered by SEND_RECEIPT / SEND_ERROR with the same producer and sequence
RECEIPT = "receipt"
ACK = "ack"  # a request when it carries request_id; answered by ACK_RESPONSE
ACK_RESPONSE = "ack_response"
PING = "ping"  # answered in order by the other side's next PONG
PONG = "pong"
CONNECT = "connect"  # answered in order by CONNECTED (or ERROR)
CONNECTED = "connected"
CHALLENGE = "challenge"  # AUTH_CHALLENGE answered in order by AUTH_RESPONSE
CHALLENGE_REPLY = "challenge_reply"

# name: (sender, pairing role or None)
SEMANTICS: dict[str, tuple[str, str | None]] = {
    "CONNECT": (CLIENT, CONNECT),
    "CONNECTED": (BROKER, CONNECTED),
    "SUBSCRIBE": (CLIENT, REQUEST),
    "PRODUCER": (CLIENT, REQUEST),
    "SEND": (CLIENT, SEND),
    "SEND_RECEIPT": (BROKER, RECEIPT),
    "SEND_ERROR": (BROKER, RECEIPT),
    "MESSAGE": (BROKER, None),
    "ACK": (CLIENT, ACK),
    "FLOW": (CLIENT, None),
    "UNSUBSCRIBE": (CLIENT, REQUEST),
    "SUCCESS": (BROKER, RESPONSE),
    "ERROR": (BROKER, RESPONSE),
    "CLOSE_PRODUCER": (EITHER, REQUEST),
    "CLOSE_CONSUMER": (EITHER, REQUEST),
    "PRODUCER_SUCCESS": (BROKER, RESPONSE),
    "PING": (EITHER, PING),
    "PONG": (EITHER, PONG),
    "REDELIVER_UNACKNOWLEDGED_MESSAGES": (CLIENT, None),
    "PARTITIONED_METADATA": (CLIENT, REQUEST),
    "PARTITIONED_METADATA_RESPONSE": (BROKER, RESPONSE),
    "LOOKUP": (CLIENT, REQUEST),
    "LOOKUP_RESPONSE": (BROKER, RESPONSE),
    "CONSUMER_STATS": (CLIENT, REQUEST),
    "CONSUMER_STATS_RESPONSE": (BROKER, RESPONSE),
    "REACHED_END_OF_TOPIC": (BROKER, None),
    "SEEK": (CLIENT, REQUEST),
    "GET_LAST_MESSAGE_ID": (CLIENT, REQUEST),
    "GET_LAST_MESSAGE_ID_RESPONSE": (BROKER, RESPONSE),
    "ACTIVE_CONSUMER_CHANGE": (BROKER, None),
    "GET_TOPICS_OF_NAMESPACE": (CLIENT, REQUEST),
    "GET_TOPICS_OF_NAMESPACE_RESPONSE": (BROKER, RESPONSE),
    "GET_SCHEMA": (CLIENT, REQUEST),
    "GET_SCHEMA_RESPONSE": (BROKER, RESPONSE),
    "AUTH_CHALLENGE": (BROKER, CHALLENGE),
    "AUTH_RESPONSE": (CLIENT, CHALLENGE_REPLY),
    "ACK_RESPONSE": (BROKER, ACK_RESPONSE),
    "GET_OR_CREATE_SCHEMA": (CLIENT, REQUEST),
    "GET_OR_CREATE_SCHEMA_RESPONSE": (BROKER, RESPONSE),
    "NEW_TXN": (CLIENT, REQUEST),
    "NEW_TXN_RESPONSE": (BROKER, RESPONSE),
    "ADD_PARTITION_TO_TXN": (CLIENT, REQUEST),
    "ADD_PARTITION_TO_TXN_RESPONSE": (BROKER, RESPONSE),
    "ADD_SUBSCRIPTION_TO_TXN": (CLIENT, REQUEST),
    "ADD_SUBSCRIPTION_TO_TXN_RESPONSE": (BROKER, RESPONSE),
    "END_TXN": (CLIENT, REQUEST),
    "END_TXN_RESPONSE": (BROKER, RESPONSE),
    "END_TXN_ON_PARTITION": (CLIENT, REQUEST),
    "END_TXN_ON_PARTITION_RESPONSE": (BROKER, RESPONSE),
    "END_TXN_ON_SUBSCRIPTION": (CLIENT, REQUEST),
    "END_TXN_ON_SUBSCRIPTION_RESPONSE": (BROKER, RESPONSE),
    "TC_CLIENT_CONNECT_REQUEST": (CLIENT, REQUEST),
    "TC_CLIENT_CONNECT_RESPONSE": (BROKER, RESPONSE),
    "WATCH_TOPIC_LIST": (CLIENT, REQUEST),
    "WATCH_TOPIC_LIST_SUCCESS": (BROKER, RESPONSE),
    "WATCH_TOPIC_UPDATE": (BROKER, None),
    "WATCH_TOPIC_LIST_CLOSE": (CLIENT, REQUEST),
    "TOPIC_MIGRATED": (BROKER, None),
    "SCALABLE_TOPIC_LOOKUP": (CLIENT, None),
    "SCALABLE_TOPIC_UPDATE": (BROKER, None),
    "SCALABLE_TOPIC_CLOSE": (CLIENT, None),
    "SCALABLE_TOPIC_SUBSCRIBE": (CLIENT, REQUEST),
    "SCALABLE_TOPIC_SUBSCRIBE_RESPONSE": (BROKER, RESPONSE),
    "SCALABLE_TOPIC_ASSIGNMENT_UPDATE": (BROKER, None),
    "WATCH_SCALABLE_TOPICS": (CLIENT, None),
    "WATCH_SCALABLE_TOPICS_UPDATE": (BROKER, None),
    "WATCH_SCALABLE_TOPICS_CLOSE": (CLIENT, None),
    "WATCH_TC_ASSIGNMENTS": (CLIENT, None),
    "WATCH_TC_ASSIGNMENTS_UPDATE": (BROKER, None),
    "WATCH_TC_ASSIGNMENTS_CLOSE": (CLIENT, None),
}

PAYLOAD_COMMANDS = frozenset({"SEND", "MESSAGE"})

# Response -> the requests it can answer, most likely first. Request ids are not one
# counter per connection (the C++ client draws LOOKUP / PARTITIONED_METADATA ids from a
# client-wide counter and PRODUCER / SUBSCRIBE / CLOSE / SEEK ids from a per-connection
# one), so two outstanding requests may share an id: the response's type says which.
_GENERIC_ANSWERS = (
    "SUBSCRIBE",
    "UNSUBSCRIBE",
    "CLOSE_PRODUCER",
    "CLOSE_CONSUMER",
    "SEEK",
    "WATCH_TOPIC_LIST_CLOSE",
)
ANSWERS: dict[str, tuple[str, ...]] = {
    "SUCCESS": _GENERIC_ANSWERS,
    "PRODUCER_SUCCESS": ("PRODUCER",),
    "WATCH_TOPIC_LIST_SUCCESS": ("WATCH_TOPIC_LIST",),
    "PARTITIONED_METADATA_RESPONSE": ("PARTITIONED_METADATA",),
    "LOOKUP_RESPONSE": ("LOOKUP",),
    "CONSUMER_STATS_RESPONSE": ("CONSUMER_STATS",),
    "GET_LAST_MESSAGE_ID_RESPONSE": ("GET_LAST_MESSAGE_ID",),
    "GET_TOPICS_OF_NAMESPACE_RESPONSE": ("GET_TOPICS_OF_NAMESPACE",),
    "GET_SCHEMA_RESPONSE": ("GET_SCHEMA",),
    "GET_OR_CREATE_SCHEMA_RESPONSE": ("GET_OR_CREATE_SCHEMA",),
    "TC_CLIENT_CONNECT_RESPONSE": ("TC_CLIENT_CONNECT_REQUEST",),
    "SCALABLE_TOPIC_SUBSCRIBE_RESPONSE": ("SCALABLE_TOPIC_SUBSCRIBE",),
    **{
        f"{txn}_RESPONSE": (txn,)
        for txn in (
            "NEW_TXN",
            "ADD_PARTITION_TO_TXN",
            "ADD_SUBSCRIPTION_TO_TXN",
            "END_TXN",
            "END_TXN_ON_PARTITION",
            "END_TXN_ON_SUBSCRIPTION",
        )
    },
}
# ERROR is the broker's generic refusal: it answers the commands SUCCESS answers and
# PRODUCER first, then any other request (the typed responses normally carry their own
# error fields, but a broker may still refuse them with ERROR).
_REFUSED_FIRST = ("PRODUCER", *_GENERIC_ANSWERS)
ANSWERS["ERROR"] = (
    *_REFUSED_FIRST,
    *[n for n, (_, role) in SEMANTICS.items() if role == REQUEST and n not in _REFUSED_FIRST],
)
# Response -> {request name: preference}, lower preferred, for the pairing lookup.
ANSWER_RANKS: dict[str, dict[str, int]] = {
    response: {request: rank for rank, request in enumerate(requests)}
    for response, requests in ANSWERS.items()
}

# Proto field name -> frames column, for scalar fields copied as they are.
_PLAIN_COLUMNS = {
    "request_id": "request_id",
    "producer_id": "producer_id",
    "consumer_id": "consumer_id",
    "sequence_id": "sequence_id",
    "highest_sequence_id": "highest_sequence_id",
    "messagePermits": "permits",
    "redelivery_count": "redelivery_count",
    "num_messages": "num_messages",
    "consumer_epoch": "consumer_epoch",
    "txnid_most_bits": "txnid_most_bits",
    "txnid_least_bits": "txnid_least_bits",
    "topic": "topic",
    "subscription": "subscription",
    "producer_name": "producer_name",
    "producerName": "producer_name",
    "consumer_name": "consumer_name",
    "consumerName": "consumer_name",
    "message": "error_message",
    "error_message": "error_message",
}
# Proto field name -> frames column, for enum fields written as the value's name.
_ENUM_COLUMNS = {
    "error": "error_code",
    "error_code": "error_code",
    "subType": "sub_type",
    "ack_type": "ack_type",
    "validation_error": "validation_error",
}
# Message-id fields whose ledger / entry / partition / batch index become columns.
_MESSAGE_ID_FIELDS = ("message_id", "last_message_id", "message_ids")

# How a step copies its field into its column (C constants compiled: a switch per field).
PLAIN = cython.declare(cython.int, 0)  # as it is
TEXT = cython.declare(cython.int, 1)  # a string field (bytes when not UTF-8: escaped)
WRAPPED = cython.declare(cython.int, 2)  # a uint64 in an int64 column, as Java reads it
CHECKED = cython.declare(cython.int, 3)  # a uint32 in an int32 column: null past it
ENUM = cython.declare(cython.int, 4)  # an enum, as its value's name
MESSAGE_ID = cython.declare(cython.int, 5)  # a MessageIdData: its four columns
MESSAGE_IDS = cython.declare(cython.int, 6)  # repeated MessageIdData: the list, the first's
INFO = position("frames", "info")
LEDGER_ID = position("frames", "ledger_id")
ENTRY_ID = position("frames", "entry_id")
PARTITION = position("frames", "partition")
BATCH_INDEX = position("frames", "batch_index")
NUM_MESSAGE_IDS = position("frames", "num_message_ids")
MESSAGE_IDS_COLUMN = position("frames", "message_ids")
ACK_SETS = position("frames", "ack_sets")
UNACKED_IN_BATCH = position("frames", "unacked_in_batch")
# The words of an ack_set read at most: 64 words are 4,096 batch members, past the batches
# clients build (the Java and Go clients' default limit is 1,000 messages); the bits of a
# longer one, which only a hostile peer sends, are not listed.
MAX_ACK_SET_WORDS = 64
WIRE_LENGTH_DELIMITED = cython.declare(cython.int, LENGTH_DELIMITED)
# Summaries kept per command type, at most, each for at most this many bytes of fields
# (C constants beside them when compiled): under 70 types x 256 x (key and summary, under
# 500 bytes), the memory they may take is bounded by about 9 MB whatever the traffic.
KEPT_SUMMARIES = 256
MAX_SUMMARY_KEY = 256
_KEPT = cython.declare(cython.Py_ssize_t, KEPT_SUMMARIES)
_MAX_KEY = cython.declare(cython.Py_ssize_t, MAX_SUMMARY_KEY)
_MISSING = object()


@cython.cclass
class Step:
    """One field of a command copied into its `frames` column."""

    name = cython.declare(str, visibility="readonly")  # the field's
    column = cython.declare(cython.Py_ssize_t, visibility="readonly")  # its position
    how = cython.declare(cython.int, visibility="readonly")  # PLAIN, TEXT, ... as above
    always = cython.declare(cython.bint, visibility="readonly")  # required: no HasField
    names = cython.declare(dict, visibility="readonly")  # an enum's: number -> name

    def __init__(self, name: str, column: str, how: int, always: bool, names: dict) -> None:
        self.name = name
        self.column = position("frames", column) if column else -1
        self.how = how
        self.always = always
        self.names = names


@cython.cclass
class Extractor:
    """A command's plan: its message's field in BaseCommand, its steps, in field order,
    and the fields its `info` summarises.

    Commands of a type mostly repeat their summarised fields (a client's version and
    features, a subscription's options) while their ids change: a summary is kept by the
    wire bytes of those fields (every occurrence, in order: the same bytes parse to the
    same values), so a repeat costs a walk of the bytes, not a summary.
    """

    field = cython.declare(str, visibility="readonly")
    number = cython.declare(cython.int, visibility="readonly")  # its field number
    steps = cython.declare(tuple, visibility="readonly")
    info = cython.declare(tuple, visibility="readonly")
    _info_low = cython.declare(cython.ulonglong)  # bit n: field n (< 64) is summarised
    _info_high = cython.declare(frozenset)  # the summarised fields numbered 64 and up
    _summaries = cython.declare(dict)  # summarised fields' wire bytes -> summary or None
    _outer = cython.declare(Fields)  # cursors, moved over each command's bytes
    _inner = cython.declare(Fields)
    _key = cython.declare(bytearray)  # the summarised fields of the command being read

    def __init__(
        self, field: str, number: int, steps: tuple[Step, ...], info: tuple[Field, ...]
    ) -> None:
        self.field = field
        self.number = number
        self.steps = steps
        self.info = info
        self._info_low = sum(1 << fd.number for fd in info if fd.number < 64)
        self._info_high = frozenset(fd.number for fd in info if fd.number >= 64)
        self._summaries = {}
        self._outer = cursor(b"", 0, 0)
        self._inner = cursor(b"", 0, 0)
        self._key = bytearray()

    @cython.ccall
    @cython.locals(step=Step)
    def copy(
        self,
        command: Any,
        row: ColumnBuffer,
        data: bytes,
        start: cython.Py_ssize_t,
        end: cython.Py_ssize_t,
    ) -> object:
        """Copy the command's column-worthy fields (and `info`) into ``row``; the
        command's own message. ``data[start:end]`` is the BaseCommand ``command`` was
        parsed from."""
        sub = getattr(command, self.field)
        for step in self.steps:
            if step.how == MESSAGE_IDS:
                _message_ids(getattr(sub, step.name), row)
                continue
            if not step.always and not sub.HasField(step.name):
                continue
            value = getattr(sub, step.name)
            if step.how == MESSAGE_ID:
                _message_id(value, row)
            elif step.how == TEXT:
                row.set(step.column, value if value.__class__ is str else text(value))
            elif step.how == WRAPPED:
                row.set(step.column, value - U64 if value > I63 else value)
            elif step.how == CHECKED:
                row.set(step.column, value if value <= I31 else None)
            elif step.how == ENUM:
                row.set(step.column, step.names.get(value) or str(value))
            else:
                row.set(step.column, value)
        if self.info:
            summary = self._summary(sub, data, start, end)
            if summary is not None:
                row.set(INFO, summary)
        return sub

    def kept(self) -> int:
        """How many summaries are kept (at most KEPT_SUMMARIES)."""
        return len(self._summaries)

    @cython.cfunc
    def _summary(self, sub: Any, data: bytes, start: cython.Py_ssize_t, end: cython.Py_ssize_t):
        """The `info` of ``sub``: the one kept for the same summarised bytes, or made."""
        if not self._summarised(data, start, end):  # damage, or too long to keep
            return summarize(sub, self.info)
        key = _bytes_of(self._key)
        summary = self._summaries.get(key, _MISSING)
        if summary is _MISSING:
            summary = summarize(sub, self.info)
            if len(self._summaries) >= _KEPT:
                self._summaries.clear()
            self._summaries[key] = summary
        return summary

    @cython.cfunc
    @cython.exceptval(-1, check=True)
    def _summarised(
        self, data: bytes, start: cython.Py_ssize_t, end: cython.Py_ssize_t
    ) -> cython.bint:
        """Gather into ``_key`` the summarised fields of the command message in the
        BaseCommand ``data[start:end]``, tags included, every occurrence in wire order;
        False when the bytes are not walked whole or these take over MAX_SUMMARY_KEY."""
        outer: Fields = self._outer
        inner: Fields = self._inner
        key: bytearray = self._key
        del key[:]
        outer.place(data, start, end)
        number: cython.int
        at: cython.Py_ssize_t
        while True:
            number = outer.next()
            if number == 0:
                break
            if number != self.number:
                continue
            if outer.wire_type != WIRE_LENGTH_DELIMITED:
                return False
            inner.place(data, outer.start, outer.stop)
            while True:
                at = inner.pos
                number = inner.next()
                if number == 0:
                    break
                if self._summarises(number):
                    if len(key) + inner.pos - at > _MAX_KEY:
                        return False
                    _append(key, data, at, inner.pos)
            if inner.broken:
                return False
        return not outer.broken

    @cython.cfunc
    def _summarises(self, number: cython.int) -> cython.bint:
        if number < 64:
            return (self._info_low >> number) & 1 == 1
        return number in self._info_high


@cython.cfunc
@cython.exceptval(-1, check=False)
def _append(
    target: bytearray, data: bytes, start: cython.Py_ssize_t, stop: cython.Py_ssize_t
) -> cython.int:
    """``data[start:stop]`` appended to ``target`` (compiled: copied in C, no slice)."""
    if start < 0 or stop < start or stop > len(data):
        raise IndexError(f"bytes {start}:{stop} of {len(data)}")
    if not cython.compiled:
        target += data[start:stop]
        return 0
    size: cython.Py_ssize_t = len(target)
    PyByteArray_Resize(target, size + stop - start)
    memcpy(PyByteArray_AS_STRING(target) + size, PyBytes_AS_STRING(data) + start, stop - start)
    return 0


@cython.cfunc
def _bytes_of(source: bytearray) -> bytes:
    """A bytes copy of ``source`` (compiled, without the call of ``bytes()``)."""
    if not cython.compiled:
        return bytes(source)
    return PyBytes_FromStringAndSize(PyByteArray_AS_STRING(source), len(source))


@cython.cfunc
def _message_id(m: Any, row: ColumnBuffer) -> cython.void:
    """A MessageIdData's columns (a partition or batch index of -1, their default, means
    "not set": null)."""
    ledger, entry, partition, batch_index = m.ledgerId, m.entryId, m.partition, m.batch_index
    row.set(LEDGER_ID, ledger - U64 if ledger > I63 else ledger)
    row.set(ENTRY_ID, entry - U64 if entry > I63 else entry)
    if partition != -1:
        row.set(PARTITION, partition)
    if batch_index != -1:
        row.set(BATCH_INDEX, batch_index)


@cython.cfunc
def _message_ids(ids: Any, row: ColumnBuffer) -> cython.void:
    """Repeated MessageIdData: the `message_ids` list and its count, and the words of
    their ack_sets (`ack_sets`, by the id's place); the scalar columns hold the first."""
    place: cython.Py_ssize_t
    word: cython.Py_ssize_t
    for place, m in enumerate(ids):
        ledger, entry, partition, batch_index = m.ledgerId, m.entryId, m.partition, m.batch_index
        ledger = ledger - U64 if ledger > I63 else ledger
        entry = entry - U64 if entry > I63 else entry
        row.add_struct(
            MESSAGE_IDS_COLUMN,
            ledger,
            entry,
            partition,
            batch_index,
            id_nulls(partition, batch_index),
        )
        for word, bits in enumerate(m.ack_set[:MAX_ACK_SET_WORDS]):
            row.add_struct(ACK_SETS, place, word, bits, 0, 0)
        if len(m.ack_set):
            _unacked_members(m.ack_set, ledger, entry, partition, row)
    row.set(NUM_MESSAGE_IDS, len(ids))
    if ids:
        _message_id(ids[0], row)


@cython.cfunc
def _unacked_members(
    ack_set: Any, ledger: object, entry: object, partition: object, row: ColumnBuffer
) -> cython.void:
    """The batch members a batch-index acknowledgement leaves unacknowledged: the set bits
    of its ack_set (bit n of word w is member 64 w + n), into `unacked_in_batch`."""
    for w in range(min(len(ack_set), MAX_ACK_SET_WORDS)):
        word = ack_set[w] & 0xFFFFFFFFFFFFFFFF
        while word:
            low = word & -word
            row.add_struct(
                UNACKED_IN_BATCH,
                ledger,
                entry,
                partition,
                64 * w + low.bit_length() - 1,
                id_nulls(partition, 0),
            )
            word ^= low


@dataclass(frozen=True, slots=True)
class CommandSpec:
    """What the decoder needs to know about one command type."""

    type: int
    name: str
    field: str  # the BaseCommand field holding this command
    sender: str
    role: str | None
    columns: frozenset[str]  # the `frames` columns the command's own fields may fill
    always: tuple[str, ...]  # those it fills on every frame (its required scalar fields)
    needs_body: bool  # the command message has required fields, so it must be present
    extractor: Extractor = dataclasses.field(repr=False, compare=False)


def _how(fd: FieldDescriptor, column: str) -> int:
    """How a scalar field is copied into ``column``, as a value the column's type holds."""
    if fd.type == FieldDescriptor.TYPE_STRING:
        return TEXT
    if fd.type == FieldDescriptor.TYPE_UINT64:
        return WRAPPED
    if fd.type == FieldDescriptor.TYPE_UINT32 and column in _I32_COLUMNS:
        return CHECKED  # redelivery_count is a uint32 in an int32 column
    return PLAIN


def _build(type_number: int, name: str) -> CommandSpec:
    field = BaseCommand.DESCRIPTOR.fields_by_number[type_number]
    descriptor: Descriptor = field.message_type
    sender, role = SEMANTICS[name]
    steps: list[Step] = []
    info = []
    columns = set()
    always = []
    for fd in descriptor.fields:
        repeated = fd.is_repeated
        if fd.name in _MESSAGE_ID_FIELDS and fd.message_type is MessageIdData.DESCRIPTOR:
            how = MESSAGE_IDS if repeated else MESSAGE_ID
            steps.append(Step(fd.name, "", how, False, {}))
        elif fd.name in _ENUM_COLUMNS and fd.type == FieldDescriptor.TYPE_ENUM and not repeated:
            column = _ENUM_COLUMNS[fd.name]
            columns.add(column)
            names = {v.number: v.name for v in fd.enum_type.values}
            steps.append(Step(fd.name, column, ENUM, False, names))
        elif fd.name in _PLAIN_COLUMNS and not repeated and fd.message_type is None:
            column = _PLAIN_COLUMNS[fd.name]
            columns.add(column)
            if fd.is_required:
                always.append(column)
            steps.append(Step(fd.name, column, _how(fd, column), fd.is_required, {}))
        elif not is_secret(fd):
            info.append(fd)
    return CommandSpec(
        type=type_number,
        name=name,
        field=field.name,
        sender=sender,
        role=role,
        columns=frozenset(columns),
        always=tuple(always),
        needs_body=any(fd.is_required for fd in descriptor.fields),
        extractor=Extractor(field.name, field.number, tuple(steps), fields(info)),
    )


SPECS: dict[int, CommandSpec] = {
    value.number: _build(value.number, value.name) for value in BaseCommand.Type.DESCRIPTOR.values
}
SPECS_BY_NAME: dict[str, CommandSpec] = {spec.name: spec for spec in SPECS.values()}
