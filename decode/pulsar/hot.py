"""The commands of every message's path, read straight from their wire bytes.

SEND, SEND_RECEIPT, MESSAGE, ACK and FLOW are most of the frames of any busy connection.
:func:`read_hot_command` reads their column-worthy fields with a :class:`Fields` cursor
and returns the same columns the generated extractor of :mod:`commands` would copy out
of the parsed protobuf. Anything it is not sure to read exactly as protobuf does (another
command, a field it does not map to a column, a repeated or merged message, a wire type
out of place, an enum value the schema lacks, damage) makes it return None, and the frame
takes the general path, which parses it with the generated classes. A test holds the two
paths equal on every command it can generate and on damaged ones.
"""

from __future__ import annotations

from typing import Any

from pwcap.decode.pulsar._pb.pulsar_api_pb2 import BaseCommand, CommandAck
from pwcap.decode.wire import LENGTH_DELIMITED, VARINT, Fields

I31 = (1 << 31) - 1
I63 = (1 << 63) - 1
U32_MASK = (1 << 32) - 1
U64 = 1 << 64
TYPE_FIELD = 1  # BaseCommand.type

SEND = BaseCommand.SEND
SEND_RECEIPT = BaseCommand.SEND_RECEIPT
MESSAGE = BaseCommand.MESSAGE
ACK = BaseCommand.ACK
FLOW = BaseCommand.FLOW
# Type -> the BaseCommand field number holding that command.
BODY_FIELDS = {
    number: BaseCommand.DESCRIPTOR.fields_by_name[name].number
    for number, name in (
        (SEND, "send"),
        (SEND_RECEIPT, "send_receipt"),
        (MESSAGE, "message"),
        (ACK, "ack"),
        (FLOW, "flow"),
    )
}
_BODY_NUMBERS = frozenset(BODY_FIELDS.values())
ACK_TYPES = {v.number: v.name for v in CommandAck.AckType.DESCRIPTOR.values}
VALIDATION_ERRORS = {v.number: v.name for v in CommandAck.ValidationError.DESCRIPTOR.values}

Columns = dict[str, Any]


def read_hot_command(data: bytes, start: int, end: int) -> tuple[int, Columns] | None:
    """``(type, columns)`` of the BaseCommand in ``data[start:end]``, or None when it is not
    a hot command this reader takes (the general path then parses it)."""
    fields = Fields(data, start, end)
    command_type = -1
    body = -1
    body_start = body_stop = 0
    while True:
        number = fields.next()
        if number == 0:
            break
        if number == TYPE_FIELD and fields.wire_type == VARINT:
            command_type = fields.value
        elif number in _BODY_NUMBERS and fields.wire_type == LENGTH_DELIMITED and body < 0:
            body, body_start, body_stop = number, fields.start, fields.stop
        else:
            return None
    if fields.broken or BODY_FIELDS.get(command_type) != body:
        return None
    body_fields = Fields(data, body_start, body_stop)
    if command_type == SEND:
        columns = _send(body_fields)
    elif command_type == SEND_RECEIPT:
        columns = _send_receipt(body_fields)
    elif command_type == MESSAGE:
        columns = _message(body_fields, data)
    elif command_type == ACK:
        columns = _ack(body_fields, data)
    else:
        columns = _flow(body_fields)
    if columns is None or body_fields.broken:
        return None
    return command_type, columns


def _signed(value: int) -> int:
    """A uint64 as Java (and an int64 column) reads it."""
    return value - U64 if value > I63 else value


def int32(value: int) -> int:
    """An int32 field's varint, truncated to 32 bits as protobuf does."""
    value &= U32_MASK
    return value - (1 << 32) if value > I31 else value


def _send(fields: Fields) -> Columns | None:
    columns: Columns = {}
    while True:
        number = fields.next()
        if number == 0:
            break
        if fields.wire_type != VARINT:
            return None
        value = fields.value
        if number == 1:
            columns["producer_id"] = _signed(value)
        elif number == 2:
            columns["sequence_id"] = _signed(value)
        elif number == 3:
            columns["num_messages"] = int32(value)
        elif number == 4:
            columns["txnid_least_bits"] = _signed(value)
        elif number == 5:
            columns["txnid_most_bits"] = _signed(value)
        elif number == 6:
            columns["highest_sequence_id"] = _signed(value)
        else:  # is_chunk, marker (the `info` column), message_id: the general path
            return None
    if "producer_id" not in columns or "sequence_id" not in columns:
        return None
    return columns


