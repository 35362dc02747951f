# cython: annotation_typing=True
"""The commands of every message's path, read straight from their wire bytes.

SEND, SEND_RECEIPT, MESSAGE, ACK and FLOW are most of the frames of any busy connection.
A :class:`HotReader` reads their column-worthy fields with a :class:`Fields` cursor and
writes the same columns the generated extractor of :mod:`commands` would copy out of the
parsed protobuf, straight into the frame's row being built. Anything it is not sure to
read exactly as protobuf does (another command, a field it does not map to a column, a
repeated or merged message, a wire type out of place, an enum value the schema lacks,
damage) makes it decline, and the frame takes the general path, which parses it with
the generated classes. A test holds the two paths equal on every command it can generate
and on damaged ones.
"""

from __future__ import annotations

import cython

from ...tables.schema import position
from ..wire import LENGTH_DELIMITED, VARINT, field_number
from ._pb.pulsar_api_pb2 import (
    BaseCommand,
    CommandAck,
    CommandFlow,
    CommandMessage,
    CommandSend,
    CommandSendReceipt,
    MessageIdData,
)

if cython.compiled:  # C declarations (wire.pxd, columns.pxd): their methods are C calls
    from cython.cimports.pwcap.decode.wire import Fields, cursor
    from cython.cimports.pwcap.tables.columns import ColumnBuffer
else:
    from ...tables.columns import ColumnBuffer
    from ..wire import Fields, cursor

