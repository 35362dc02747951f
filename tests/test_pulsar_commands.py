"""Every BaseCommand type becomes a typed `frames` row; credentials never leave the decoder."""

from __future__ import annotations

import random

import pyarrow as pa
import pytest
from google.protobuf.message import DecodeError

from pwcap.capture.events import Direction
from pwcap.decode.pulsar import commands
from pwcap.decode.pulsar._pb import pulsar_api_pb2 as pb
from pwcap.decode.pulsar.info import summarize
from pwcap.decode.wire import cursor
from pwcap.tables.columns import ColumnBuffer
from pwcap.tables.schema import arrow_schema
from tests.pulsar_frames import command, decoder, frame, sample_command

ALL_TYPES = [(v.name, v.number) for v in pb.BaseCommand.Type.DESCRIPTOR.values]


def test_the_command_table_covers_exactly_the_protocols_types():
    assert set(commands.SEMANTICS) == {name for name, _ in ALL_TYPES}
    assert {spec.type for spec in commands.SPECS.values()} == {n for _, n in ALL_TYPES}
    assert len(ALL_TYPES) >= 70


@pytest.mark.parametrize(("name", "number"), ALL_TYPES)
def test_every_command_type_becomes_one_frame_row(name, number):
    dec, sink, _ = decoder()
    spec = commands.SPECS[number]
    direction = Direction.B2C if spec.sender == commands.BROKER else Direction.C2B
    wire = frame(sample_command(name))
    dec.on_data(direction, 5_000_000, 0, wire)
    dec.on_close(6_000_000)
    [row] = sink.frames
    assert row["command"] == name
    assert row["command_type"] == number
    assert row["frame_size"] == len(wire)
    assert row["direction"] == ("b2c" if direction == Direction.B2C else "c2b")
    assert row["ts"] == row["ts_first"] == 5_000_000
    assert row["stream_offset"] == 0
    assert pa.Table.from_pylist([row], schema=arrow_schema("frames")).num_rows == 1
    # A lone response is unmatched: its request is missing from a capture that has the SYN.
    unexpected = [a for a in sink.anomalies if a["kind"] != "unmatched_response"]
    assert unexpected == []
    if spec.role in (commands.RESPONSE, commands.RECEIPT, commands.PONG, commands.CONNECTED):
        assert [a["kind"] for a in sink.anomalies] == ["unmatched_response"]


def decode_one(cmd, direction=Direction.C2B):
    dec, sink, _ = decoder()
    dec.on_data(direction, 1, 0, frame(cmd))
    [row] = sink.frames
    return row


def test_flow_carries_consumer_and_permits():
    row = decode_one(command("FLOW", consumer_id=4, messagePermits=1000))
    assert (row["consumer_id"], row["permits"]) == (4, 1000)


def test_subscribe_columns():
    row = decode_one(
        command(
            "SUBSCRIBE",
            topic="persistent://a/b/c",
            subscription="sub-1",
            subType=pb.CommandSubscribe.Key_Shared,
            consumer_id=2,
            request_id=9,
            consumer_name="cons",
        )
    )
    assert row["topic"] == "persistent://a/b/c"
    assert row["subscription"] == "sub-1"
    assert row["sub_type"] == "Key_Shared"
    assert (row["consumer_id"], row["request_id"], row["consumer_name"]) == (2, 9, "cons")


def test_error_code_is_the_server_error_name():
    row = decode_one(
        command("ERROR", request_id=3, error=pb.TopicNotFound, message="no such topic"),
        Direction.B2C,
    )
    assert row["error_code"] == "TopicNotFound"
    assert row["error_message"] == "no such topic"


def test_ack_columns_and_message_ids():
    ids = [pb.MessageIdData(ledgerId=10, entryId=n) for n in (3, 4, 5)]
    row = decode_one(
        command(
            "ACK",
            consumer_id=1,
            ack_type=pb.CommandAck.Cumulative,
            message_id=ids,
            validation_error=pb.CommandAck.ChecksumMismatch,
        )
    )
    assert row["ack_type"] == "Cumulative"
    assert row["validation_error"] == "ChecksumMismatch"
    assert row["num_message_ids"] == 3
    assert (row["ledger_id"], row["entry_id"]) == (10, 3)


