"""Message metadata read from its wire bytes reads exactly as the generated classes read it.

For thousands of generated MessageMetadata and SingleMessageMetadata (the common fields
at edge values, rarer fields now and then, a field twice, unknown fields, text that is
not UTF-8) and damaged copies of them, the wire reader either declines (None: the
generated class takes the bytes) or answers every attribute the message decoder reads,
and every ``HasField`` it asks, with the generated class's own answer.
"""

from __future__ import annotations

import random

from google.protobuf.message import DecodeError
from pwcap.decode.pulsar._pb import pulsar_api_pb2 as pb
from pwcap.decode.pulsar.metadata import read_metadata, read_single

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
    "num_chunks_from_msg",
)
METADATA_PRESENCE = ("num_messages_in_batch", "uuid")
SINGLE_READS = (
    "payload_size",
    "partition_key",
    "event_time",
    "ordering_key",
    "sequence_id",
    "null_value",
)
SINGLE_PRESENCE = ("sequence_id", "partition_key", "ordering_key", "payload_size")


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


def _same(ours, theirs, reads: tuple[str, ...], presence: tuple[str, ...]) -> None:
    for name in reads:
        assert getattr(ours, name) == getattr(theirs, name), name
        assert type(getattr(ours, name)) is type(getattr(theirs, name)), name
    for name in presence:
        assert ours.HasField(name) == theirs.HasField(name), name
    assert list(ours.properties) == [(p.key, p.value) for p in theirs.properties]


def check(data: bytes, reader, generated, reads, presence) -> bool:
    """True when the wire reader took the bytes (and agreed with the generated class)."""
    ours = reader(b"\xaa" + data + b"\xbb", 1, len(data) + 1)  # bounds honoured
    if ours is None:
        return False
    try:
        theirs = generated.FromString(data)
    except DecodeError as exc:
        raise AssertionError(f"read what the generated class refuses: {data.hex()}") from exc
    _same(ours, theirs, reads, presence)
    if reader is read_metadata:
        assert not theirs.encryption_keys and not theirs.HasField("uuid")
    return True


def test_generated_metadata_reads_the_same_both_ways():
    rng = random.Random(11)
    taken = sum(
        check(
            random_metadata(rng),
            read_metadata,
            pb.MessageMetadata,
            METADATA_READS,
            METADATA_PRESENCE,
        )
        for _ in range(ROUNDS)
    )
    assert taken > ROUNDS // 2  # the common shape does take the wire reader


def test_generated_batch_members_read_the_same_both_ways():
    rng = random.Random(12)
    taken = sum(
        check(
            random_single(rng), read_single, pb.SingleMessageMetadata, SINGLE_READS, SINGLE_PRESENCE
        )
        for _ in range(ROUNDS)
    )
    assert taken > ROUNDS // 2


def test_damaged_metadata_is_declined_or_read_the_same():
    rng = random.Random(13)
    for _ in range(ROUNDS):
        check(
            damaged(rng, random_metadata(rng)),
            read_metadata,
            pb.MessageMetadata,
            METADATA_READS,
            METADATA_PRESENCE,
        )
        check(
            damaged(rng, random_single(rng)),
            read_single,
            pb.SingleMessageMetadata,
            SINGLE_READS,
            SINGLE_PRESENCE,
        )


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
    data = md.SerializePartialToString()
    assert read_metadata(data, 0, len(data)).properties == [("b", "2"), ("a", "")]
    # A KeyValue without its value, or with a key that is not UTF-8: not the common shape.
    for pair in (b"\x0a\x01k", b"\x0a\x01\xff\x12\x00", b"\x0a\x01k\x12\x00\x0a\x01j"):
        bad = data + b"\x22" + bytes([len(pair)]) + pair
        assert read_metadata(bad, 0, len(bad)) is None
