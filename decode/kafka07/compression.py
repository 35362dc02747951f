"""Expanding a compressed 0.7 message's payload, never past a byte budget.

0.7 has two codecs (``kafka.message.CompressionCodec``): 1 gzip (``GZIPOutputStream``, one
member) and 2 snappy. The Scala/Java client writes snappy through xerial's
``SnappyOutputStream`` (``\\x82SNAPPY\\x00``, two int32 versions, then ``[int32 length][raw
block]``...); other clients (Node, Python) write one raw snappy block. Both are accepted.
Every codec is stopped at ``limit`` output bytes so a hostile payload cannot make the
decoder allocate without bound.
"""

from __future__ import annotations

import struct
import zlib

import cramjam

from ..wire import WireError, snappy_length

NONE, GZIP, SNAPPY = 0, 1, 2
CODEC_NAMES = {NONE: "NONE", GZIP: "GZIP", SNAPPY: "SNAPPY"}
XERIAL_MAGIC = b"\x82SNAPPY\x00"
_XERIAL_HEADER = len(XERIAL_MAGIC) + 8  # magic, version, compatible version
_BLOCK = struct.Struct(">i")


class DecompressionError(Exception):
    """The payload is not a valid stream of its codec, or expands past the budget."""


def codec_name(codec: int) -> str:
    return CODEC_NAMES.get(codec, str(codec))


def decompress(codec: int, data: bytes | memoryview, limit: int) -> bytes:
    """The expanded payload (at most ``limit`` bytes), or :class:`DecompressionError`."""
    try:
        if codec == GZIP:
            return _gunzip(data, limit)
        if codec == SNAPPY:
            if data[: len(XERIAL_MAGIC)] == XERIAL_MAGIC:
                return _xerial(data, limit)
            return _snappy_block(data, limit)
    except DecompressionError:
        raise
    except Exception as exc:
        raise DecompressionError(f"{codec_name(codec)}: {exc}") from None
    raise DecompressionError(f"unknown compression codec {codec}")


def _gunzip(data: bytes | memoryview, limit: int) -> bytes:
    inflater = zlib.decompressobj(16 + zlib.MAX_WBITS)
    out = inflater.decompress(data, limit + 1)
    if len(out) > limit:
        raise DecompressionError(f"GZIP expands past the {limit}-byte limit")
    if not inflater.eof:
        raise DecompressionError("GZIP stream is truncated")
    return out


def _snappy_block(data: bytes | memoryview, limit: int) -> bytes:
    try:
        announced = snappy_length(data)
    except WireError:
        raise DecompressionError("SNAPPY block has no valid length preamble") from None
    if announced > limit:
        raise DecompressionError(f"SNAPPY block announces {announced} bytes, limit is {limit}")
    return bytes(cramjam.snappy.decompress_raw(data))


def _xerial(data: bytes | memoryview, limit: int) -> bytes:
    if len(data) < _XERIAL_HEADER:
        raise DecompressionError("SNAPPY stream header is truncated")
    blocks = []
    pos = _XERIAL_HEADER
    budget = limit
    while pos < len(data):
        if pos + 4 > len(data):
            raise DecompressionError("SNAPPY stream ends inside a block length")
        (size,) = _BLOCK.unpack_from(data, pos)
        pos += 4
        if size < 0 or pos + size > len(data):
            raise DecompressionError(f"SNAPPY block of {size} bytes runs past the payload")
        block = _snappy_block(data[pos : pos + size], budget)
        budget -= len(block)
        blocks.append(block)
        pos += size
    return b"".join(blocks)
