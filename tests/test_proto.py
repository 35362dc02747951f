"""The generated Pulsar schema must match the wire: field numbers, types and defaults.

The expected numbers below are transcribed by hand from upstream PulsarApi.proto (the
authority for field numbers), not read back from our own generated code, so a wrong number
in ``proto/pulsar_api.proto`` fails here. The byte strings are hand-encoded protobuf, as a
real client puts them on the wire.
"""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest
from google.protobuf import descriptor_pb2
from google.protobuf.descriptor import FieldDescriptor

from pwcap.decode.pulsar._pb import pulsar_api_pb2 as pb

OPTIONAL, REQUIRED, REPEATED = "optional", "required", "repeated"

# (message, field, number, label, protobuf type name) from upstream.
UPSTREAM_FIELDS = [
    ("MessageIdData", "ledgerId", 1, REQUIRED, "uint64"),
    ("MessageIdData", "entryId", 2, REQUIRED, "uint64"),
    ("MessageIdData", "partition", 3, OPTIONAL, "int32"),
    ("MessageIdData", "batch_index", 4, OPTIONAL, "int32"),
    ("MessageIdData", "ack_set", 5, REPEATED, "int64"),
    ("MessageIdData", "batch_size", 6, OPTIONAL, "int32"),
    ("MessageIdData", "first_chunk_message_id", 7, OPTIONAL, "message"),
    ("MessageMetadata", "producer_name", 1, REQUIRED, "string"),
    ("MessageMetadata", "sequence_id", 2, REQUIRED, "uint64"),
    ("MessageMetadata", "publish_time", 3, REQUIRED, "uint64"),
    ("MessageMetadata", "properties", 4, REPEATED, "message"),
    ("MessageMetadata", "partition_key", 6, OPTIONAL, "string"),
    ("MessageMetadata", "compression", 8, OPTIONAL, "enum"),
    ("MessageMetadata", "uncompressed_size", 9, OPTIONAL, "uint32"),
    ("MessageMetadata", "num_messages_in_batch", 11, OPTIONAL, "int32"),
    ("MessageMetadata", "event_time", 12, OPTIONAL, "uint64"),
    ("MessageMetadata", "ordering_key", 18, OPTIONAL, "bytes"),
    ("MessageMetadata", "deliver_at_time", 19, OPTIONAL, "int64"),
    ("MessageMetadata", "marker_type", 20, OPTIONAL, "int32"),
    ("MessageMetadata", "txnid_least_bits", 22, OPTIONAL, "uint64"),
    ("MessageMetadata", "txnid_most_bits", 23, OPTIONAL, "uint64"),
    ("MessageMetadata", "highest_sequence_id", 24, OPTIONAL, "uint64"),
    ("MessageMetadata", "uuid", 26, OPTIONAL, "string"),
    ("MessageMetadata", "num_chunks_from_msg", 27, OPTIONAL, "int32"),
    ("MessageMetadata", "total_chunk_msg_size", 28, OPTIONAL, "int32"),
    ("MessageMetadata", "chunk_id", 29, OPTIONAL, "int32"),
    ("MessageMetadata", "schema_id", 32, OPTIONAL, "bytes"),
    ("MessageMetadata", "entry_hash_max", 34, OPTIONAL, "uint32"),
    ("SingleMessageMetadata", "properties", 1, REPEATED, "message"),
    ("SingleMessageMetadata", "partition_key", 2, OPTIONAL, "string"),
    ("SingleMessageMetadata", "payload_size", 3, REQUIRED, "int32"),
    ("SingleMessageMetadata", "compacted_out", 4, OPTIONAL, "bool"),
    ("SingleMessageMetadata", "sequence_id", 8, OPTIONAL, "uint64"),
    ("SingleMessageMetadata", "null_partition_key", 10, OPTIONAL, "bool"),
    ("BrokerEntryMetadata", "broker_timestamp", 1, OPTIONAL, "uint64"),
    ("BrokerEntryMetadata", "index", 2, OPTIONAL, "uint64"),
    ("CommandConnect", "client_version", 1, REQUIRED, "string"),
    ("CommandConnect", "auth_method_name", 5, OPTIONAL, "string"),
    ("CommandConnect", "auth_data", 3, OPTIONAL, "bytes"),
    ("CommandConnect", "protocol_version", 4, OPTIONAL, "int32"),
    ("CommandConnect", "feature_flags", 10, OPTIONAL, "message"),
    ("CommandConnected", "max_message_size", 3, OPTIONAL, "int32"),
    ("FeatureFlags", "supports_broker_entry_metadata", 2, OPTIONAL, "bool"),
    ("FeatureFlags", "supports_tc_metadata_discovery", 9, OPTIONAL, "bool"),
    ("CommandSubscribe", "subType", 3, REQUIRED, "enum"),
    ("CommandSubscribe", "consumer_id", 4, REQUIRED, "uint64"),
    ("CommandSubscribe", "request_id", 5, REQUIRED, "uint64"),
    ("CommandSubscribe", "initialPosition", 13, OPTIONAL, "enum"),
    ("CommandSubscribe", "consumer_epoch", 19, OPTIONAL, "uint64"),
    ("CommandLookupTopicResponse", "request_id", 4, REQUIRED, "uint64"),
    ("CommandPartitionedTopicMetadataResponse", "partitions", 1, OPTIONAL, "uint32"),
    ("CommandProducer", "producer_id", 2, REQUIRED, "uint64"),
    ("CommandProducer", "request_id", 3, REQUIRED, "uint64"),
    ("CommandSend", "num_messages", 3, OPTIONAL, "int32"),
    ("CommandSend", "is_chunk", 7, OPTIONAL, "bool"),
    ("CommandSend", "message_id", 9, OPTIONAL, "message"),
    ("CommandSendReceipt", "message_id", 3, OPTIONAL, "message"),
    ("CommandSendError", "error", 3, REQUIRED, "enum"),
    ("CommandMessage", "redelivery_count", 3, OPTIONAL, "uint32"),
    ("CommandMessage", "ack_set", 4, REPEATED, "int64"),
    ("CommandMessage", "consumer_epoch", 5, OPTIONAL, "uint64"),
    ("CommandAck", "ack_type", 2, REQUIRED, "enum"),
    ("CommandAck", "message_id", 3, REPEATED, "message"),
    ("CommandAck", "validation_error", 4, OPTIONAL, "enum"),
    ("CommandAck", "request_id", 8, OPTIONAL, "uint64"),
    ("CommandAckResponse", "request_id", 6, OPTIONAL, "uint64"),
    ("CommandFlow", "messagePermits", 2, REQUIRED, "uint32"),
    ("CommandRedeliverUnacknowledgedMessages", "message_ids", 2, REPEATED, "message"),
    ("CommandSeek", "message_publish_time", 4, OPTIONAL, "uint64"),
    ("CommandConsumerStats", "consumer_id", 4, REQUIRED, "uint64"),
    ("CommandGetLastMessageIdResponse", "consumer_mark_delete_position", 3, OPTIONAL, "message"),
    ("CommandTopicMigrated", "resource_type", 2, REQUIRED, "enum"),
    ("CommandEndTxnOnSubscription", "txnid_least_bits_of_low_watermark", 6, OPTIONAL, "uint64"),
    ("CommandTcClientConnectRequest", "tc_id", 2, REQUIRED, "uint64"),
    ("CommandWatchScalableTopicsUpdate", "diff", 3, OPTIONAL, "message"),
    ("SegmentInfoProto", "entry_bucket_splits", 12, REPEATED, "uint32"),
    ("BaseCommand", "redeliverUnacknowledgedMessages", 20, OPTIONAL, "message"),
    ("BaseCommand", "ackResponse", 38, OPTIONAL, "message"),
    ("BaseCommand", "topicMigrated", 68, OPTIONAL, "message"),
    ("BaseCommand", "watchTcAssignmentsClose", 81, OPTIONAL, "message"),
]

