"""What follows the command in a payload frame (SEND, MESSAGE).

Layout: ``[0x0e02][size][BrokerEntryMetadata]`` (optional, broker to consumer), then
``[0x0e01][CRC32-C]`` (absent before protocol v6), then ``[metadataSize][MessageMetadata]``
and the payload. The checksum covers everything after itself up to the end of the frame.
"""

from __future__ import annotations

import struct

import crc32c
from google.protobuf.message import DecodeError
from pwcap.decode.pulsar._pb.pulsar_api_pb2 import BrokerEntryMetadata, MessageMetadata
from pwcap.decode.pulsar.metadata import PlainMetadata, read_metadata

MAGIC_CHECKSUM = b"\x0e\x01"
MAGIC_BROKER_ENTRY = b"\x0e\x02"
_U32 = struct.Struct(">I")
_MAGIC_AND_U32 = struct.Struct(">2sI")


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
Entry = tuple[MessageMetadata | PlainMetadata, memoryview, bool | None, int | None, int | None]


def parse_entry(buf: bytes, start: int, end: int) -> Entry:
    """Parse ``buf[start:end]``, the bytes of a payload frame after its command."""
    view = memoryview(buf)
    pos = start
    broker_timestamp = broker_index = None
    checksum_ok = None
    if end - pos >= 6:
        magic, size = _MAGIC_AND_U32.unpack_from(buf, pos)
        if magic == MAGIC_BROKER_ENTRY:
            pos += 6
            if pos + size > end:
                raise PayloadError(
                    "bad_payload", f"broker entry metadata of {size} bytes overruns the frame"
                )
            try:
                broker = BrokerEntryMetadata.FromString(view[pos : pos + size])
            except DecodeError as exc:
                raise PayloadError(
                    "bad_protobuf", f"undecodable broker entry metadata: {exc}"
                ) from None
            pos += size
            if broker.HasField("broker_timestamp"):
                broker_timestamp = broker.broker_timestamp
            if broker.HasField("index"):
                broker_index = broker.index
            if end - pos >= 6:
                magic, size = _MAGIC_AND_U32.unpack_from(buf, pos)
        if magic == MAGIC_CHECKSUM:
            checksum_ok = crc32c.crc32c(view[pos + 6 : end]) == size
            pos += 6
    if end - pos < 4:
        raise PayloadError("bad_payload", "payload frame too short for its metadata size")
    (size,) = _U32.unpack_from(buf, pos)
    pos += 4
    if pos + size > end:
        raise PayloadError("bad_payload", f"message metadata of {size} bytes overruns the frame")
    metadata = read_metadata(buf, pos, pos + size)
    if metadata is None:  # not the common shape: the generated class reads it
        try:
            metadata = MessageMetadata.FromString(buf[pos : pos + size])
        except DecodeError as exc:
            raise PayloadError("bad_protobuf", f"undecodable message metadata: {exc}") from None
    return metadata, view[pos + size : end], checksum_ok, broker_timestamp, broker_index
