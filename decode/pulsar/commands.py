"""Every BaseCommand type: its name, who sends it, how it pairs, and its row columns.

The per-command column extractors are built from the protobuf descriptors, each once, on
its command's first frame (a capture uses a few of the seventy types): a field whose name
means a `frames` column (``request_id``, ``consumer_id``, ``messagePermits``,
``message_id``...) is copied into that column, whatever command it sits in. The semantic
table below (sender and pairing role) is written out by hand for every type of the
current protocol, and a test checks it covers the whole enum.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from google.protobuf.descriptor import Descriptor, FieldDescriptor
from pwcap.decode.pulsar._pb.pulsar_api_pb2 import BaseCommand, MessageIdData
from pwcap.decode.pulsar.info import fields, is_secret, summarize
from pwcap.decode.wire import text
from pwcap.tables.columns import ColumnBuffer
from pwcap.tables.schema import FRAMES, I32, position

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
# (BaseCommand, frame row being built) -> the command's own message, after copying its
# fields into the row.
Extractor = Callable[[Any, ColumnBuffer], Any]


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
    # The statements of its extractor, and the names they use besides the module's.
    lines: tuple[str, ...] = dataclasses.field(repr=False, compare=False)
    names: dict[str, Any] = dataclasses.field(repr=False, compare=False)

    def extractor(self) -> Extractor:
        """The function copying the command's column-worthy fields (and `info`) into a
        row, compiled on its first use."""
        found = _EXTRACTORS.get(self.type)
        if found is None:
            found = _EXTRACTORS[self.type] = _compile_extractor(
                self.name, self.field, self.lines, self.names
            )
        return found


_EXTRACTORS: dict[int, Extractor] = {}  # command type -> its extractor, once compiled


def _compile_extractor(
    name: str, field: str, lines: tuple[str, ...], names: dict[str, Any]
) -> Extractor:
    """Turn the copy statements of one command into a function.

    Straight-line code per command instead of a loop over a field table: this runs once
    per frame, and the loop's overhead was most of its cost.
    """
    body = "\n".join(_indent([f"sub = command.{field}", *lines, "return sub"]))
    source = f"def extract_{name}(command, row):\n{body}\n"
    namespace = {"I31": I31, "I63": I63, "U64": U64, "text": text, **names}
    exec(compile(source, f"<pulsar extractor {name}>", "exec"), namespace)
    return namespace[f"extract_{name}"]


def _set(column: str, value: str) -> str:
    """The statement setting a `frames` column of the row being built (named by its
    position, resolved here once) to the expression ``value``."""
    return f"row.set({position('frames', column)}, {value})  # {column}"


def _copy(column: str, value: str, field_type: int) -> list[str]:
    """Statements copying one field into its column, as a value the column's type holds."""
    if field_type == FieldDescriptor.TYPE_STRING:
        return [f"v = {value}", _set(column, "v if v.__class__ is str else text(v)")]
    if field_type == FieldDescriptor.TYPE_UINT64:  # int64 columns: as Java reads them
        return [f"v = {value}", _set(column, "v - U64 if v > I63 else v")]
    if field_type == FieldDescriptor.TYPE_UINT32 and column in _I32_COLUMNS:
        # redelivery_count is a uint32 in an int32 column: null when it does not fit.
        return [f"v = {value}", _set(column, "v if v <= I31 else None")]
    return [_set(column, value)]


def _message_id(target: str) -> list[str]:
    # partition and batch_index: -1 (their default) means "not set", written as null.
    return [
        f"m = {target}",
        *_copy("ledger_id", "m.ledgerId", FieldDescriptor.TYPE_UINT64),
        *_copy("entry_id", "m.entryId", FieldDescriptor.TYPE_UINT64),
        "v = m.partition",
        "if v != -1:",
        "    " + _set("partition", "v"),
        "v = m.batch_index",
        "if v != -1:",
        "    " + _set("batch_index", "v"),
    ]