TYPE_NAMES = {
    FieldDescriptor.TYPE_UINT64: "uint64",
    FieldDescriptor.TYPE_INT64: "int64",
    FieldDescriptor.TYPE_UINT32: "uint32",
    FieldDescriptor.TYPE_INT32: "int32",
    FieldDescriptor.TYPE_BOOL: "bool",
    FieldDescriptor.TYPE_STRING: "string",
    FieldDescriptor.TYPE_BYTES: "bytes",
    FieldDescriptor.TYPE_ENUM: "enum",
    FieldDescriptor.TYPE_MESSAGE: "message",
    FieldDescriptor.TYPE_DOUBLE: "double",
}


def label_of(descriptor: FieldDescriptor) -> str:
    if descriptor.is_required:
        return REQUIRED
    return REPEATED if descriptor.is_repeated else OPTIONAL


@pytest.mark.parametrize(("message", "field", "number", "label", "type_name"), UPSTREAM_FIELDS)
def test_field_matches_upstream(
    message: str, field: str, number: int, label: str, type_name: str
) -> None:
    descriptor = getattr(pb, message).DESCRIPTOR.fields_by_name[field]
    assert descriptor.number == number
    assert label_of(descriptor) == label
    assert TYPE_NAMES[descriptor.type] == type_name


