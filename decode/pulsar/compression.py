"""Payload decompression for the four codecs Pulsar clients use, with a bomb guard.

Every codec is told the size it must produce (``uncompressed_size`` from the message
metadata) and never allowed to produce more than ``limit`` bytes, so a hostile or corrupt
entry cannot make the decoder allocate without bound.
"""

from __future__ import annotations

import zlib

import cramjam
import lz4.block
import zstandard

from ..wire import WireError, snappy_length

NONE, LZ4, ZLIB, ZSTD, SNAPPY = 0, 1, 2, 3, 4
CODEC_NAMES = {NONE: "NONE", LZ4: "LZ4", ZLIB: "ZLIB", ZSTD: "ZSTD", SNAPPY: "SNAPPY"}

_zstd = zstandard.ZstdDecompressor()


class DecompressionError(Exception):
    """The entry could not be decompressed into the size its metadata announced."""


def decompress(codec: int, data: bytes, uncompressed_size: int, limit: int) -> bytes:
    """Return the decompressed payload, or raise :class:`DecompressionError`."""
    if codec == NONE:
        return data
    if uncompressed_size > limit:
        raise DecompressionError(f"uncompressed_size {uncompressed_size} exceeds limit {limit}")
    try:
        out = _DECODERS[codec](data, uncompressed_size, limit)
    except KeyError:
        raise DecompressionError(f"unknown compression type {codec}") from None
    except DecompressionError:
        raise
    except Exception as exc:
        raise DecompressionError(f"{CODEC_NAMES.get(codec, codec)}: {exc}") from None
    if len(out) != uncompressed_size:
        raise DecompressionError(
            f"{CODEC_NAMES[codec]} produced {len(out)} bytes, metadata says {uncompressed_size}"
        )
    return out


# LZ4 spends at least one byte per 255 bytes of match: a block cannot expand further.
LZ4_MAX_RATIO = 255


def _lz4(data: bytes, size: int, limit: int) -> bytes:
    # Raw LZ4 block: no frame header, the size comes from the metadata. The decompressor
    # allocates that size up front, so a size the block cannot reach is refused first.
    if size > LZ4_MAX_RATIO * len(data) + 64:
        raise DecompressionError(f"LZ4 block of {len(data)} bytes cannot expand to {size}")
    return lz4.block.decompress(data, uncompressed_size=size)


def _zlib(data: bytes, size: int, limit: int) -> bytes:
    # The Java client sync-flushes its deflater and never finishes it, so the stream has
    # no end marker: a decompressobj accepts that where zlib.decompress would not.
    inflater = zlib.decompressobj()
    return inflater.decompress(data, size + 1)


def _zstd_decode(data: bytes, size: int, limit: int) -> bytes:
    # Read through a stream so a frame header announcing a huge size allocates nothing:
    # one byte more than expected is enough to detect a mismatch.
    reader = _zstd.stream_reader(data)
    parts = []
    wanted = size + 1
    while wanted > 0:
        part = reader.read(wanted)
        if not part:
            break
        parts.append(part)
        wanted -= len(part)
    return b"".join(parts)


def _snappy(data: bytes, size: int, limit: int) -> bytes:
    # Raw (unframed) snappy; its preamble states the output length, checked first.
    try:
        announced = snappy_length(data)
    except WireError:
        raise DecompressionError("SNAPPY block has no valid length preamble") from None
    if announced != size or announced > limit:
        raise DecompressionError(f"SNAPPY announces {announced} bytes, metadata says {size}")
    return bytes(cramjam.snappy.decompress_raw(data))


_DECODERS = {LZ4: _lz4, ZLIB: _zlib, ZSTD: _zstd_decode, SNAPPY: _snappy}