# Compiled, these are C constants: a module global is a dict lookup at every use.
I31 = cython.declare(cython.ulonglong, (1 << 31) - 1)
I63 = cython.declare(cython.ulonglong, (1 << 63) - 1)
U32_MASK = cython.declare(cython.ulonglong, (1 << 32) - 1)
U64_MASK = cython.declare(cython.ulonglong, (1 << 64) - 1)
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
ACK_TYPES = {v.number: v.name for v in CommandAck.AckType.DESCRIPTOR.values}
VALIDATION_ERRORS = {v.number: v.name for v in CommandAck.ValidationError.DESCRIPTOR.values}
# BODY_FIELDS as C constants when compiled (every frame's fields are compared with them),
# and the enum tables as typed C globals (an untyped global is a dict lookup plus a method
# call per use).
SEND_BODY = cython.declare(cython.int, BODY_FIELDS[SEND])
SEND_RECEIPT_BODY = cython.declare(cython.int, BODY_FIELDS[SEND_RECEIPT])
MESSAGE_BODY = cython.declare(cython.int, BODY_FIELDS[MESSAGE])
ACK_BODY = cython.declare(cython.int, BODY_FIELDS[ACK])
FLOW_BODY = cython.declare(cython.int, BODY_FIELDS[FLOW])
_ACK_TYPES = cython.declare(dict, ACK_TYPES)
_VALIDATION_ERRORS = cython.declare(dict, VALIDATION_ERRORS)
# The fields read, by number, from the schema (field_number checks each one's wire type
# is the one the reader expects). Compiled, C globals set once at import, not module
# globals looked up at every frame.
TYPE_FIELD = cython.declare(cython.int, field_number(BaseCommand, "type", VARINT))
SEND_PRODUCER_ID = cython.declare(cython.int, field_number(CommandSend, "producer_id", VARINT))
SEND_SEQUENCE_ID = cython.declare(cython.int, field_number(CommandSend, "sequence_id", VARINT))
SEND_NUM_MESSAGES = cython.declare(cython.int, field_number(CommandSend, "num_messages", VARINT))
SEND_TXNID_LEAST_BITS = cython.declare(
    cython.int, field_number(CommandSend, "txnid_least_bits", VARINT)
)
SEND_TXNID_MOST_BITS = cython.declare(
    cython.int, field_number(CommandSend, "txnid_most_bits", VARINT)
)
SEND_HIGHEST_SEQUENCE_ID = cython.declare(
    cython.int, field_number(CommandSend, "highest_sequence_id", VARINT)
)
RECEIPT_PRODUCER_ID = cython.declare(
    cython.int, field_number(CommandSendReceipt, "producer_id", VARINT)
)
RECEIPT_SEQUENCE_ID = cython.declare(
    cython.int, field_number(CommandSendReceipt, "sequence_id", VARINT)
)
RECEIPT_MESSAGE_ID = cython.declare(
    cython.int, field_number(CommandSendReceipt, "message_id", LENGTH_DELIMITED)
)
RECEIPT_HIGHEST_SEQUENCE_ID = cython.declare(
    cython.int, field_number(CommandSendReceipt, "highest_sequence_id", VARINT)
)
MESSAGE_CONSUMER_ID = cython.declare(
    cython.int, field_number(CommandMessage, "consumer_id", VARINT)
)
MESSAGE_MESSAGE_ID = cython.declare(
    cython.int, field_number(CommandMessage, "message_id", LENGTH_DELIMITED)
)
MESSAGE_REDELIVERY_COUNT = cython.declare(
    cython.int, field_number(CommandMessage, "redelivery_count", VARINT)
)
ACK_CONSUMER_ID = cython.declare(cython.int, field_number(CommandAck, "consumer_id", VARINT))
ACK_ACK_TYPE = cython.declare(cython.int, field_number(CommandAck, "ack_type", VARINT))
ACK_MESSAGE_ID = cython.declare(
    cython.int, field_number(CommandAck, "message_id", LENGTH_DELIMITED)
)
ACK_VALIDATION_ERROR = cython.declare(
    cython.int, field_number(CommandAck, "validation_error", VARINT)
)
ACK_TXNID_LEAST_BITS = cython.declare(
    cython.int, field_number(CommandAck, "txnid_least_bits", VARINT)
)
ACK_TXNID_MOST_BITS = cython.declare(
    cython.int, field_number(CommandAck, "txnid_most_bits", VARINT)
)
ACK_REQUEST_ID = cython.declare(cython.int, field_number(CommandAck, "request_id", VARINT))
FLOW_CONSUMER_ID = cython.declare(cython.int, field_number(CommandFlow, "consumer_id", VARINT))
FLOW_PERMITS = cython.declare(cython.int, field_number(CommandFlow, "messagePermits", VARINT))
ID_LEDGER = cython.declare(cython.int, field_number(MessageIdData, "ledgerId", VARINT))
ID_ENTRY = cython.declare(cython.int, field_number(MessageIdData, "entryId", VARINT))
ID_PARTITION = cython.declare(cython.int, field_number(MessageIdData, "partition", VARINT))
ID_BATCH_INDEX = cython.declare(cython.int, field_number(MessageIdData, "batch_index", VARINT))
# The `frames` columns the hot commands fill.
PRODUCER_ID = cython.declare(cython.Py_ssize_t, position("frames", "producer_id"))
SEQUENCE_ID = cython.declare(cython.Py_ssize_t, position("frames", "sequence_id"))
HIGHEST_SEQUENCE_ID = cython.declare(cython.Py_ssize_t, position("frames", "highest_sequence_id"))
CONSUMER_ID = cython.declare(cython.Py_ssize_t, position("frames", "consumer_id"))
REDELIVERY_COUNT = cython.declare(cython.Py_ssize_t, position("frames", "redelivery_count"))
ACK_TYPE = cython.declare(cython.Py_ssize_t, position("frames", "ack_type"))
VALIDATION_ERROR = cython.declare(cython.Py_ssize_t, position("frames", "validation_error"))
TXNID_LEAST_BITS = cython.declare(cython.Py_ssize_t, position("frames", "txnid_least_bits"))
TXNID_MOST_BITS = cython.declare(cython.Py_ssize_t, position("frames", "txnid_most_bits"))
REQUEST_ID = cython.declare(cython.Py_ssize_t, position("frames", "request_id"))
NUM_MESSAGE_IDS = cython.declare(cython.Py_ssize_t, position("frames", "num_message_ids"))
MESSAGE_IDS = cython.declare(cython.Py_ssize_t, position("frames", "message_ids"))
LEDGER_ID = cython.declare(cython.Py_ssize_t, position("frames", "ledger_id"))
ENTRY_ID = cython.declare(cython.Py_ssize_t, position("frames", "entry_id"))
PARTITION = cython.declare(cython.Py_ssize_t, position("frames", "partition"))
BATCH_INDEX = cython.declare(cython.Py_ssize_t, position("frames", "batch_index"))
NUM_MESSAGES = cython.declare(cython.Py_ssize_t, position("frames", "num_messages"))
PERMITS = cython.declare(cython.Py_ssize_t, position("frames", "permits"))


