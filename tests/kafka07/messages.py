"""Kafka 0.7 message sets as the broker sees them: walk, check CRC, expand compression.

A message set is a run of ``[LENGTH][MAGIC][COMPRESSION if MAGIC=1][CRC32][PAYLOAD]``
with no count, so a fetch that stops at MAX_SIZE leaves a partial message at the end: the
walk reports those bytes as a truncated tail. A compressed message's payload is itself a
message set (gzip, or snappy raw or in the Java client's framed stream); the walk expands
it recursively so the journal holds the messages an application would see.
"""

from __future__ import annotations

import gzip
import hashlib
import struct
import zlib
from dataclasses import dataclass, field

import cramjam

COMPRESSION_NAMES = {0: "NONE", 1: "GZIP", 2: "SNAPPY"}  # as the dataset names them
XERIAL_MAGIC = b"\x82SNAPPY\x00"  # the Java client's snappy stream header


@dataclass(frozen=True)
class Message:
    """One message after decompression; ``offset`` is the outer message's byte offset."""

    offset: int  # log byte offset of the outermost message this one came from
    next_offset: int  # where the next outer message starts (0.7's MessageAndOffset.offset)
    magic: int
    compression: str  # of the outer message that carried it ("NONE" when not wrapped)
    crc_ok: bool  # this message's own CRC and, when wrapped, its wrapper's
    payload_size: int
    sha256: str
    inner_index: int | None  # position inside the wrapper's set; None when not wrapped

    def as_json(self) -> dict[str, object]:
        return {
            "offset": self.offset,
            "next_offset": self.next_offset,
            "magic": self.magic,
            "compression": self.compression,
            "crc_ok": self.crc_ok,
            "payload_size": self.payload_size,
            "sha256": self.sha256,
            "inner_index": self.inner_index,
        }


@dataclass
class MessageSet:
    """What a message set holds: its messages, and any bytes of an incomplete last one."""

    messages: list[Message] = field(default_factory=list)
    outer_messages: int = 0
    truncated_tail: int = 0  # bytes of a partial message at the end (normal for FETCH)
    valid_bytes: int = 0  # bytes of complete outer messages


@dataclass(frozen=True)
class RawMessage:
    start: int  # position in its buffer
    size: int  # with the 4-byte length
    magic: int
    codec: int
    crc_ok: bool
    payload: bytes


def split_messages(data: bytes) -> tuple[list[RawMessage], int]:
    """Complete messages in ``data`` and the length of the partial remainder."""
    raw: list[RawMessage] = []
    position = 0
    while position + 4 <= len(data):
        (length,) = struct.unpack_from(">i", data, position)
        end = position + 4 + length
        if length < 6 or end > len(data):
            break
        magic = data[position + 4]
        header = 6 if magic == 1 else 5  # magic, [compression], crc
        codec = data[position + 5] if magic == 1 else 0
        (crc,) = struct.unpack_from(">I", data, position + 4 + header - 4)
        payload = data[position + 4 + header : end]
        raw.append(
            RawMessage(position, end - position, magic, codec, zlib.crc32(payload) == crc, payload)
        )
        position = end
    return raw, len(data) - position


def decompress(codec: int, payload: bytes) -> bytes:
    if codec == 1:
        return gzip.decompress(payload)
    if codec == 2:
        if payload.startswith(XERIAL_MAGIC):
            return unframe_xerial(payload)
        return bytes(cramjam.snappy.decompress_raw(payload))
    raise ValueError(f"unknown compression codec {codec}")


def unframe_xerial(payload: bytes) -> bytes:
    """Magic, two int32 versions, then blocks of ``[int32 length][raw snappy]``."""
    position = len(XERIAL_MAGIC) + 8
    blocks = []
    while position < len(payload):
        (length,) = struct.unpack_from(">i", payload, position)
        block = payload[position + 4 : position + 4 + length]
        blocks.append(bytes(cramjam.snappy.decompress_raw(block)))
        position += 4 + length
    return b"".join(blocks)


def read_message_set(data: bytes, base_offset: int) -> MessageSet:
    """Walk a message set that starts at log byte offset ``base_offset``."""
    raw, tail = split_messages(data)
    result = MessageSet(outer_messages=len(raw), truncated_tail=tail, valid_bytes=len(data) - tail)
    for message in raw:
        offset = base_offset + message.start
        next_offset = offset + message.size
        if message.codec == 0:
            result.messages.append(_leaf(message, offset, next_offset, "NONE", True, None))
            continue
        inner, _ = split_messages(decompress(message.codec, message.payload))
        codec_name = COMPRESSION_NAMES[message.codec]
        for index, member in enumerate(inner):
            result.messages.append(
                _leaf(member, offset, next_offset, codec_name, message.crc_ok, index)
            )
    return result


def _leaf(
    message: RawMessage,
    offset: int,
    next_offset: int,
    compression: str,
    wrapper_ok: bool,
    inner_index: int | None,
) -> Message:
    return Message(
        offset=offset,
        next_offset=next_offset,
        magic=message.magic,
        compression=compression,
        crc_ok=message.crc_ok and wrapper_ok,
        payload_size=len(message.payload),
        sha256=hashlib.sha256(message.payload).hexdigest(),
        inner_index=inner_index,
    )
