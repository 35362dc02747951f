"""Message metadata read from its wire bytes reads exactly as the generated classes read it.

For thousands of generated MessageMetadata and SingleMessageMetadata (the common fields
at edge values, rarer fields now and then, a field twice, unknown fields, text that is
not UTF-8) and damaged copies of them, the wire reader either declines (None: the
generated class takes the bytes) or answers every attribute the message decoder reads,
and every ``HasField`` it asks, with the generated class's own answer. Where the
generated class reads the bytes, its reading handed over (``entry_from_generated``,
``member_from_generated``: what the decoder reads when the wire reader declines) answers
the same too, its text escaped where the bytes are not UTF-8.
"""

from __future__ import annotations

import random

from google.protobuf.message import DecodeError

from pwcap.decode.pulsar._pb import pulsar_api_pb2 as pb
from pwcap.decode.pulsar.metadata import (
    entry_from_generated,
    member_from_generated,
    read_metadata,
    read_single,
)
from pwcap.decode.wire import text
from tests.test_pulsar_hot import I32_EDGES, U32_EDGES, U64_EDGES, damaged

ROUNDS = 3000
TEXTS = ["", "p", "producer-1", "naïve-ünïcode", "x" * 200]
# What pwcap.decode.pulsar.messages reads of each.
METADATA_READS = (
    "producer_name",
    "sequence_id",
    "publish_time",
    "partition_key",
    "compression",
    "uncompressed_size",
    "num_messages_in_batch",
    "event_time",
    "ordering_key",
    "replicated_from",
    "null_value",
    "uuid",
    "num_chunks_from_msg",
    "chunk_id",
    "total_chunk_msg_size",
)
METADATA_PRESENCE = ("num_messages_in_batch", "uuid")
METADATA_TEXTS = ("producer_name", "partition_key")
SINGLE_READS = (
    "payload_size",
    "partition_key",
    "event_time",
    "ordering_key",
    "sequence_id",
    "null_value",
)
SINGLE_PRESENCE = ("sequence_id", "partition_key", "ordering_key", "payload_size")
SINGLE_TEXTS = ("partition_key",)
# reader of the wire bytes -> (the generated class, what its reading is handed to, the
# attributes and presence the decoder asks, its text fields)
READINGS = {
    read_metadata: (
        pb.MessageMetadata,
        entry_from_generated,
        METADATA_READS,
        METADATA_PRESENCE,
        METADATA_TEXTS,
    ),
    read_single: (
        pb.SingleMessageMetadata,
        member_from_generated,
        SINGLE_READS,
        SINGLE_PRESENCE,
        SINGLE_TEXTS,
    ),
}


def random_metadata(rng: random.Random) -> bytes:
    md = pb.MessageMetadata()
    if rng.random() < 0.97:
        md.producer_name = rng.choice(TEXTS)
    if rng.random() < 0.97:
        md.sequence_id = rng.choice(U64_EDGES)
    if rng.random() < 0.97:
        md.publish_time = rng.choice(U64_EDGES)
    if rng.random() < 0.3:
        md.partition_key = rng.choice(TEXTS)
    if rng.random() < 0.3:
        md.compression = rng.choice([0, 1, 2, 3, 4])
    if rng.random() < 0.3:
        md.uncompressed_size = rng.choice(U32_EDGES)
    if rng.random() < 0.4:
        md.num_messages_in_batch = rng.choice(I32_EDGES)
    if rng.random() < 0.3:
        md.event_time = rng.choice(U64_EDGES)
    if rng.random() < 0.2:
        _add_properties(rng, md.properties)
    if rng.random() < 0.05:
        md.uuid = "u-1"
        md.num_chunks_from_msg = 2
    if rng.random() < 0.05:
        md.ordering_key = b"ok"
    if rng.random() < 0.03:
        md.encryption_keys.add(key="k", value=b"v")
    if rng.random() < 0.03:
        md.replicated_from = rng.choice(TEXTS)
    if rng.random() < 0.03:
        md.null_value = True
    if rng.random() < 0.05:
        md.chunk_id, md.total_chunk_msg_size = 1, rng.choice(I32_EDGES)
    if rng.random() < 0.1:  # fields the decoder never reads
        md.schema_version = b"\x00\x01"
        md.deliver_at_time = rng.choice(I32_EDGES)
        md.replicate_to.append(rng.choice(TEXTS))
    return _tampered(rng, md.SerializePartialToString())


def random_single(rng: random.Random) -> bytes:
    single = pb.SingleMessageMetadata()
    if rng.random() < 0.97:
        single.payload_size = rng.choice(I32_EDGES)
    if rng.random() < 0.3:
        single.partition_key = rng.choice(TEXTS)
    if rng.random() < 0.3:
        single.event_time = rng.choice(U64_EDGES)
    if rng.random() < 0.3:
        single.ordering_key = rng.choice([b"", b"key", bytes(range(256))])
    if rng.random() < 0.5:
        single.sequence_id = rng.choice(U64_EDGES)
    if rng.random() < 0.05:
        single.null_value = True
    if rng.random() < 0.2:
        _add_properties(rng, single.properties)
    if rng.random() < 0.1:  # fields the decoder never reads
        single.compacted_out = True
        single.partition_key_b64_encoded = True
    return _tampered(rng, single.SerializePartialToString())


