# cython: annotation_typing=True
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

import cython
from pwcap.decode.pulsar._pb.pulsar_api_pb2 import BaseCommand, CommandAck
from pwcap.decode.wire import LENGTH_DELIMITED, VARINT

if cython.compiled:  # the cursor's C declarations (wire.pxd): its methods are C calls
    from cython.cimports.pwcap.decode.wire import Fields, cursor
else:
    from pwcap.decode.wire import Fields, cursor

# Compiled, these are C constants: a module global is a dict lookup at every use.
I31 = cython.declare(cython.ulonglong, (1 << 31) - 1)
I63 = cython.declare(cython.ulonglong, (1 << 63) - 1)
U32_MASK = cython.declare(cython.ulonglong, (1 << 32) - 1)
U64_MASK = cython.declare(cython.ulonglong, (1 << 64) - 1)
TYPE_FIELD = cython.declare(cython.int, 1)  # BaseCommand.type
WIRE_VARINT = cython.declare(cython.int, VARINT)
WIRE_LENGTH_DELIMITED = cython.declare(cython.int, LENGTH_DELIMITED)

SEND = cython.declare(cython.int, BaseCommand.SEND)
SEND_RECEIPT = cython.declare(cython.int, BaseCommand.SEND_RECEIPT)
MESSAGE = cython.declare(cython.int, BaseCommand.MESSAGE)
ACK = cython.declare(cython.int, BaseCommand.ACK)
FLOW = cython.declare(cython.int, BaseCommand.FLOW)
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
    fields: Fields = cursor(data, start, end)
    command_type: cython.longlong = -1
    body: cython.int = -1
    number: cython.int
    body_start = body_stop = 0
    while True:
        number = fields.next()
        if number == 0:
            break
        if number == TYPE_FIELD and fields.wire_type == WIRE_VARINT:
            value: cython.ulonglong = fields.value
            command_type = value if value <= I63 else -1
        elif number in _BODY_NUMBERS and fields.wire_type == WIRE_LENGTH_DELIMITED and body < 0:
            body, body_start, body_stop = number, fields.start, fields.stop
        else:
            return None
    if fields.broken or BODY_FIELDS.get(command_type) != body:
        return None
    body_fields: Fields = cursor(data, body_start, body_stop)
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


# The two conversions below are written so that C integers (compiled) and Python's
# (interpreted) give the same values: no C cast ever meets a value out of its range.


@cython.cfunc
@cython.inline
def _signed(value: cython.ulonglong) -> cython.longlong:
    """A uint64 as Java (and an int64 column) reads it."""
    if value > I63:
        return -cython.cast(cython.longlong, U64_MASK - value) - 1
    return cython.cast(cython.longlong, value)


@cython.ccall
def int32(value: cython.ulonglong) -> cython.int:
    """An int32 field's varint, truncated to 32 bits as protobuf does."""
    low: cython.ulonglong = value & U32_MASK
    if low > I31:
        return -cython.cast(cython.int, U32_MASK - low) - 1
    return cython.cast(cython.int, low)


@cython.cfunc
@cython.locals(number=cython.int, value=cython.ulonglong)
def _send(fields: Fields) -> object:
    columns: Columns = {}
    found: cython.int = 0  # bit 1: producer_id, bit 2: sequence_id
    while True:
        number = fields.next()
        if number == 0:
            break
        if fields.wire_type != WIRE_VARINT:
            return None
        value = fields.value
        if number == 1:
            columns["producer_id"] = _signed(value)
            found |= 1
        elif number == 2:
            columns["sequence_id"] = _signed(value)
            found |= 2
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
    if found != 3:  # producer and sequence ids are required
        return None
    return columns


