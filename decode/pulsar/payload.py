# cython: annotation_typing=True
"""What follows the command in a payload frame (SEND, MESSAGE).

Layout: ``[0x0e02][size][BrokerEntryMetadata]`` (optional, broker to consumer), then
``[0x0e01][CRC32-C]`` (absent before protocol v6), then ``[metadataSize][MessageMetadata]``
and the payload. The checksum covers everything after itself up to the end of the frame.
"""

from __future__ import annotations

import cython
import google_crc32c
from google.protobuf.message import DecodeError

from ..wire import VARINT, field_number
from ._pb.pulsar_api_pb2 import BrokerEntryMetadata, MessageMetadata
from .metadata import EntryMetadata

if cython.compiled:  # the C declarations (metadata.pxd, wire.pxd): C calls
    from cython.cimports.pwcap.decode.pulsar.metadata import entry_from_generated, read_metadata
    from cython.cimports.pwcap.decode.wire import Fields, cursor
else:
    from ..wire import Fields, cursor
    from .metadata import entry_from_generated, read_metadata

MAGIC_CHECKSUM = b"\x0e\x01"
MAGIC_BROKER_ENTRY = b"\x0e\x02"
# Their second bytes (both open with 0x0e), as C constants when compiled.
MAGIC = cython.declare(cython.int, MAGIC_CHECKSUM[0])
CHECKSUM = cython.declare(cython.int, MAGIC_CHECKSUM[1])
BROKER_ENTRY = cython.declare(cython.int, MAGIC_BROKER_ENTRY[1])
MAGIC_SIZE = cython.declare(cython.Py_ssize_t, 2)
U32_SIZE = cython.declare(cython.Py_ssize_t, 4)
# BrokerEntryMetadata's fields, numbered by the schema (C constants when compiled).
BROKER_TIMESTAMP = cython.declare(
    cython.int, field_number(BrokerEntryMetadata, "broker_timestamp", VARINT)
)
BROKER_INDEX = cython.declare(cython.int, field_number(BrokerEntryMetadata, "index", VARINT))
# CRC32-C from google-crc32c, whose import costs next to nothing (the `crc32c` package asks
# importlib.metadata for its own version as it loads: a large part of a small capture's
# decode, docs/performance.md). It reads `bytes` only, so the checksummed part is sliced
# out, views or not. Bound once (compiled: a C global): looked up on the module, it cost
# two look-ups per entry.
_crc32c = cython.declare(object, google_crc32c.value)
# Frames smaller than this hand out their parts as copies, larger ones as views: copying a
# few hundred bytes costs less than making a memoryview and slicing it.
VIEW_FROM = cython.declare(cython.Py_ssize_t, 2048)


class PayloadError(Exception):
    """The bytes after the command do not form metadata + payload.

    ``kind`` is the anomaly kind: ``bad_protobuf`` for undecodable metadata,
    ``bad_payload`` for sizes that do not fit the frame.
    """

    def __init__(self, kind: str, detail: str) -> None:
        super().__init__(detail)
        self.kind = kind


# metadata, payload, checksum_ok (None: no checksum), broker timestamp, broker index.
# A plain tuple: built once per payload frame, it is on the hot path.
Entry = tuple[EntryMetadata, bytes | memoryview, bool | None, int | None, int | None]