def _send_receipt(fields: Fields) -> Columns | None:
    columns: Columns = {}
    seen_id = False
    while True:
        number = fields.next()
        if number == 0:
            break
        if number == 3 and fields.wire_type == LENGTH_DELIMITED and not seen_id:
            seen_id = True
            if not _message_id(Fields(fields.data, fields.start, fields.stop), columns):
                return None
        elif fields.wire_type != VARINT:
            return None
        elif number == 1:
            columns["producer_id"] = _signed(fields.value)
        elif number == 2:
            columns["sequence_id"] = _signed(fields.value)
        elif number == 4:
            columns["highest_sequence_id"] = _signed(fields.value)
        else:
            return None
    if "producer_id" not in columns or "sequence_id" not in columns:
        return None
    return columns


def _message(fields: Fields, data: bytes) -> Columns | None:
    columns: Columns = {}
    seen_id = False
    while True:
        number = fields.next()
        if number == 0:
            break
        if number == 2 and fields.wire_type == LENGTH_DELIMITED and not seen_id:
            seen_id = True
            if not _message_id(Fields(data, fields.start, fields.stop), columns):
                return None
        elif fields.wire_type != VARINT:
            return None
        elif number == 1:
            columns["consumer_id"] = _signed(fields.value)
        elif number == 3:
            count = fields.value & U32_MASK  # a uint32 in an int32 column: null past it
            columns["redelivery_count"] = count if count <= I31 else None
        else:  # ack_set, consumer_epoch (the `info` column): the general path
            return None
    if "consumer_id" not in columns or not seen_id:
        return None
    return columns


def _ack(fields: Fields, data: bytes) -> Columns | None:
    columns: Columns = {}
    ids: list[Columns] = []
    while True:
        number = fields.next()
        if number == 0:
            break
        if number == 3 and fields.wire_type == LENGTH_DELIMITED:
            listed: Columns = {}
            if not _message_id(Fields(data, fields.start, fields.stop), listed):
                return None
            ids.append(
                {
                    "ledger_id": listed["ledger_id"],
                    "entry_id": listed["entry_id"],
                    "partition": listed.get("partition"),
                    "batch_index": listed.get("batch_index"),
                }
            )
        elif fields.wire_type != VARINT:
            return None
        elif number == 1:
            columns["consumer_id"] = _signed(fields.value)
        elif number == 2 and fields.value in ACK_TYPES:
            columns["ack_type"] = ACK_TYPES[fields.value]
        elif number == 4 and fields.value in VALIDATION_ERRORS:
            columns["validation_error"] = VALIDATION_ERRORS[fields.value]
        elif number == 6:
            columns["txnid_least_bits"] = _signed(fields.value)
        elif number == 7:
            columns["txnid_most_bits"] = _signed(fields.value)
        elif number == 8:
            columns["request_id"] = _signed(fields.value)
        else:  # properties (the `info` column), an enum value the schema lacks
            return None
    if "consumer_id" not in columns or "ack_type" not in columns:
        return None
    columns["num_message_ids"] = len(ids)
    if ids:
        columns["message_ids"] = ids
        first = ids[0]
        columns["ledger_id"] = first["ledger_id"]
        columns["entry_id"] = first["entry_id"]
        if first["partition"] is not None:
            columns["partition"] = first["partition"]
        if first["batch_index"] is not None:
            columns["batch_index"] = first["batch_index"]
    return columns


def _message_id(fields: Fields, columns: Columns) -> bool:
    """A MessageIdData's ledger and entry, and its partition and batch index unless they
    hold -1 (their default, "not set"), into ``columns``; False to leave it to the general
    path (another field, a missing required one)."""
    ledger = entry = -1
    while True:
        number = fields.next()
        if number == 0:
            break
        if fields.wire_type != VARINT:
            return False
        value = fields.value
        if number == 1:
            ledger = value
        elif number == 2:
            entry = value
        elif number == 3:
            columns["partition"] = int32(value)
        elif number == 4:
            columns["batch_index"] = int32(value)
        else:  # ack_set, batch_size, first_chunk_message_id
            return False
    if fields.broken or ledger < 0 or entry < 0:
        return False
    columns["ledger_id"] = _signed(ledger)
    columns["entry_id"] = _signed(entry)
    for column in ("partition", "batch_index"):
        if columns.get(column) == -1:
            del columns[column]
    return True


def _flow(fields: Fields) -> Columns | None:
    columns: Columns = {}
    while True:
        number = fields.next()
        if number == 0:
            break
        if fields.wire_type != VARINT:
            return None
        if number == 1:
            columns["consumer_id"] = _signed(fields.value)
        elif number == 2:
            columns["permits"] = fields.value & U32_MASK
        else:
            return None
    if "consumer_id" not in columns or "permits" not in columns:
        return None
    return columns
