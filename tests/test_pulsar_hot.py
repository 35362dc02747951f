"""The hot commands read from their wire bytes give exactly what the general path gives.

The general path parses a command with the generated protobuf classes and copies its
fields with the extractor :mod:`commands` builds from the schema. For thousands of
generated SEND, SEND_RECEIPT, MESSAGE, ACK and FLOW commands (every field present or
not, edge values, unknown and repeated fields) and for damaged copies of them, the wire
reader either declines (the general path takes the frame) or writes the very columns the
general path writes.
"""

from __future__ import annotations

import random

import pytest
from google.protobuf.message import DecodeError

from pwcap.decode.pulsar._pb import pulsar_api_pb2 as pb
from pwcap.decode.pulsar.commands import SPECS
from pwcap.decode.pulsar.hot import BODY_FIELDS, HotReader
from pwcap.decode.wire import Fields, WireError, cursor, read_varint
from pwcap.tables.columns import ColumnBuffer
from pwcap.tables.schema import arrow_schema

U64_EDGES = [0, 1, 127, 128, 300, (1 << 31) - 1, 1 << 32, (1 << 63) - 1, 1 << 63, (1 << 64) - 1]
I32_EDGES = [0, 1, -1, -2, 127, 128, (1 << 31) - 1, -(1 << 31)]
U32_EDGES = [0, 1, 1000, (1 << 31) - 1, 1 << 31, (1 << 32) - 1]
ROUNDS = 3000
ROWS = ColumnBuffer(arrow_schema("frames"), 1)  # where either path builds a frame's columns


def general_path(data: bytes) -> tuple[int, dict] | None:
    """(type, columns) as the decoder's general path reads them; None if it cannot."""
    try:
        command = pb.BaseCommand.FromString(data)
    except DecodeError:
        return None
    spec = SPECS.get(command.type)
    if spec is None:
        return None
    spec.extractor.copy(command, ROWS, data, 0, len(data))
    return command.type, ROWS.take_row()


def message_id(rng: random.Random, target: pb.MessageIdData) -> None:
    target.ledgerId = rng.choice(U64_EDGES)
    target.entryId = rng.choice(U64_EDGES)
    if rng.random() < 0.5:
        target.partition = rng.choice(I32_EDGES)
    if rng.random() < 0.5:
        target.batch_index = rng.choice(I32_EDGES)
    if rng.random() < 0.05:
        target.batch_size = 10


def maybe(rng: random.Random, message, field: str, values: list[int], p: float = 0.5) -> None:
    if rng.random() < p:
        setattr(message, field, rng.choice(values))


def random_command(rng: random.Random) -> pb.BaseCommand:
    name = rng.choice(["SEND", "SEND_RECEIPT", "MESSAGE", "ACK", "FLOW"])
    command = pb.BaseCommand(type=pb.BaseCommand.Type.Value(name))
    if name == "SEND":
        body = command.send
        maybe(rng, body, "producer_id", U64_EDGES, 0.95)
        maybe(rng, body, "sequence_id", U64_EDGES, 0.95)
        maybe(rng, body, "num_messages", I32_EDGES)
        maybe(rng, body, "txnid_least_bits", U64_EDGES, 0.2)
        maybe(rng, body, "txnid_most_bits", U64_EDGES, 0.2)
        maybe(rng, body, "highest_sequence_id", U64_EDGES, 0.3)
        maybe(rng, body, "is_chunk", [True, False], 0.05)
        if rng.random() < 0.05:
            message_id(rng, body.message_id)
    elif name == "SEND_RECEIPT":
        body = command.send_receipt
        maybe(rng, body, "producer_id", U64_EDGES, 0.95)
        maybe(rng, body, "sequence_id", U64_EDGES, 0.95)
        maybe(rng, body, "highest_sequence_id", U64_EDGES, 0.3)
        if rng.random() < 0.8:
            message_id(rng, body.message_id)
    elif name == "MESSAGE":
        body = command.message
        maybe(rng, body, "consumer_id", U64_EDGES, 0.95)
        if rng.random() < 0.95:
            message_id(rng, body.message_id)
        maybe(rng, body, "redelivery_count", U32_EDGES)
        maybe(rng, body, "consumer_epoch", U64_EDGES, 0.05)
    elif name == "ACK":
        body = command.ack
        maybe(rng, body, "consumer_id", U64_EDGES, 0.95)
        maybe(rng, body, "ack_type", [0, 1], 0.95)
        for _ in range(rng.choice([0, 1, 1, 2, 5])):
            message_id(rng, body.message_id.add())
        maybe(rng, body, "validation_error", [0, 1, 2, 3, 4], 0.1)
        maybe(rng, body, "txnid_least_bits", U64_EDGES, 0.1)
        maybe(rng, body, "txnid_most_bits", U64_EDGES, 0.1)
        maybe(rng, body, "request_id", U64_EDGES, 0.3)
    else:
        body = command.flow
        maybe(rng, body, "consumer_id", U64_EDGES, 0.95)
        maybe(rng, body, "messagePermits", U32_EDGES, 0.95)
    body.SetInParent()
    return command


