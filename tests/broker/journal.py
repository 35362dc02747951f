"""The broker's JSON-lines log: one line per frame read or written, the wire's ground truth."""

from __future__ import annotations

import json
import time
from pathlib import Path
from typing import IO

from pwcap.decode.pulsar._pb import pulsar_api_pb2 as pb
from tests.broker.wire import Frame, sub_command

# Scalar fields copied into the log under the same (or a shorter) name when present.
SCALAR_FIELDS = {
    "request_id": "request_id",
    "producer_id": "producer_id",
    "consumer_id": "consumer_id",
    "sequence_id": "sequence_id",
    "messagePermits": "permits",
    "redelivery_count": "redelivery_count",
    "num_messages": "num_messages",
    "topic": "topic",
    "subscription": "subscription",
    "producer_name": "producer_name",
    "consumer_name": "consumer_name",
    "partitions": "partitions",
    "max_message_size": "max_message_size",
    "protocol_version": "protocol_version",
    "ack_type": "ack_type",
    "subType": "sub_type",
}


def signed(value: int) -> int:
    """Ledger and entry ids are Java longs sent as uint64: -1 (earliest, unset) stays -1."""
    return value - 2**64 if value >= 2**63 else value


def message_id_list(message_id: pb.MessageIdData) -> list[int]:
    """[ledger, entry, partition, batch_index] of one id."""
    ledger, entry = signed(message_id.ledgerId), signed(message_id.entryId)
    return [ledger, entry, message_id.partition, message_id.batch_index]


def describe(frame: Frame) -> dict[str, object]:
    """Everything the log records about one frame's content."""
    command = frame.command
    row: dict[str, object] = {
        "cmd": pb.BaseCommand.Type.Name(command.type),
        "frame_size": frame.size,
    }
    body = sub_command(command)
    if body is not None:
        for field, value in body.ListFields():
            if field.name in SCALAR_FIELDS and not field.is_repeated:
                row[SCALAR_FIELDS[field.name]] = value
            elif field.name == "error" and field.enum_type is pb.ServerError.DESCRIPTOR:
                row["error"] = pb.ServerError.Name(value)
            elif field.message_type is pb.MessageIdData.DESCRIPTOR:
                ids = list(value) if field.is_repeated else [value]
                row.setdefault("message_ids", [message_id_list(m) for m in ids])
    if command.type == pb.BaseCommand.CONNECT:
        flags = command.connect.feature_flags
        row["client_version"] = command.connect.client_version
        row["supports_broker_entry_metadata"] = flags.supports_broker_entry_metadata
    if frame.metadata is not None:
        row["checksum"] = "ok" if frame.checksum_ok else "bad"
        row["meta_producer_name"] = frame.metadata.producer_name
        row["meta_sequence_id"] = frame.metadata.sequence_id
        row["meta_num_messages"] = frame.metadata.num_messages_in_batch
        row["compression"] = pb.CompressionType.Name(frame.metadata.compression)
        if frame.metadata.HasField("chunk_id"):
            row["chunk_id"] = frame.metadata.chunk_id
            row["num_chunks"] = frame.metadata.num_chunks_from_msg
    if frame.entry_metadata is not None:
        row["broker_timestamp"] = frame.entry_metadata.broker_timestamp
        row["broker_index"] = frame.entry_metadata.index
    return row


class Journal:
    """Appends one JSON object per frame, flushed per line so a crash loses nothing."""

    def __init__(self, path: Path | None) -> None:
        self._out: IO[str] | None = path.open("w") if path is not None else None

    def record(self, conn: dict[str, object], direction: str, frame: Frame) -> None:
        if self._out is None:
            return
        row = {"t_us": time.time_ns() // 1000, **conn, "dir": direction, **describe(frame)}
        self._out.write(json.dumps(row, sort_keys=True) + "\n")
        self._out.flush()

    def close(self) -> None:
        if self._out is not None:
            self._out.close()
