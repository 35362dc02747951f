"""From a payload frame's entry to `messages` rows: one per application message.

An entry is checked (CRC32-C), decompressed (bounded), and a batch is split into its
members; chunks are collected until their message is whole. Encrypted entries are
described, never decrypted: their digest is of the ciphertext.
"""

from __future__ import annotations

import hashlib
from collections.abc import Callable, Hashable
from typing import Any

from pwcap.decode.api import DecodeOptions, RowSink
from pwcap.decode.pulsar.batch import split_batch
from pwcap.decode.pulsar.chunks import ChunkAssembler
from pwcap.decode.pulsar.compression import CODEC_NAMES, DecompressionError, decompress
from pwcap.decode.pulsar.payload import Entry, PayloadError, parse_entry

Row = dict[str, Any]
AnomalyFn = Callable[[str, Row, str], None]  # kind, frame row, detail

_sha256 = hashlib.sha256


class EntryDecoder:
    """Decodes the entries of one connection's payload frames."""

    def __init__(self, sink: RowSink, options: DecodeOptions, anomaly: AnomalyFn) -> None:
        self._sink = sink
        self._payloads = options.payloads
        self._limit = options.max_decompressed_size
        self._anomaly = anomaly
        self._chunks = ChunkAssembler(options.max_decompressed_size)

    def decode(self, frame: Row, buf: bytes, start: int, end: int, chunk_key: Hashable) -> None:
        """Fill ``frame``'s entry columns from ``buf[start:end]`` and emit its messages."""
        frame["payload_size"] = end - start
        try:
            entry = parse_entry(buf, start, end)
        except PayloadError as exc:
            self._anomaly(exc.kind, frame, str(exc))
            return
        md = entry.metadata
        count = md.num_messages_in_batch
        codec = md.compression
        frame["checksum_ok"] = entry.checksum_ok
        frame["compression"] = CODEC_NAMES.get(codec, str(codec))
        frame.setdefault("num_messages", count)
        frame.setdefault("producer_name", md.producer_name)
        if entry.broker_timestamp is not None:
            frame["broker_timestamp"] = entry.broker_timestamp * 1000
        if entry.broker_index is not None:
            frame["broker_index"] = entry.broker_index
        if entry.checksum_ok is False:
            self._anomaly("bad_checksum", frame, "CRC32-C of metadata and payload mismatch")
        base = self._base_row(frame, entry, count)
        if md.encryption_keys:
            base["encrypted"] = True
            self._emit(base, entry.payload)
        elif md.HasField("uuid") and md.num_chunks_from_msg > 1:
            self._chunk(frame, base, entry, chunk_key)
        elif codec or md.HasField("num_messages_in_batch"):
            self._contents(frame, base, entry, count)
        else:  # the common case: one uncompressed message
            self._emit(base, entry.payload)

    def _base_row(self, frame: Row, entry: Entry, count: int) -> Row:
        md = entry.metadata
        get = frame.get
        row = {
            "ts": frame["ts"],
            "capture": frame["capture"],
            "conn_id": frame["conn_id"],
            "direction": frame["direction"],
            "protocol": "pulsar",
            "stream_offset": frame["stream_offset"],
            "command": frame["command"],
            "topic": get("topic"),
            "subscription": get("subscription"),
            "consumer_id": get("consumer_id"),
            "consumer_name": get("consumer_name"),
            "producer_id": get("producer_id"),
            "ledger_id": get("ledger_id"),
            "entry_id": get("entry_id"),
            "partition": get("partition"),
            "redelivery_count": get("redelivery_count"),
            "producer_name": md.producer_name,
            "sequence_id": md.sequence_id,
            "publish_time": md.publish_time * 1000,
            "compression": frame["compression"],
            "batch_size": count,
            "checksum_ok": entry.checksum_ok,
            "broker_timestamp": get("broker_timestamp"),
            "broker_index": entry.broker_index,
        }
        has = md.HasField
        if has("event_time") and md.event_time:
            row["event_time"] = md.event_time * 1000
        if has("partition_key"):
            row["key"] = md.partition_key
        if has("ordering_key"):
            row["ordering_key"] = md.ordering_key
        if has("replicated_from"):
            row["replicated_from"] = md.replicated_from
        if md.null_value:
            row["null_value"] = True
        if md.properties:
            row["properties"] = [(p.key, p.value) for p in md.properties]
        return row

    def _contents(self, frame: Row, base: Row, entry: Entry, count: int) -> None:
        md = entry.metadata
        payload = self._decompressed(frame, base, entry)
        if payload is None:
            return
        if not md.HasField("num_messages_in_batch"):
            self._emit(base, payload)
            return
        members, problem = split_batch(payload, count)
        if problem:
            self._anomaly("bad_batch", frame, problem)
        first_sequence = md.sequence_id
        for index, (single, data) in enumerate(members):
            row = base.copy()
            row["batch_index"] = index
            row["sequence_id"] = (
                single.sequence_id if single.HasField("sequence_id") else first_sequence + index
            )
            row["event_time"] = single.event_time * 1000 if single.event_time else None
            row["key"] = single.partition_key if single.HasField("partition_key") else None
            row["ordering_key"] = single.ordering_key if single.HasField("ordering_key") else None
            row["properties"] = [(p.key, p.value) for p in single.properties]
            row["null_value"] = single.null_value or None
            self._emit(row, data)

    def _chunk(self, frame: Row, base: Row, entry: Entry, chunk_key: Hashable) -> None:
        md = entry.metadata
        base["uuid"] = md.uuid
        base["chunk_id"] = md.chunk_id
        base["num_chunks"] = md.num_chunks_from_msg
        base["total_chunk_size"] = md.total_chunk_msg_size
        whole = self._chunks.add(
            (chunk_key, md.uuid), md.chunk_id, md.num_chunks_from_msg, bytes(entry.payload)
        )
        if whole is not None:
            try:
                data = decompress(md.compression, whole, md.uncompressed_size, self._limit)
            except DecompressionError as exc:
                self._anomaly("decompression_failed", frame, f"chunked message: {exc}")
            else:
                base["chunked_sha256"] = _sha256(data).hexdigest()
        self._emit(base, entry.payload)

    def _decompressed(self, frame: Row, base: Row, entry: Entry) -> bytes | memoryview | None:
        md = entry.metadata
        if not md.compression:
            return entry.payload
        try:
            return decompress(md.compression, entry.payload, md.uncompressed_size, self._limit)
        except DecompressionError as exc:
            self._anomaly("decompression_failed", frame, str(exc))
            self._sink.message(base)
            return None

    def _emit(self, row: Row, payload: bytes | memoryview) -> None:
        row["payload_size"] = len(payload)
        row["payload_sha256"] = _sha256(payload).hexdigest()
        if self._payloads:
            row["payload"] = bytes(payload)
        self._sink.message(row)