def _id_struct(m: MessageIdData) -> dict[str, Any]:
    """One element of the `message_ids` list column (-1 partition / batch index: null)."""
    ledger, entry, partition, batch_index = m.ledgerId, m.entryId, m.partition, m.batch_index
    return {
        "ledger_id": ledger - U64 if ledger > I63 else ledger,
        "entry_id": entry - U64 if entry > I63 else entry,
        "partition": None if partition == -1 else partition,
        "batch_index": None if batch_index == -1 else batch_index,
    }


def _indent(lines: list[str]) -> list[str]:
    return ["    " + line for line in lines]


def _build(type_number: int, name: str) -> CommandSpec:
    field = BaseCommand.DESCRIPTOR.fields_by_number[type_number]
    descriptor: Descriptor = field.message_type
    sender, role = SEMANTICS[name]
    lines: list[str] = []
    names: dict[str, Any] = {}
    info = []
    columns = set()
    always = []
    for fd in descriptor.fields:
        repeated = fd.is_repeated
        attr = f"sub.{fd.name}"
        if fd.name in _MESSAGE_ID_FIELDS and fd.message_type is MessageIdData.DESCRIPTOR:
            if repeated:
                # Read each id once, into its struct; the scalar columns copy the first.
                lines += [
                    f"ids = [_id_struct(m) for m in {attr}]",
                    _set("num_message_ids", "len(ids)"),
                    "if ids:",
                    "    " + _set("message_ids", "ids"),
                    "    first = ids[0]",
                    "    " + _set("ledger_id", "first['ledger_id']"),
                    "    " + _set("entry_id", "first['entry_id']"),
                    "    if first['partition'] is not None:",
                    "        " + _set("partition", "first['partition']"),
                    "    if first['batch_index'] is not None:",
                    "        " + _set("batch_index", "first['batch_index']"),
                ]
                names["_id_struct"] = _id_struct
            else:
                lines += [f"if sub.HasField({fd.name!r}):", *_indent(_message_id(attr))]
        elif fd.name in _ENUM_COLUMNS and fd.type == FieldDescriptor.TYPE_ENUM and not repeated:
            table = f"names_{fd.name}"
            names[table] = {v.number: v.name for v in fd.enum_type.values}
            column = _ENUM_COLUMNS[fd.name]
            columns.add(column)
            lines += [
                f"if sub.HasField({fd.name!r}):",
                f"    v = {attr}",
                "    " + _set(column, f"{table}.get(v) or str(v)"),
            ]
        elif fd.name in _PLAIN_COLUMNS and not repeated and fd.message_type is None:
            columns.add(_PLAIN_COLUMNS[fd.name])
            copy = _copy(_PLAIN_COLUMNS[fd.name], attr, fd.type)
            if fd.is_required:
                always.append(_PLAIN_COLUMNS[fd.name])
                lines += copy
            else:
                lines += [f"if sub.HasField({fd.name!r}):", *_indent(copy)]
        elif not is_secret(fd):
            info.append(fd)
    if info:
        # summarize() asks each field's presence itself (None when none is there): the
        # same questions asked first here cost as much again.
        lines += [
            "summary = summarize(sub, INFO)",
            "if summary is not None:",
            "    " + _set("info", "summary"),
        ]
        names.update(summarize=summarize, INFO=fields(info))
    return CommandSpec(
        type=type_number,
        name=name,
        field=field.name,
        sender=sender,
        role=role,
        columns=frozenset(columns),
        always=tuple(always),
        needs_body=any(fd.is_required for fd in descriptor.fields),
        lines=tuple(lines),
        names=names,
    )


SPECS: dict[int, CommandSpec] = {
    value.number: _build(value.number, value.name) for value in BaseCommand.Type.DESCRIPTOR.values
}
SPECS_BY_NAME: dict[str, CommandSpec] = {spec.name: spec for spec in SPECS.values()}