def test_command_types_span_the_newest_protocol() -> None:
    types = pb.BaseCommand.Type
    assert types.Value("CONNECT") == 2
    assert types.Value("REDELIVER_UNACKNOWLEDGED_MESSAGES") == 20
    assert types.Value("ACK_RESPONSE") == 38
    assert types.Value("NEW_TXN") == 50
    assert types.Value("TOPIC_MIGRATED") == 68
    assert types.Value("SCALABLE_TOPIC_LOOKUP") == 70
    assert types.Value("WATCH_TC_ASSIGNMENTS_CLOSE") == 81
    assert len(types.keys()) == 39 + 19 + 12
    assert pb.ProtocolVersion.Value("v21") == 21


def test_every_command_type_has_its_field_at_the_same_number() -> None:
    """Pulsar's envelope rule: the sub-command for type N is BaseCommand field N."""
    fields = pb.BaseCommand.DESCRIPTOR.fields_by_number
    for name, number in pb.BaseCommand.Type.items():
        assert number in fields, name
        assert fields[number].message_type is not None, name


def test_enum_values_match_upstream() -> None:
    assert pb.CompressionType.Value("SNAPPY") == 4
    assert pb.ServerError.Value("ProducerFenced") == 25
    assert pb.CommandSubscribe.SubType.Value("Key_Shared") == 3
    assert pb.CommandAck.ValidationError.Value("DecryptionError") == 4
    assert pb.CommandLookupTopicResponse.LookupType.Value("Failed") == 2
    assert pb.Schema.Type.Value("External") == 22


def test_defaults_match_upstream() -> None:
    message_id = pb.MessageIdData(ledgerId=1, entryId=2)
    assert (message_id.partition, message_id.batch_index) == (-1, -1)
    assert pb.MessageMetadata().num_messages_in_batch == 1
    assert pb.CommandProducerSuccess().last_sequence_id == -1
    assert pb.CommandSubscribe().durable is True
    assert pb.CommandGetTopicsOfNamespaceResponse().changed is True


def test_hand_encoded_flow_command_parses() -> None:
    # type=FLOW(11); flow (field 11, length 5): consumer_id=1, messagePermits=1000
    wire = bytes([0x08, 0x0B, 0x5A, 0x05, 0x08, 0x01, 0x10, 0xE8, 0x07])
    command = pb.BaseCommand.FromString(wire)
    assert command.type == pb.BaseCommand.FLOW
    assert (command.flow.consumer_id, command.flow.messagePermits) == (1, 1000)


def test_hand_encoded_message_command_parses() -> None:
    # type=MESSAGE(9); message (field 9): consumer_id=3, message_id{ledger 7, entry 42},
    # redelivery_count=2
    message_id = bytes([0x08, 0x07, 0x10, 0x2A])
    inner = bytes([0x08, 0x03, 0x12, len(message_id), *message_id, 0x18, 0x02])
    wire = bytes([0x08, 0x09, 0x4A, len(inner), *inner])
    command = pb.BaseCommand.FromString(wire)
    assert command.message.message_id.ledgerId == 7
    assert command.message.message_id.entryId == 42
    assert command.message.redelivery_count == 2


def test_chunked_metadata_round_trips() -> None:
    metadata = pb.MessageMetadata(
        producer_name="p",
        sequence_id=5,
        publish_time=1_700_000_000_000,
        uuid="p-5",
        num_chunks_from_msg=3,
        total_chunk_msg_size=3000,
        chunk_id=2,
        compression=pb.ZSTD,
    )
    wire = metadata.SerializeToString()
    # chunk_id is field 29, varint: key = 29 << 3 = 232 = 0xE8 0x01
    assert bytes([0xE8, 0x01, 0x02]) in wire
    assert pb.MessageMetadata.FromString(wire) == metadata


def test_checked_in_module_matches_the_proto_source(tmp_path: Path) -> None:
    """Editing proto/pulsar_api.proto without running proto/generate.py fails here."""
    proto_dir = Path(__file__).resolve().parents[1] / "proto"
    out = tmp_path / "descriptor.pb"
    subprocess.run(
        [
            sys.executable,
            "-m",
            "grpc_tools.protoc",
            f"--proto_path={proto_dir}",
            f"--descriptor_set_out={out}",
            "pulsar_api.proto",
        ],
        check=True,
    )
    fresh = descriptor_pb2.FileDescriptorSet.FromString(out.read_bytes()).file[0]
    for message in fresh.message_type:
        drop_json_names(message)  # protoc adds them to descriptor sets, not to Python code
    checked_in = descriptor_pb2.FileDescriptorProto.FromString(pb.DESCRIPTOR.serialized_pb)
    assert checked_in == fresh


def drop_json_names(message: descriptor_pb2.DescriptorProto) -> None:
    for field in message.field:
        field.ClearField("json_name")
    for nested in message.nested_type:
        drop_json_names(nested)