@cython.cfunc
@cython.locals(number=cython.int, value=cython.ulonglong)
def _send_receipt(fields: Fields) -> object:
    columns: Columns = {}
    found: cython.int = 0  # bit 1: producer_id, bit 2: sequence_id
    seen_id: cython.bint = False
    while True:
        number = fields.next()
        if number == 0:
            break
        if number == 3 and fields.wire_type == WIRE_LENGTH_DELIMITED and not seen_id:
            seen_id = True
            if not _message_id(cursor(fields.data, fields.start, fields.stop), columns):
                return None
        elif fields.wire_type != WIRE_VARINT:
            return None
        elif number == 1:
            columns["producer_id"] = _signed(fields.value)
            found |= 1
        elif number == 2:
            columns["sequence_id"] = _signed(fields.value)
            found |= 2
        elif number == 4:
            columns["highest_sequence_id"] = _signed(fields.value)
        else:
            return None
    if found != 3:  # producer and sequence ids are required
        return None
    return columns


@cython.cfunc
@cython.locals(number=cython.int, value=cython.ulonglong)
def _message(fields: Fields, data: bytes) -> object:
    columns: Columns = {}
    seen_consumer: cython.bint = False
    seen_id: cython.bint = False
    while True:
        number = fields.next()
        if number == 0:
            break
        if number == 2 and fields.wire_type == WIRE_LENGTH_DELIMITED and not seen_id:
            seen_id = True
            if not _message_id(cursor(data, fields.start, fields.stop), columns):
                return None
        elif fields.wire_type != WIRE_VARINT:
            return None
        elif number == 1:
            columns["consumer_id"] = _signed(fields.value)
            seen_consumer = True
        elif number == 3:
            value = fields.value & U32_MASK  # a uint32 in an int32 column: null past it
            columns["redelivery_count"] = value if value <= I31 else None
        else:  # ack_set, consumer_epoch (the `info` column): the general path
            return None
    if not seen_consumer or not seen_id:
        return None
    return columns


@cython.cfunc
@cython.locals(number=cython.int, value=cython.ulonglong)
def _ack(fields: Fields, data: bytes) -> object:
    columns: Columns = {}
    ids: list[Columns] = []
    while True:
        number = fields.next()
        if number == 0:
            break
        if number == 3 and fields.wire_type == WIRE_LENGTH_DELIMITED:
            listed: Columns = {}
            if not _message_id(cursor(data, fields.start, fields.stop), listed):
                return None
            ids.append(
                {
                    "ledger_id": listed["ledger_id"],
                    "entry_id": listed["entry_id"],
                    "partition": listed.get("partition"),
                    "batch_index": listed.get("batch_index"),
                }
            )
        elif fields.wire_type != WIRE_VARINT:
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


@cython.cfunc
def _message_id(fields: Fields, columns: dict) -> cython.bint:
    """A MessageIdData's ledger and entry, and its partition and batch index unless they
    hold -1 (their default, "not set"), into ``columns``; False to leave it to the general
    path (another field, a missing required one)."""
    ledger: cython.ulonglong = 0
    entry: cython.ulonglong = 0
    found: cython.int = 0  # bit 1: the ledger, bit 2: the entry
    number: cython.int
    value: cython.ulonglong
    while True:
        number = fields.next()
        if number == 0:
            break
        if fields.wire_type != WIRE_VARINT:
            return False
        value = fields.value
        if number == 1:
            ledger = value
            found |= 1
        elif number == 2:
            entry = value
            found |= 2
        elif number == 3:
            columns["partition"] = int32(value)
        elif number == 4:
            columns["batch_index"] = int32(value)
        else:  # ack_set, batch_size, first_chunk_message_id
            return False
    if fields.broken or found != 3:
        return False
    columns["ledger_id"] = _signed(ledger)
    columns["entry_id"] = _signed(entry)
    for column in ("partition", "batch_index"):
        if columns.get(column) == -1:
            del columns[column]
    return True


@cython.cfunc
@cython.locals(number=cython.int, value=cython.ulonglong)
def _flow(fields: Fields) -> object:
    columns: Columns = {}
    while True:
        number = fields.next()
        if number == 0:
            break
        if fields.wire_type != WIRE_VARINT:
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