@cython.cclass
class HotReader:
    """Reads the hot commands of one connection's frames in two steps: :meth:`command`
    finds a frame's type (which picks its kind), :meth:`columns` then writes its
    command message's columns into the row being built.

    Its two cursors are moved from message to message, so a frame costs no cursor
    allocation; they let go of a frame's bytes once it is read (a connection may sit
    idle long after its last frame, which may be megabytes). Its C fields (in
    ``hot.pxd``) are where :meth:`_message_id` leaves the MessageIdData it read, as C
    integers.
    """

    def __init__(self) -> None:
        self._fields = cursor(b"", 0, 0)
        self._id = cursor(b"", 0, 0)
        self._type = -1
        self._ledger = self._entry = 0
        self._partition = self._batch_index = -1

    @cython.ccall
    def command(self, data: bytes, start: cython.Py_ssize_t, end: cython.Py_ssize_t) -> cython.int:
        """The type of the BaseCommand in ``data[start:end]`` when it is a hot command
        this reader takes, its command message then the one :meth:`columns` reads; -1
        otherwise (the general path then parses it)."""
        self._type = self._find(data, start, end)
        if self._type < 0:
            self._release()
        return self._type

    @cython.cfunc
    def _find(self, data: bytes, start: cython.Py_ssize_t, end: cython.Py_ssize_t) -> cython.int:
        """:meth:`command`'s walk of the BaseCommand's fields; the cursor is left on the
        command message."""
        fields: Fields = self._fields
        fields.place(data, start, end)
        command_type: cython.longlong = -1
        body: cython.int = -1
        number: cython.int
        body_start: cython.Py_ssize_t = 0
        body_stop: cython.Py_ssize_t = 0
        while True:
            number = fields.next()
            if number == 0:
                break
            if number == TYPE_FIELD and fields.wire_type == WIRE_VARINT:
                value: cython.ulonglong = fields.value
                command_type = value if value <= I63 else -1
            elif (
                number in (SEND_BODY, SEND_RECEIPT_BODY, MESSAGE_BODY, ACK_BODY, FLOW_BODY)
                and fields.wire_type == WIRE_LENGTH_DELIMITED
                and body < 0
            ):
                body, body_start, body_stop = number, fields.start, fields.stop
            else:
                return -1
        if fields.broken or body < 0 or _body_field(command_type) != body:
            return -1
        fields.place(data, body_start, body_stop)
        return command_type

    @cython.ccall
    def columns(self, rows: ColumnBuffer) -> cython.bint:
        """Write the columns of the command message :meth:`command` found into the row
        ``rows`` is building; False when the general path must read it (the row may then
        hold some of them: it is to be discarded)."""
        fields: Fields = self._fields
        command_type: cython.int = self._type
        self._type = -1  # each command is read once
        ok: cython.bint
        if command_type == SEND:
            ok = _send(fields, rows)
        elif command_type == SEND_RECEIPT:
            ok = self._send_receipt(rows)
        elif command_type == MESSAGE:
            ok = self._message(rows)
        elif command_type == ACK:
            ok = self._ack(rows)
        elif command_type == FLOW:
            ok = _flow(fields, rows)
        else:
            ok = False
        ok = ok and not fields.broken
        self._release()
        return ok

    @cython.cfunc
    def _release(self) -> cython.void:
        """Let go of the frame's bytes (see the class doc)."""
        self._fields.place(b"", 0, 0)
        self._id.place(b"", 0, 0)

    @cython.cfunc
    @cython.locals(number=cython.int)
    def _send_receipt(self, rows: ColumnBuffer) -> cython.bint:
        fields: Fields = self._fields
        found: cython.int = 0  # bit 1: producer_id, bit 2: sequence_id
        seen_id: cython.bint = False
        while True:
            number = fields.next()
            if number == 0:
                break
            if (
                number == RECEIPT_MESSAGE_ID
                and fields.wire_type == WIRE_LENGTH_DELIMITED
                and not seen_id
            ):
                seen_id = True
                if not self._message_id():
                    return False
                self._put_message_id(rows)
            elif fields.wire_type != WIRE_VARINT:
                return False
            elif number == RECEIPT_PRODUCER_ID:
                rows.set_int(PRODUCER_ID, _signed(fields.value))
                found |= 1
            elif number == RECEIPT_SEQUENCE_ID:
                rows.set_int(SEQUENCE_ID, _signed(fields.value))
                found |= 2
            elif number == RECEIPT_HIGHEST_SEQUENCE_ID:
                rows.set_int(HIGHEST_SEQUENCE_ID, _signed(fields.value))
            else:
                return False
        return found == 3  # producer and sequence ids are required

    @cython.cfunc
    @cython.locals(number=cython.int, value=cython.ulonglong)
    def _message(self, rows: ColumnBuffer) -> cython.bint:
        fields: Fields = self._fields
        seen_consumer: cython.bint = False
        seen_id: cython.bint = False
        while True:
            number = fields.next()
            if number == 0:
                break
            if (
                number == MESSAGE_MESSAGE_ID
                and fields.wire_type == WIRE_LENGTH_DELIMITED
                and not seen_id
            ):
                seen_id = True
                if not self._message_id():
                    return False
                self._put_message_id(rows)
            elif fields.wire_type != WIRE_VARINT:
                return False
            elif number == MESSAGE_CONSUMER_ID:
                rows.set_int(CONSUMER_ID, _signed(fields.value))
                seen_consumer = True
            elif number == MESSAGE_REDELIVERY_COUNT:
                value = fields.value & U32_MASK  # a uint32 in an int32 column: null past it
                if value <= I31:
                    rows.set_int(REDELIVERY_COUNT, value)
            else:  # ack_set, consumer_epoch: the general path
                return False
        return seen_consumer and seen_id

    @cython.cfunc
    @cython.locals(number=cython.int, value=cython.ulonglong)
    def _ack(self, rows: ColumnBuffer) -> cython.bint:
        fields: Fields = self._fields
        ids: cython.Py_ssize_t = 0
        found: cython.int = 0  # bit 1: consumer_id, bit 2: ack_type
        while True:
            number = fields.next()
            if number == 0:
                break
            if number == ACK_MESSAGE_ID and fields.wire_type == WIRE_LENGTH_DELIMITED:
                if not self._message_id():
                    return False
                if not ids:  # the first id also fills the frame's own columns
                    self._put_message_id(rows)
                ids += 1
                rows.add_struct(
                    MESSAGE_IDS,
                    self._ledger,
                    self._entry,
                    self._partition,
                    self._batch_index,
                    id_nulls(self._partition, self._batch_index),
                )
            elif fields.wire_type != WIRE_VARINT:
                return False
            elif number == ACK_CONSUMER_ID:
                rows.set_int(CONSUMER_ID, _signed(fields.value))
                found |= 1
            elif number == ACK_ACK_TYPE and fields.value in _ACK_TYPES:
                rows.set_text(ACK_TYPE, _ACK_TYPES[fields.value])
                found |= 2
            elif number == ACK_VALIDATION_ERROR and fields.value in _VALIDATION_ERRORS:
                rows.set_text(VALIDATION_ERROR, _VALIDATION_ERRORS[fields.value])
            elif number == ACK_TXNID_LEAST_BITS:
                rows.set_int(TXNID_LEAST_BITS, _signed(fields.value))
            elif number == ACK_TXNID_MOST_BITS:
                rows.set_int(TXNID_MOST_BITS, _signed(fields.value))
            elif number == ACK_REQUEST_ID:
                rows.set_int(REQUEST_ID, _signed(fields.value))
            else:  # properties (the `info` column), an enum value the schema lacks
                return False
        if found != 3:  # consumer id and ack type are required
            return False
        rows.set_int(NUM_MESSAGE_IDS, ids)
        return True

    @cython.cfunc
    @cython.locals(number=cython.int, value=cython.ulonglong)
    def _message_id(self) -> cython.bint:
        """The MessageIdData the command message's cursor is on, into this reader's
        fields; False to leave it to the general path (another field, a missing required
        one). A partition or batch index of -1 is their default, "not set", as is their
        absence."""
        fields: Fields = self._id
        fields.place(self._fields.data, self._fields.start, self._fields.stop)
        ledger: cython.ulonglong = 0
        entry: cython.ulonglong = 0
        found: cython.int = 0  # bit 1: the ledger, bit 2: the entry
        self._partition = self._batch_index = -1
        while True:
            number = fields.next()
            if number == 0:
                break
            if fields.wire_type != WIRE_VARINT:
                return False
            value = fields.value
            if number == ID_LEDGER:
                ledger = value
                found |= 1
            elif number == ID_ENTRY:
                entry = value
                found |= 2
            elif number == ID_PARTITION:
                self._partition = int32(value)
            elif number == ID_BATCH_INDEX:
                self._batch_index = int32(value)
            else:  # ack_set, batch_size, first_chunk_message_id
                return False
        if fields.broken or found != 3:
            return False
        self._ledger = _signed(ledger)
        self._entry = _signed(entry)
        return True

    @cython.cfunc
    def _put_message_id(self, rows: ColumnBuffer) -> cython.void:
        """The message id :meth:`_message_id` read, as the frame's columns."""
        rows.set_int(LEDGER_ID, self._ledger)
        rows.set_int(ENTRY_ID, self._entry)
        if self._partition != -1:
            rows.set_int(PARTITION, self._partition)
        if self._batch_index != -1:
            rows.set_int(BATCH_INDEX, self._batch_index)