def test_message_id_fields_of_a_send_receipt():
    row = decode_one(
        command(
            "SEND_RECEIPT",
            producer_id=1,
            sequence_id=8,
            highest_sequence_id=12,
            message_id={"ledgerId": 77, "entryId": 5, "partition": 2, "batch_index": 1},
        ),
        Direction.B2C,
    )
    assert (row["ledger_id"], row["entry_id"], row["partition"], row["batch_index"]) == (
        77,
        5,
        2,
        1,
    )
    assert (row["sequence_id"], row["highest_sequence_id"]) == (8, 12)


def test_uint64_minus_one_request_id_becomes_minus_one():
    # Brokers close producers with request id -1, sent as the uint64 2**64-1.
    row = decode_one(command("CLOSE_PRODUCER", producer_id=1, request_id=2**64 - 1), Direction.B2C)
    assert row["request_id"] == -1


def test_info_summarises_fields_without_a_column():
    row = decode_one(
        command(
            "LOOKUP_RESPONSE",
            request_id=1,
            response=pb.CommandLookupTopicResponse.Connect,
            brokerServiceUrl="pulsar://b1:6650",
        ),
        Direction.B2C,
    )
    assert "Connect" in row["info"]
    assert "pulsar://b1:6650" in row["info"]


SECRET = b"s3cret-token-value"


def all_text(sink, dec) -> str:
    return repr(sink.frames) + repr(sink.anomalies) + repr(dec.connection_fields())


def test_connect_auth_data_is_reduced_to_method_and_size():
    dec, sink, _ = decoder()
    connect = command(
        "CONNECT",
        client_version="Pulsar-CPP-v3.7",
        protocol_version=21,
        auth_method_name="token",
        auth_data=SECRET,
        original_auth_data=SECRET.decode(),
    )
    dec.on_data(Direction.C2B, 1, 0, frame(connect))
    dec.on_data(
        Direction.B2C, 2, 0, frame(command("CONNECTED", server_version="4.1", protocol_version=20))
    )
    fields = dec.connection_fields()
    assert fields["auth_method"] == "token"
    assert fields["auth_data_size"] == len(SECRET)
    assert fields["client_version"] == "Pulsar-CPP-v3.7"
    assert fields["server_version"] == "4.1"
    assert fields["protocol_version"] == 20
    assert "s3cret" not in all_text(sink, dec)


def test_auth_challenge_and_response_data_never_appear():
    dec, sink, _ = decoder()
    challenge = command(
        "AUTH_CHALLENGE", challenge={"auth_method_name": "token", "auth_data": SECRET}
    )
    response = command("AUTH_RESPONSE", response={"auth_method_name": "token", "auth_data": SECRET})
    dec.on_data(Direction.B2C, 1, 0, frame(challenge))
    dec.on_data(Direction.C2B, 2, 0, frame(response))
    assert [r["command"] for r in sink.frames] == ["AUTH_CHALLENGE", "AUTH_RESPONSE"]
    assert sink.frames[1]["answers"] == "AUTH_CHALLENGE"
    assert "s3cret" not in all_text(sink, dec)


def random_fields(rng: random.Random, message, depth: int = 0) -> None:
    """Set a random subset of ``message``'s fields (nested ones too) to random values."""
    for fd in message.DESCRIPTOR.fields:
        if rng.random() < 0.5 and not fd.is_required:
            continue
        if fd.message_type is not None:
            if depth < 2:
                target = (
                    getattr(message, fd.name).add() if fd.is_repeated else getattr(message, fd.name)
                )
                target.SetInParent()
                random_fields(rng, target, depth + 1)
            continue
        value = random_value(rng, fd)
        if fd.is_repeated:
            getattr(message, fd.name).extend([value] * rng.randint(1, 4))
        else:
            setattr(message, fd.name, value)