def _add_properties(rng: random.Random, properties) -> None:
    for _ in range(rng.choice([1, 2, 5])):
        properties.add(key=rng.choice(TEXTS), value=rng.choice(TEXTS))


def _tampered(rng: random.Random, data: bytes) -> bytes:
    roll = rng.random()
    if roll < 0.03:  # an unknown field: the generated class keeps it aside
        return data + b"\xf8\x07\x01"
    if roll < 0.06:  # field 2 (a varint in both messages) again: the last one counts
        return data + b"\x10\x05"
    if roll < 0.09:  # producer_name / partition_key that is not UTF-8
        return data + b"\x0a\x02\xff\xfe"
    if roll < 0.11:  # an enum value the schema lacks
        return data + b"\x40\x09"
    return data


def _same(ours, theirs, reads: tuple[str, ...], presence: tuple[str, ...], texts=()) -> None:
    """``ours`` answers as ``theirs``; its ``texts`` as :func:`text` makes theirs."""
    for name in reads:
        expected = getattr(theirs, name)
        if name in texts:
            expected = text(expected)
        assert getattr(ours, name) == expected, name
        assert type(getattr(ours, name)) is type(expected), name
    for name in presence:
        assert ours.HasField(name) == theirs.HasField(name), name
    expected_properties = [(text(p.key), text(p.value)) for p in theirs.properties]
    assert list(ours.properties) == expected_properties


def check(data: bytes, reader) -> bool:
    """True when the wire reader took the bytes (and agreed with the generated class)."""
    generated, handed_over, reads, presence, texts = READINGS[reader]
    ours = reader(b"\xaa" + data + b"\xbb", 1, len(data) + 1)  # bounds honoured
    try:
        theirs = generated.FromString(data)
    except DecodeError as exc:
        if ours is None:
            return False
        raise AssertionError(f"read what the generated class refuses: {data.hex()}") from exc
    adopted = handed_over(theirs)
    _same(adopted, theirs, reads, presence, texts)
    if reader is read_metadata:
        assert adopted.encrypted == bool(theirs.encryption_keys)
    if ours is None:
        return False
    _same(ours, theirs, reads, presence)
    if reader is read_metadata:
        assert not theirs.encryption_keys and not ours.encrypted
    return True


def test_generated_metadata_reads_the_same_both_ways():
    rng = random.Random(11)
    taken = sum(check(random_metadata(rng), read_metadata) for _ in range(ROUNDS))
    assert taken > ROUNDS // 2  # the common shape does take the wire reader


def test_generated_batch_members_read_the_same_both_ways():
    rng = random.Random(12)
    taken = sum(check(random_single(rng), read_single) for _ in range(ROUNDS))
    assert taken > ROUNDS // 2


def test_damaged_metadata_is_declined_or_read_the_same():
    rng = random.Random(13)
    for _ in range(ROUNDS):
        check(damaged(rng, random_metadata(rng)), read_metadata)
        check(damaged(rng, random_single(rng)), read_single)


def test_a_required_field_missing_is_left_to_the_generated_class():
    md = pb.MessageMetadata(producer_name="p", sequence_id=1)  # no publish_time
    data = md.SerializePartialToString()
    assert read_metadata(data, 0, len(data)) is None
    single = pb.SingleMessageMetadata(event_time=5).SerializePartialToString()  # no payload_size
    assert read_single(single, 0, len(single)) is None


def test_properties_read_in_order_or_left_to_the_generated_class():
    md = pb.MessageMetadata(producer_name="p", sequence_id=1, publish_time=2)
    md.properties.add(key="b", value="2")
    md.properties.add(key="a", value="")
    md.properties.add(key="ключ", value="naïve")
    data = md.SerializePartialToString()
    expected = [("b", "2"), ("a", ""), ("ключ", "naïve")]
    assert read_metadata(data, 0, len(data)).properties == expected
    # A KeyValue without its value, with a key or a value that is not UTF-8, or with a
    # key twice: not the common shape.
    for pair in (
        b"\x0a\x01k",
        b"\x0a\x01\xff\x12\x00",
        b"\x0a\x01k\x12\x02\xc3\x28",
        b"\x0a\x01k\x12\x00\x0a\x01j",
    ):
        bad = data + b"\x22" + bytes([len(pair)]) + pair
        assert read_metadata(bad, 0, len(bad)) is None


def test_chunks_and_fields_never_read_take_the_wire_reader():
    md = pb.MessageMetadata(producer_name="p", sequence_id=1, publish_time=2, uuid="u-7")
    md.num_chunks_from_msg, md.chunk_id, md.total_chunk_msg_size = 3, 1, 2_000_000
    md.schema_version, md.txnid_most_bits, md.null_value = b"\x00\x07", 9, True
    data = md.SerializeToString()
    ours = read_metadata(data, 0, len(data))
    assert (ours.uuid, ours.num_chunks_from_msg, ours.chunk_id) == ("u-7", 3, 1)
    assert (ours.total_chunk_msg_size, ours.null_value) == (2_000_000, True)
    assert ours.HasField("uuid")
    # Encryption keys are read by the generated class: the wire reader declines them.
    md.encryption_keys.add(key="k", value=b"v")
    data = md.SerializeToString()
    assert read_metadata(data, 0, len(data)) is None