@cython.ccall
def id_nulls(partition: cython.longlong, batch_index: cython.longlong) -> cython.int:
    """The null fields of a `message_ids` element (ColumnBuffer.add_struct's ``nulls``):
    a partition or batch index of -1, their default, means "not set"."""
    return (4 if partition == -1 else 0) | (8 if batch_index == -1 else 0)


@cython.cfunc
@cython.inline
def _body_field(command_type: cython.longlong) -> cython.int:
    """``BODY_FIELDS[command_type]``; -1 for a type this reader does not take."""
    if command_type == SEND:
        return SEND_BODY
    if command_type == SEND_RECEIPT:
        return SEND_RECEIPT_BODY
    if command_type == MESSAGE:
        return MESSAGE_BODY
    if command_type == ACK:
        return ACK_BODY
    if command_type == FLOW:
        return FLOW_BODY
    return -1


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
def _send(fields: Fields, rows: ColumnBuffer) -> cython.bint:
    found: cython.int = 0  # bit 1: producer_id, bit 2: sequence_id
    while True:
        number = fields.next()
        if number == 0:
            break
        if fields.wire_type != WIRE_VARINT:
            return False
        value = fields.value
        if number == SEND_PRODUCER_ID:
            rows.set_int(PRODUCER_ID, _signed(value))
            found |= 1
        elif number == SEND_SEQUENCE_ID:
            rows.set_int(SEQUENCE_ID, _signed(value))
            found |= 2
        elif number == SEND_NUM_MESSAGES:
            rows.set_int(NUM_MESSAGES, int32(value))
        elif number == SEND_TXNID_LEAST_BITS:
            rows.set_int(TXNID_LEAST_BITS, _signed(value))
        elif number == SEND_TXNID_MOST_BITS:
            rows.set_int(TXNID_MOST_BITS, _signed(value))
        elif number == SEND_HIGHEST_SEQUENCE_ID:
            rows.set_int(HIGHEST_SEQUENCE_ID, _signed(value))
        else:  # is_chunk, marker (the `info` column), message_id: the general path
            return False
    return found == 3  # producer and sequence ids are required


@cython.cfunc
@cython.locals(number=cython.int)
def _flow(fields: Fields, rows: ColumnBuffer) -> cython.bint:
    found: cython.int = 0  # bit 1: consumer_id, bit 2: permits
    while True:
        number = fields.next()
        if number == 0:
            break
        if fields.wire_type != WIRE_VARINT:
            return False
        if number == FLOW_CONSUMER_ID:
            rows.set_int(CONSUMER_ID, _signed(fields.value))
            found |= 1
        elif number == FLOW_PERMITS:
            rows.set_int(PERMITS, fields.value & U32_MASK)
            found |= 2
        else:
            return False
    return found == 3  # consumer id and permits are required