@cython.ccall
def parse_entry(buf: bytes, start: cython.Py_ssize_t, end: cython.Py_ssize_t) -> Entry:
    """Parse ``buf[start:end]``, the bytes of a payload frame after its command. The payload
    is a memoryview of ``buf``, or a copy when the frame is small (see :data:`VIEW_FROM`)."""
    if start < 0 or end > len(buf) or start > end:
        raise ValueError(f"bytes {start}:{end} are not within the {len(buf)} given")
    view = memoryview(buf) if end - start >= VIEW_FROM else None
    pos: cython.Py_ssize_t = start
    size: cython.Py_ssize_t
    magic: cython.int = _magic(buf, pos, end)
    broker_timestamp = broker_index = None
    checksum_ok = None
    if magic == BROKER_ENTRY:
        size = u32(buf, pos + MAGIC_SIZE)
        pos += MAGIC_SIZE + U32_SIZE
        if size > end - pos:
            raise PayloadError(
                "bad_payload", f"broker entry metadata of {size} bytes overruns the frame"
            )
        broker = _broker_entry(buf, pos, pos + size)
        if broker is None:  # not the common shape: the generated class reads it
            broker = _generated_broker_entry(buf[pos : pos + size])
        broker_timestamp, broker_index = broker
        pos += size
        magic = _magic(buf, pos, end)
    if magic == CHECKSUM:
        checksum_ok = _crc32c(buf[pos + MAGIC_SIZE + U32_SIZE : end]) == u32(buf, pos + MAGIC_SIZE)
        pos += MAGIC_SIZE + U32_SIZE
    if end - pos < U32_SIZE:
        raise PayloadError("bad_payload", "payload frame too short for its metadata size")
    size = u32(buf, pos)
    pos += U32_SIZE
    if size > end - pos:
        raise PayloadError("bad_payload", f"message metadata of {size} bytes overruns the frame")
    metadata = read_metadata(buf, pos, pos + size)
    if metadata is None:  # not the common shape: the generated class reads it
        try:
            generated = MessageMetadata.FromString(buf[pos : pos + size])
        except DecodeError as exc:
            raise PayloadError("bad_protobuf", f"undecodable message metadata: {exc}") from None
        metadata = entry_from_generated(generated)
    return metadata, _part(buf, view, pos + size, end), checksum_ok, broker_timestamp, broker_index


@cython.cfunc
def _broker_entry(buf: bytes, start: cython.Py_ssize_t, end: cython.Py_ssize_t) -> object:
    """BrokerEntryMetadata's ``(broker_timestamp, index)`` (None where absent) read by the
    wire cursor, as the generated class reads them (the last of a repeated field wins,
    unknown fields are skipped); None when the message is not that shape: a field cut
    short, or a known field with another wire type."""
    fields: Fields = cursor(buf, start, end)
    timestamp: object = None
    index: object = None
    number: cython.int = fields.next()
    while number:
        if number in (BROKER_TIMESTAMP, BROKER_INDEX):
            if fields.wire_type != VARINT:
                return None
            if number == BROKER_TIMESTAMP:
                timestamp = fields.value
            else:
                index = fields.value
        number = fields.next()
    if fields.broken:
        return None
    return timestamp, index


def _generated_broker_entry(data: bytes) -> tuple[int | None, int | None]:
    """BrokerEntryMetadata's two fields read by the generated class (damage: PayloadError)."""
    try:
        broker = BrokerEntryMetadata.FromString(data)
    except DecodeError as exc:
        raise PayloadError("bad_protobuf", f"undecodable broker entry metadata: {exc}") from None
    return (
        broker.broker_timestamp if broker.HasField("broker_timestamp") else None,
        broker.index if broker.HasField("index") else None,
    )


@cython.cfunc
def _part(
    buf: bytes, view: memoryview | None, start: cython.Py_ssize_t, end: cython.Py_ssize_t
) -> object:
    """``buf[start:end]``: a slice of ``view``, or a copy where no view was made."""
    if view is None:
        return buf[start:end]
    return view[start:end]


@cython.cfunc
def _magic(buf: bytes, pos: cython.Py_ssize_t, end: cython.Py_ssize_t) -> cython.int:
    """The magic number's second byte when ``buf[pos:end]`` opens with a magic number and
    its 32-bit field; -1 otherwise."""
    if end - pos < MAGIC_SIZE + U32_SIZE or buf[pos] != MAGIC:
        return -1
    return buf[pos + 1]


@cython.cfunc
def u32(buf: bytes, pos: cython.Py_ssize_t) -> cython.Py_ssize_t:
    """The big-endian unsigned 32-bit integer at ``buf[pos]`` (the caller checked that
    its 4 bytes are within the frame; indexing checks them against the buffer too)."""
    return (
        cython.cast(cython.Py_ssize_t, buf[pos]) << 24
        | cython.cast(cython.Py_ssize_t, buf[pos + 1]) << 16
        | cython.cast(cython.Py_ssize_t, buf[pos + 2]) << 8
        | cython.cast(cython.Py_ssize_t, buf[pos + 3])
    )
