"""From a payload frame's entry to `messages` rows: one per application message.

An entry is checked (CRC32-C), decompressed (bounded), and a batch is split into its
members; chunks are collected until their message is whole. Encrypted entries are
described, never decrypted: their digest is of the ciphertext.
"""

from __future__ import annotations

import hashlib
from collections.abc import Callable, Hashable, Iterator
from typing import Any

import cython
from pwcap.decode.api import DecodeOptions, RowSink
from pwcap.decode.pulsar._pb.pulsar_api_pb2 import MessageMetadata
from pwcap.decode.pulsar.batch import BadBatch, split_batch
from pwcap.decode.pulsar.chunks import ChunkAssembler
from pwcap.decode.pulsar.commands import text
from pwcap.decode.pulsar.compression import CODEC_NAMES, DecompressionError, decompress
from pwcap.decode.pulsar.payload import PayloadError
from pwcap.tables.schema import kept_payload

if cython.compiled:  # the entry parser's C declaration (payload.pxd): a C call
    from cython.cimports.pwcap.decode.pulsar.payload import parse_entry
else:
    from pwcap.decode.pulsar.payload import parse_entry

Row = dict[str, Any]
AnomalyFn = Callable[[str, Row, str], None]  # kind, frame row, detail

# What every entry uses, as C globals when compiled (a module global is a dict lookup at
# each use); the integers exceed C's.
_sha256 = cython.declare(object, hashlib.sha256)
_text = cython.declare(object, text)
_CODEC_NAMES = cython.declare(dict, CODEC_NAMES)
I63 = cython.declare(object, (1 << 63) - 1)
U64 = cython.declare(object, 1 << 64)
# The largest millisecond time a microsecond int64 holds.
MAX_MILLIS = cython.declare(object, ((1 << 63) - 1) // 1000)
# The columns every entry's row has (the decoder's and _emit's aside), in a row template
# (see EntryDecoder.template).
_ENTRY_COLUMNS = cython.declare(
    tuple,
    (
        "ts",
        "capture",
        "conn_id",
        "direction",
        "protocol",
        "stream_offset",
        "command",
        "topic",
        "producer_id",
        "producer_name",
        "sequence_id",
        "publish_time",
        "event_time",
        "key",
        "compression",
        "batch_size",
        "checksum_ok",
        "broker_timestamp",
        "broker_index",
    ),
)
# Frame columns a MESSAGE's rows repeat besides those every message row has.
_DELIVERY_COLUMNS = cython.declare(
    tuple,
    (
        "subscription",
        "consumer_id",
        "consumer_name",
        "ledger_id",
        "entry_id",
        "partition",
        "redelivery_count",
    ),
)


@cython.cclass
class EntryDecoder:
    """Decodes the entries of one connection's payload frames."""

    sink = cython.declare(object, visibility="public")
    _payloads = cython.declare(cython.bint)
    _limit = cython.declare(object)
    _anomaly = cython.declare(object)
    _chunks = cython.declare(object)

    def __init__(self, sink: RowSink, options: DecodeOptions, anomaly: AnomalyFn) -> None:
        self.sink = sink
        self._payloads = options.payloads
        self._limit = options.max_decompressed_size
        self._anomaly = anomaly
        self._chunks = ChunkAssembler(options.max_decompressed_size)

    def template(self, frame: Row) -> Row:
        """The row the entries of frames like ``frame`` (a frame row template) start
        from: the columns they share set, every other column of an entry's row there
        too (None), so that an entry's copy has its values replaced, not keys added."""
        row = dict.fromkeys(_ENTRY_COLUMNS)
        if frame["command"] == "MESSAGE":
            row.update(dict.fromkeys(_DELIVERY_COLUMNS))
        for column in ("capture", "conn_id", "direction", "protocol", "command"):
            row[column] = frame[column]
        return row

    @cython.locals(frame=dict, template=dict, row=dict)
    def decode(
        self, frame: Row, template: Row, buf: bytes, start: int, end: int, label: int
    ) -> None:
        """Fill ``frame``'s entry columns from ``buf[start:end]`` and emit its messages,
        their rows copies of ``template`` (from :meth:`template`); ``label`` is the
        frame's direction (0 or 1)."""
        frame["payload_size"] = end - start
        try:
            md, payload, checksum_ok, broker_timestamp, broker_index = parse_entry(buf, start, end)
        except PayloadError as exc:
            self._anomaly(exc.kind, frame, str(exc))
            return
        count = md.num_messages_in_batch
        codec = md.compression
        compression = _CODEC_NAMES.get(codec) or str(codec)
        producer_name = md.producer_name
        if producer_name.__class__ is not str:
            producer_name = _text(producer_name)
        sequence_id = md.sequence_id
        if sequence_id > I63:
            sequence_id -= U64
        row = template.copy()
        row["ts"] = frame["ts"]
        row["stream_offset"] = frame["stream_offset"]
        row["topic"] = frame.get("topic")
        row["producer_id"] = frame.get("producer_id")
        row["producer_name"] = producer_name
        row["sequence_id"] = sequence_id
        row["publish_time"] = micros(md.publish_time)
        event_time = micros(md.event_time)
        if event_time:
            row["event_time"] = event_time
        key = md.partition_key
        if key:
            row["key"] = key if key.__class__ is str else _text(key)
        row["compression"] = compression
        row["batch_size"] = count
        row["checksum_ok"] = checksum_ok
        frame["checksum_ok"] = checksum_ok
        frame["compression"] = compression
        if "num_messages" not in frame:
            frame["num_messages"] = count
        if "producer_name" not in frame:
            frame["producer_name"] = producer_name
        if broker_timestamp is not None:
            broker_timestamp = micros(broker_timestamp)
            frame["broker_timestamp"] = row["broker_timestamp"] = broker_timestamp
        if broker_index is not None:
            if broker_index > I63:
                broker_index -= U64
            frame["broker_index"] = row["broker_index"] = broker_index
        if checksum_ok is False:
            self._anomaly("bad_checksum", frame, "CRC32-C of metadata and payload mismatch")
        if frame["command"] == "MESSAGE":
            for column in _DELIVERY_COLUMNS:
                row[column] = frame.get(column)
        _rare_metadata(md, row)
        if md.encryption_keys:
            row["encrypted"] = True
            self._emit(row, payload)
        elif md.HasField("uuid") and md.num_chunks_from_msg > 1:
            chunk_key = (label, frame.get("producer_id"), frame.get("consumer_id"))
            self._chunk(frame, row, md, payload, chunk_key)
        elif codec or md.HasField("num_messages_in_batch"):
            self._contents(frame, row, md, payload, count)
        else:  # the common case: one uncompressed message
            self._emit(row, payload)

    def _contents(
        self, frame: Row, base: Row, md: MessageMetadata, payload: memoryview, count: int
    ) -> None:
        if md.compression:
            try:
                payload = decompress(md.compression, payload, md.uncompressed_size, self._limit)
            except DecompressionError as exc:
                self._anomaly("decompression_failed", frame, str(exc))
                self.sink.message(base)
                return
        if not md.HasField("num_messages_in_batch"):
            self._emit(base, payload)
            return
        emitted = False
        try:
            for row, data in self._members(base, payload, count):
                self._emit(row, data)
                emitted = True
        except BadBatch as exc:
            self._anomaly("bad_batch", frame, str(exc))
            if not emitted:  # the entry is still a message, if none of its members is known
                self.sink.message(base)

    def _members(
        self, base: Row, payload: bytes | memoryview, count: int
    ) -> Iterator[tuple[Row, memoryview]]:
        """The row and payload of each message of the batch, one at a time."""
        first_sequence = base["sequence_id"]
        for index, (single, data) in enumerate(split_batch(payload, count)):
            row = base.copy()
            row["batch_index"] = index
            if single.HasField("sequence_id"):
                sequence_id = single.sequence_id
                row["sequence_id"] = sequence_id - U64 if sequence_id > I63 else sequence_id
            else:
                row["sequence_id"] = first_sequence + index
            row["event_time"] = micros(single.event_time) or None
            row["key"] = text(single.partition_key) if single.HasField("partition_key") else None
            row["ordering_key"] = single.ordering_key if single.HasField("ordering_key") else None
            row["properties"] = _properties(single.properties) or None
            row["null_value"] = single.null_value or None
            yield row, data

    def _chunk(
        self, frame: Row, row: Row, md: MessageMetadata, payload: memoryview, key: Hashable
    ) -> None:
        row["uuid"] = text(md.uuid)
        row["chunk_id"] = md.chunk_id
        row["num_chunks"] = md.num_chunks_from_msg
        row["total_chunk_size"] = md.total_chunk_msg_size

        def report(kind: str, detail: str) -> None:
            self._anomaly(kind, frame, f"chunked message {row['uuid']}: {detail}")

        whole = self._chunks.add(
            (key, md.uuid), md.chunk_id, md.num_chunks_from_msg, bytes(payload), report
        )
        if whole is not None:
            try:
                data = decompress(md.compression, whole, md.uncompressed_size, self._limit)
            except DecompressionError as exc:
                self._anomaly("decompression_failed", frame, f"chunked message: {exc}")
            else:
                row["chunked_sha256"] = _sha256(data).hexdigest()
        self._emit(row, payload)

    @cython.cfunc
    @cython.locals(row=dict)
    def _emit(self, row: Row, payload: bytes | memoryview) -> cython.void:
        row["payload_size"] = len(payload)
        row["payload_sha256"] = _sha256(payload).hexdigest()
        if self._payloads:
            row["payload"] = kept_payload(payload)
        self.sink.message(row)


@cython.cfunc
def _rare_metadata(md: MessageMetadata, row: Row) -> cython.void:
    """Entry-level fields most messages leave unset."""
    if md.properties:
        row["properties"] = _properties(md.properties)
    if md.ordering_key:
        row["ordering_key"] = md.ordering_key
    if md.replicated_from:
        row["replicated_from"] = text(md.replicated_from)
    if md.null_value:
        row["null_value"] = True


def _properties(pairs: Any) -> list[tuple[str, str]]:
    """(key, value) texts of the generated classes' KeyValues; the wire reader's come
    as such pairs already."""
    return [p if type(p) is tuple else (text(p.key), text(p.value)) for p in pairs]


@cython.ccall
def micros(millis: int) -> int | None:
    """Milliseconds since the epoch as the microseconds of a timestamp column; None when
    damage made them too large for one."""
    return millis * 1000 if millis <= MAX_MILLIS else None