def random_value(rng: random.Random, fd):
    if fd.enum_type is not None:
        return rng.choice(fd.enum_type.values).number
    if fd.type == fd.TYPE_STRING:
        return rng.choice(["", "x", "naïve", "persistent://t/ns/topic", "y" * 300])
    if fd.type == fd.TYPE_BYTES:
        return rng.choice([b"", b"\x00\xff", bytes(40)])
    if fd.type == fd.TYPE_BOOL:
        return rng.random() < 0.5
    if fd.type in (fd.TYPE_DOUBLE, fd.TYPE_FLOAT):
        return rng.choice([0.0, 1.5, -2.25])
    if fd.type in (fd.TYPE_INT32, fd.TYPE_SINT32, fd.TYPE_SFIXED32):
        return rng.choice([0, 1, -1, 2**31 - 1])
    if fd.type in (fd.TYPE_UINT32, fd.TYPE_FIXED32):
        return rng.choice([0, 1, 2**32 - 1])
    if fd.type in (fd.TYPE_UINT64, fd.TYPE_FIXED64):
        return rng.choice([0, 1, 2**64 - 1])
    return rng.choice([0, 1, -1, 2**63 - 1])


def tampered(rng: random.Random, data: bytes, body_number: int) -> bytes:
    """``data`` (a BaseCommand) now and then with its command message given twice (the
    two merge), an unknown field in it, or a field of it given again (the last counts)."""
    roll = rng.random()
    fields = cursor(data, 0, len(data))
    spans = []
    while True:
        at = fields.pos
        number = fields.next()
        if number == 0:
            break
        spans.append((number, at, fields.pos, fields.start, fields.stop))
    body = next((s for s in spans if s[0] == body_number), None)
    if body is None or roll > 0.4:
        return data
    _, at, stop, inner_start, inner_stop = body
    inner = data[inner_start:inner_stop]
    if roll < 0.1:  # the command message twice: the two merge
        return data + data[at:stop]
    if roll < 0.2:  # an unknown field, then a field of another wire type than its own
        inner += b"\xf8\x07\x01" + bytes([(rng.randint(1, 15) << 3) | 2, 1, 0x41])
    else:  # its first field given again at its end
        fields = cursor(inner, 0, len(inner))
        first_at = fields.pos
        if fields.next():
            inner += inner[first_at : fields.pos]
    key = data[at : at + 1] if body_number < 16 else data[at : at + 2]
    return data[:at] + key + encoded_length(len(inner)) + inner + data[stop:]


def encoded_length(size: int) -> bytes:
    out = bytearray()
    while True:
        out.append((size & 0x7F) | (0x80 if size > 0x7F else 0))
        size >>= 7
        if not size:
            return bytes(out)


def test_a_kept_summary_is_the_summary_the_fields_make():
    """The `info` kept by the summarised fields' bytes is, for thousands of random
    commands of every type (fields repeated, merged, unknown, of the wrong wire type),
    what summarising the parsed command gives."""
    rng = random.Random(21)
    rows = ColumnBuffer(arrow_schema("frames"), 1)
    checked = 0
    for _ in range(4000):
        spec = rng.choice([s for s in commands.SPECS.values() if s.extractor.info])
        base = pb.BaseCommand(type=spec.type)
        random_fields(rng, getattr(base, spec.field))
        data = tampered(rng, base.SerializePartialToString(), spec.extractor.number)
        try:
            parsed = pb.BaseCommand.FromString(data)
        except DecodeError:
            continue
        sub = spec.extractor.copy(parsed, rows, b"\x00" + data + b"\x00", 1, len(data) + 1)
        assert rows.take_row()["info"] == summarize(sub, spec.extractor.info), data.hex()
        checked += 1
    assert checked > 1000


def test_a_repeated_summary_is_kept_once_and_the_kept_ones_are_bounded():
    spec = commands.SPECS_BY_NAME["LOOKUP"]
    extractor = commands.Extractor(spec.field, spec.extractor.number, (), spec.extractor.info)
    rows = ColumnBuffer(arrow_schema("frames"), 1)
    for request_id in range(500):  # the same options, another request each time
        base = command("LOOKUP", topic="t", request_id=request_id, authoritative=True)
        data = base.SerializeToString()
        extractor.copy(base, rows, data, 0, len(data))
        assert rows.take_row()["info"] == "authoritative=True"
    assert extractor.kept() == 1
    for listener in range(commands.KEPT_SUMMARIES + 10):  # as many distinct ones, and more
        base = command("LOOKUP", topic="t", request_id=1, advertised_listener_name=f"l{listener}")
        data = base.SerializeToString()
        extractor.copy(base, rows, data, 0, len(data))
        assert rows.take_row()["info"] == f"advertised_listener_name=l{listener}"
    assert 0 < extractor.kept() <= commands.KEPT_SUMMARIES
