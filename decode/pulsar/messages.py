"""From a payload frame's entry to `messages` rows: one per application message.

An entry is checked (CRC32-C), decompressed (bounded), and a batch is split into its
members; chunks are collected until their message is whole. Encrypted entries are
described, never decrypted: their digest is of the ciphertext.
"""

from __future__ import annotations

from collections.abc import Callable, Hashable

import cython

from ...tables.schema import kept_payload, position
from ..api import FRAME_OF_MESSAGE, DecodeOptions, RowSink
from ..wire import LENGTH_DELIMITED, VARINT, field_number
from ._pb.pulsar_api_pb2 import MessageMetadata, SingleMessageMetadata
from .batch import BadBatch
from .chunks import ChunkAssembler
from .commands import text
from .compression import CODEC_NAMES, DecompressionError, decompress
from .payload import PayloadError

if cython.compiled:  # C declarations (payload.pxd, metadata.pxd, columns.pxd): C calls
    from cython.cimports.pwcap.decode.digest import set_sha256, sha256_hex
    from cython.cimports.pwcap.decode.pulsar.batch import Members
    from cython.cimports.pwcap.decode.pulsar.metadata import EntryMetadata, MemberMetadata
    from cython.cimports.pwcap.decode.pulsar.payload import parse_entry
    from cython.cimports.pwcap.tables.columns import ColumnBuffer
else:
    from ...tables.columns import ColumnBuffer
    from ..digest import set_sha256, sha256_hex
    from .batch import Members
    from .metadata import EntryMetadata, MemberMetadata
    from .payload import parse_entry
from ...tables.columns import pairs

AnomalyFn = Callable[[str, ColumnBuffer, str], None]  # kind, frame row being built, detail