def serialized(rng: random.Random, command: pb.BaseCommand) -> bytes:
    data = command.SerializePartialToString()
    roll = rng.random()
    if roll < 0.05:  # an unknown field after the command: the general path skips it
        data += b"\xf8\x07\x01"
    elif roll < 0.1:  # the type field again: the last one counts
        data += bytes([0x08, rng.choice(list(BODY_FIELDS))])
    return data


def damaged(rng: random.Random, data: bytes) -> bytes:
    raw = bytearray(data)
    for _ in range(rng.randint(1, 3)):
        action = rng.random()
        if action < 0.5 and raw:
            raw[rng.randrange(len(raw))] ^= 1 << rng.randrange(8)
        elif action < 0.75 and raw:
            del raw[rng.randrange(len(raw)) :]
        else:
            raw.insert(rng.randrange(len(raw) + 1), rng.randrange(256))
    return bytes(raw)


READER = HotReader()  # one for every command, as a decoder keeps one for its frames


def hot_path(data: bytes, start: int, end: int) -> tuple[int, dict] | None:
    """(type, columns) as the wire reader reads them; None when it declines."""
    command_type = READER.command(data, start, end)
    if command_type < 0 or not READER.columns(ROWS):
        ROWS.discard_row()
        return None
    return command_type, ROWS.take_row()


def assert_same_as_general_path(data: bytes) -> bool:
    """True when the wire reader took the command (and agreed)."""
    hot = hot_path(b"\xaa" + data + b"\xbb", 1, len(data) + 1)  # bounds honoured
    if hot is None:
        return False
    assert hot == general_path(data), data.hex()
    return True


def test_generated_commands_read_the_same_on_both_paths():
    rng = random.Random(20261125)
    taken = 0
    for _ in range(ROUNDS):
        taken += assert_same_as_general_path(serialized(rng, random_command(rng)))
    assert taken > ROUNDS // 2  # the common shapes do take the fast path


def test_damaged_commands_are_declined_or_read_the_same():
    rng = random.Random(7)
    for _ in range(ROUNDS):
        assert_same_as_general_path(damaged(rng, serialized(rng, random_command(rng))))


@pytest.mark.parametrize(
    ("data", "value"),
    [(b"\x00", 0), (b"\x96\x01", 150), (b"\xff" * 9 + b"\x01", (1 << 64) - 1)],
)
def test_varints_read_as_protobuf_writes_them(data, value):
    assert read_varint(data, 0, len(data)) == (value, len(data))


@pytest.mark.parametrize(
    "data",
    [b"", b"\x80", b"\xff" * 9 + b"\x02", b"\xff" * 11],
    ids=["empty", "cut", "65-bit", "long"],
)
def test_a_varint_that_is_not_one_is_an_error(data):
    with pytest.raises(WireError):
        read_varint(data, 0, len(data))


def test_the_cursor_never_reads_past_its_end():
    data = b"\x0a\x05abcde"  # field 1, 5 bytes
    fields = Fields(data, 0, 4)  # the message ends inside the field
    assert fields.next() == 0 and fields.broken
    with pytest.raises(WireError):
        Fields(data, 0, len(data) + 1)


@pytest.mark.parametrize("make", [Fields, cursor], ids=["class", "cursor"])
def test_a_cursor_is_only_ever_placed_within_its_bytes(make):
    """The readers make their cursors with ``cursor`` (compiled: no Python call); it
    checks the bounds as the class does."""
    data = b"\x08\x96\x01"
    fields = make(data, 0, len(data))
    assert (fields.next(), fields.value) == (1, 150)
    for start, end in ((-1, 2), (0, len(data) + 1), (2, 1)):
        with pytest.raises(WireError):
            make(data, start, end)