# What every entry uses, as C globals when compiled (a module global is a dict lookup at
# each use); the integers exceed C's.
_CODEC_NAMES = cython.declare(dict, CODEC_NAMES)
I63 = cython.declare(object, (1 << 63) - 1)
U64 = cython.declare(object, 1 << 64)
# The largest millisecond time a microsecond int64 holds (and as a C integer).
MAX_MILLIS = cython.declare(object, ((1 << 63) - 1) // 1000)
MAX_MILLIS_C = cython.declare(cython.ulonglong, MAX_MILLIS)
# The metadata fields whose presence is asked, by number, from the schema.
_NUM_MESSAGES_IN_BATCH = cython.declare(
    cython.int, field_number(MessageMetadata, "num_messages_in_batch", VARINT)
)
_UUID = cython.declare(cython.int, field_number(MessageMetadata, "uuid", LENGTH_DELIMITED))
_SEQUENCE_ID = cython.declare(
    cython.int, field_number(SingleMessageMetadata, "sequence_id", VARINT)
)
_PARTITION_KEY = cython.declare(
    cython.int, field_number(SingleMessageMetadata, "partition_key", LENGTH_DELIMITED)
)
_ORDERING_KEY = cython.declare(
    cython.int, field_number(SingleMessageMetadata, "ordering_key", LENGTH_DELIMITED)
)


def _messages(column: str) -> int:
    return position("messages", column)


# The `frames` columns an entry reads or fills (C constants when compiled).
F_PRODUCER_ID = cython.declare(cython.Py_ssize_t, position("frames", "producer_id"))
F_CONSUMER_ID = cython.declare(cython.Py_ssize_t, position("frames", "consumer_id"))
F_PAYLOAD_SIZE = cython.declare(cython.Py_ssize_t, position("frames", "payload_size"))
F_CHECKSUM_OK = cython.declare(cython.Py_ssize_t, position("frames", "checksum_ok"))
F_COMPRESSION = cython.declare(cython.Py_ssize_t, position("frames", "compression"))
F_NUM_MESSAGES = cython.declare(cython.Py_ssize_t, position("frames", "num_messages"))
F_PRODUCER_NAME = cython.declare(cython.Py_ssize_t, position("frames", "producer_name"))
F_BROKER_TIMESTAMP = cython.declare(cython.Py_ssize_t, position("frames", "broker_timestamp"))
F_BROKER_INDEX = cython.declare(cython.Py_ssize_t, position("frames", "broker_index"))
F_ACKED_IN_BATCH = cython.declare(cython.Py_ssize_t, position("frames", "acked_in_batch"))
# The frame columns an entry's message rows repeat; a MESSAGE's, those of its delivery too.
_OF_FRAME = cython.declare(
    cython.longlong[:, ::1],
    pairs("frames", "messages", (*FRAME_OF_MESSAGE, "topic", "producer_id")),
)
_OF_DELIVERY = cython.declare(
    cython.longlong[:, ::1],
    pairs(
        "frames",
        "messages",
        (
            "subscription",
            "consumer_id",
            "consumer_name",
            "ledger_id",
            "entry_id",
            "partition",
            "redelivery_count",
        ),
    ),
)


# The `messages` columns.
M_PRODUCER_NAME = cython.declare(cython.Py_ssize_t, _messages("producer_name"))
M_SEQUENCE_ID = cython.declare(cython.Py_ssize_t, _messages("sequence_id"))
M_PUBLISH_TIME = cython.declare(cython.Py_ssize_t, _messages("publish_time"))
M_EVENT_TIME = cython.declare(cython.Py_ssize_t, _messages("event_time"))
M_KEY = cython.declare(cython.Py_ssize_t, _messages("key"))
M_ORDERING_KEY = cython.declare(cython.Py_ssize_t, _messages("ordering_key"))
M_PROPERTIES = cython.declare(cython.Py_ssize_t, _messages("properties"))
M_COMPRESSION = cython.declare(cython.Py_ssize_t, _messages("compression"))
M_BATCH_INDEX = cython.declare(cython.Py_ssize_t, _messages("batch_index"))
M_BATCH_SIZE = cython.declare(cython.Py_ssize_t, _messages("batch_size"))
M_PAYLOAD_SIZE = cython.declare(cython.Py_ssize_t, _messages("payload_size"))
M_PAYLOAD_SHA256 = cython.declare(cython.Py_ssize_t, _messages("payload_sha256"))
M_PAYLOAD = cython.declare(cython.Py_ssize_t, _messages("payload"))
M_CHECKSUM_OK = cython.declare(cython.Py_ssize_t, _messages("checksum_ok"))
M_ENCRYPTED = cython.declare(cython.Py_ssize_t, _messages("encrypted"))
M_NULL_VALUE = cython.declare(cython.Py_ssize_t, _messages("null_value"))
M_CHUNK_ID = cython.declare(cython.Py_ssize_t, _messages("chunk_id"))
M_NUM_CHUNKS = cython.declare(cython.Py_ssize_t, _messages("num_chunks"))
M_TOTAL_CHUNK_SIZE = cython.declare(cython.Py_ssize_t, _messages("total_chunk_size"))
M_UUID = cython.declare(cython.Py_ssize_t, _messages("uuid"))
M_CHUNKED_SHA256 = cython.declare(cython.Py_ssize_t, _messages("chunked_sha256"))
M_BROKER_TIMESTAMP = cython.declare(cython.Py_ssize_t, _messages("broker_timestamp"))
M_BROKER_INDEX = cython.declare(cython.Py_ssize_t, _messages("broker_index"))
M_REPLICATED_FROM = cython.declare(cython.Py_ssize_t, _messages("replicated_from"))


@cython.cclass
class EntryDecoder:
    """Decodes the entries of one connection's payload frames.

    The columns every message row of the entry being decoded repeats are kept in its C
    fields (``messages.pxd``) while its rows are built (a batch's members each repeat
    them).
    """

    def __init__(self, sink: RowSink, options: DecodeOptions, anomaly: AnomalyFn) -> None:
        self.use(sink)
        self._payloads = options.payloads
        self._limit = options.max_decompressed_size
        self._anomaly = anomaly
        self._chunks = ChunkAssembler(options.max_decompressed_size)
        self._ack_set = None

    @cython.ccall
    def deliver_only(self, ack_set: object) -> None:
        """The next MESSAGE's entry is delivered with this ``ack_set`` (CommandMessage's
        words, bit i of word i // 64 set for a batch index still unacknowledged): the
        broker leaves the cleared ones to the client to drop, so they get no message row,
        and the frame's ``acked_in_batch`` counts them."""
        self._ack_set = ack_set

    def use(self, sink: RowSink) -> None:
        """Build message rows in ``sink`` from now on."""
        self.messages = sink.messages

    @cython.ccall
    @cython.locals(frames=ColumnBuffer, delivery=cython.bint, buf=bytes)
    @cython.locals(start=cython.Py_ssize_t, end=cython.Py_ssize_t, label=cython.int)
    @cython.locals(md=EntryMetadata)
    def decode(
        self,
        frames: ColumnBuffer,
        delivery: bool,
        buf: bytes,
        start: int,
        end: int,
        label: int,
    ) -> None:
        """Fill the entry columns of the frame row ``frames`` is building from
        ``buf[start:end]`` and build its messages' rows; ``delivery`` for a MESSAGE's
        entry, ``label`` the frame's direction (0 or 1)."""
        frames.set_int(F_PAYLOAD_SIZE, end - start)
        ack_set = self._ack_set
        self._ack_set = None
        try:
            md, payload, checksum_ok, broker_timestamp, broker_index = parse_entry(buf, start, end)
        except PayloadError as exc:
            self._anomaly(exc.kind, frames, str(exc))
            return
        self._frames = frames
        self._delivery = delivery
        count = md.num_messages_in_batch
        codec = md.compression
        self._compression = _CODEC_NAMES.get(codec) or str(codec)
        producer_name = md.producer_name
        self._producer_name = producer_name
        sequence_id = md.sequence_id
        self._sequence_id = sequence_id - U64 if sequence_id > I63 else sequence_id
        self._publish_time = micros(md.publish_time)
        self._event_time = micros(md.event_time) or None
        self._key = md.partition_key or None
        self._count = count
        self._checksum_ok = checksum_ok
        if broker_timestamp is not None:
            broker_timestamp = micros(broker_timestamp)
        if broker_index is not None and broker_index > I63:
            broker_index -= U64
        self._broker_timestamp = broker_timestamp
        self._broker_index = broker_index
        self._replicated_from = text(md.replicated_from) if md.replicated_from else None
        frames.set(F_CHECKSUM_OK, checksum_ok)
        frames.set_text(F_COMPRESSION, self._compression)
        if not frames.has(F_NUM_MESSAGES):
            frames.set(F_NUM_MESSAGES, count)
        if not frames.has(F_PRODUCER_NAME):
            frames.set_text(F_PRODUCER_NAME, producer_name)
        if broker_timestamp is not None:
            frames.set(F_BROKER_TIMESTAMP, broker_timestamp)
        if broker_index is not None:
            frames.set(F_BROKER_INDEX, broker_index)
        if checksum_ok is False:
            self._anomaly("bad_checksum", frames, "CRC32-C of metadata and payload mismatch")
        if md.encrypted:
            self._whole(md)
            self.messages.set_int(M_ENCRYPTED, True)
            self._emit(payload)
        elif md.has(_UUID) and md.num_chunks_from_msg > 1:
            self._chunk(md, payload, (label, frames.get(F_PRODUCER_ID), frames.get(F_CONSUMER_ID)))
        elif codec or md.has(_NUM_MESSAGES_IN_BATCH):
            batched = delivery and md.has(_NUM_MESSAGES_IN_BATCH)
            acked = _acked_indexes(ack_set, count) if batched else None
            if acked:
                frames.set(F_ACKED_IN_BATCH, len(acked))
            self._contents(md, payload, count, acked)
        else:  # the common case: one uncompressed message
            self._whole(md)
            self._emit(payload)

    @cython.locals(md=EntryMetadata, data=bytes, members=Members)
    def _contents(
        self, md: EntryMetadata, payload: memoryview, count: int, acked: frozenset | None
    ) -> None:
        if md.compression:
            try:
                payload = decompress(md.compression, payload, md.uncompressed_size, self._limit)
            except DecompressionError as exc:
                self._anomaly("decompression_failed", self._frames, str(exc))
                self._whole(md)
                self.messages.end_row()
                return
        if not md.has(_NUM_MESSAGES_IN_BATCH):
            self._whole(md)
            self._emit(payload)
            return
        data = payload if type(payload) is bytes else bytes(payload)  # the reader takes bytes
        emitted = False
        try:
            members = Members(data, count)
            while members.next():
                if acked is not None and members.index in acked:
                    continue  # acknowledged before: the client drops it
                self._member(members.index, members.single)
                self._emit(data, members.start, members.stop)
                emitted = True
        except BadBatch as exc:
            self._anomaly("bad_batch", self._frames, str(exc))
            if not emitted:  # the entry is still a message, if none of its members is known
                self._whole(md)
                self.messages.end_row()

    @cython.locals(index=cython.Py_ssize_t, single=MemberMetadata, event_time=cython.ulonglong)
    def _member(self, index: int, single: MemberMetadata) -> None:
        """The row of a batch's message ``index``: its own metadata, not the entry's (its
        fields are C integers and a span: set with no Python object made)."""
        self._begin()
        rows: ColumnBuffer = self.messages
        rows.set_int(M_BATCH_INDEX, index)
        if single.has(_SEQUENCE_ID):
            rows.set_int(M_SEQUENCE_ID, int64(single.sequence_id))
        else:
            rows.set(M_SEQUENCE_ID, self._sequence_id + index)
        event_time = single.event_time
        if event_time != 0 and event_time <= MAX_MILLIS_C:  # as micros(event_time) or None
            rows.set_int(M_EVENT_TIME, event_time * 1000)
        if single.has(_PARTITION_KEY):
            rows.set_span(M_KEY, single.key_data, single.key_start, single.key_stop)
        if single.has(_ORDERING_KEY):
            rows.set(M_ORDERING_KEY, single.ordering_key)
        if single.pairs is not None:
            rows.set_pairs(M_PROPERTIES, single.pairs_data, single.pairs)
        if single.null_value:
            rows.set_int(M_NULL_VALUE, True)

    @cython.locals(md=EntryMetadata)
    def _chunk(self, md: EntryMetadata, payload: memoryview, key: Hashable) -> None:
        self._whole(md)
        rows: ColumnBuffer = self.messages
        uuid = text(md.uuid)
        rows.set_text(M_UUID, uuid)
        rows.set(M_CHUNK_ID, md.chunk_id)
        rows.set(M_NUM_CHUNKS, md.num_chunks_from_msg)
        rows.set(M_TOTAL_CHUNK_SIZE, md.total_chunk_msg_size)
        frames = self._frames

        def report(kind: str, detail: str) -> None:
            self._anomaly(kind, frames, f"chunked message {uuid}: {detail}")

        whole = self._chunks.add(
            (key, md.uuid), md.chunk_id, md.num_chunks_from_msg, bytes(payload), report
        )
        if whole is not None:
            try:
                data = decompress(md.compression, whole, md.uncompressed_size, self._limit)
            except DecompressionError as exc:
                self._anomaly("decompression_failed", frames, f"chunked message: {exc}")
            else:
                rows.set_text(M_CHUNKED_SHA256, sha256_hex(data))
        self._emit(payload)

    def _begin(self) -> None:
        """The columns every message row of the entry has: its frame's, the entry's but
        those a batch's member has of its own (sequence id, event time, key: see
        :meth:`_whole`). A row begins empty: a column the entry leaves null is not set."""
        rows: ColumnBuffer = self.messages
        frames: ColumnBuffer = self._frames
        rows.copy_columns(frames, _OF_FRAME)
        if self._delivery:
            rows.copy_columns(frames, _OF_DELIVERY)
        rows.set_text(M_PRODUCER_NAME, self._producer_name)
        rows.set(M_PUBLISH_TIME, self._publish_time)
        rows.set_text(M_COMPRESSION, self._compression)
        rows.set(M_BATCH_SIZE, self._count)
        rows.set(M_CHECKSUM_OK, self._checksum_ok)
        if self._broker_timestamp is not None:
            rows.set(M_BROKER_TIMESTAMP, self._broker_timestamp)
        if self._broker_index is not None:
            rows.set(M_BROKER_INDEX, self._broker_index)
        if self._replicated_from is not None:
            rows.set(M_REPLICATED_FROM, self._replicated_from)

    @cython.locals(md=EntryMetadata)
    def _whole(self, md: EntryMetadata) -> None:
        """The row of a message that is the whole entry: the entry's metadata is its own
        (the fields most entries leave unset included)."""
        self._begin()
        rows: ColumnBuffer = self.messages
        rows.set(M_SEQUENCE_ID, self._sequence_id)
        if self._event_time is not None:
            rows.set(M_EVENT_TIME, self._event_time)
        if self._key is not None:
            rows.set(M_KEY, self._key)
        if md.pairs is not None:
            rows.set_pairs(M_PROPERTIES, md.pairs_data, md.pairs)
        if md.ordering_key:
            rows.set(M_ORDERING_KEY, md.ordering_key)
        if md.null_value:
            rows.set_int(M_NULL_VALUE, True)

    @cython.locals(start=cython.Py_ssize_t, stop=cython.Py_ssize_t)
    def _emit(self, payload: bytes | memoryview, start: int = 0, stop: int = -1) -> None:
        """The columns of the payload ``payload[start:stop]`` (``stop`` -1: to the end: a
        batch's members are spans of its bytes, no view made of each); the row is
        complete."""
        rows: ColumnBuffer = self.messages
        if stop == -1:
            stop = len(payload)
        rows.set_int(M_PAYLOAD_SIZE, stop - start)
        set_sha256(rows, M_PAYLOAD_SHA256, payload, start, stop)
        if self._payloads:
            rows.set(M_PAYLOAD, kept_payload(memoryview(payload)[start:stop]))
        rows.end_row()


def _acked_indexes(ack_set: object, count: int) -> frozenset | None:
    """The batch indexes below ``count`` whose bit the ack_set clears (None without one)."""
    if not ack_set:
        return None
    words = [word & 0xFFFFFFFFFFFFFFFF for word in ack_set]
    return frozenset(
        index
        for index in range(count)
        if index // 64 >= len(words) or not (words[index // 64] >> (index % 64)) & 1
    )


@cython.cfunc
@cython.locals(value=cython.ulonglong)
@cython.returns(cython.longlong)
@cython.exceptval(check=False)
def int64(value: int) -> int:
    """A uint64 field as its int64 column holds it: the same 64 bits (as Java reads it)."""
    if not cython.compiled:
        return value - U64 if value > I63 else value
    return cython.cast(cython.longlong, value)


@cython.ccall
def micros(millis: int) -> int | None:
    """Milliseconds since the epoch as the microseconds of a timestamp column; None when
    damage made them too large for one."""
    return millis * 1000 if millis <= MAX_MILLIS else None
