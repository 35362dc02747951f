"""Capture records out of pcap and pcapng bytes, read in bounded chunks.

The reader never needs a file path: it pulls chunks from any binary stream (a local file,
a gzip stream, bytes fetched from object storage), so memory stays bounded by the chunk
size and the largest record. Records are ``(ts_us, linktype, data, orig_len)`` where
``data`` is a memoryview into the current chunk: consumers copy what they keep.
"""

from __future__ import annotations

import gzip
import io
import os
import struct
import zlib
from collections.abc import Iterator
from typing import BinaryIO

CHUNK = 1 << 22  # bytes pulled from the stream per refill
MAX_RECORD = 1 << 26  # a record longer than this means a corrupt length field

Record = tuple[int, int, memoryview, int]

_PCAP_MAGICS = {
    b"\xd4\xc3\xb2\xa1": ("<", False),
    b"\xa1\xb2\xc3\xd4": (">", False),
    b"\x4d\x3c\xb2\xa1": ("<", True),
    b"\xa1\xb2\x3c\x4d": (">", True),
}
_PCAPNG_SHB = b"\x0a\x0d\x0d\x0a"
_GZIP_MAGIC = b"\x1f\x8b"

# pcapng block types
_IDB, _PB, _SPB, _EPB = 1, 2, 3, 6


class CaptureError(Exception):
    """A one-line reason the input cannot be read (further) as a capture.

    ``truncated`` is true when the file is a capture that ends in the middle of a record:
    everything before the cut has been read.
    """

    def __init__(self, message: str, *, truncated: bool = False) -> None:
        super().__init__(message)
        self.truncated = truncated


def open_capture(source: str | os.PathLike[str] | BinaryIO | bytes) -> tuple[BinaryIO, str]:
    """A binary stream of the capture, and a name for messages (:func:`iter_records`
    undoes gzip)."""
    if isinstance(source, bytes | bytearray | memoryview):
        stream: BinaryIO = io.BytesIO(source)
        name = "<bytes>"
    elif isinstance(source, str | os.PathLike):
        stream = open(source, "rb")  # noqa: SIM115 - returned to the caller, who closes it
        name = os.fspath(source)
    else:
        stream = source
        name = str(getattr(source, "name", "<stream>"))
    return stream, name


class _Gunzip(io.RawIOBase):
    """Gzip members decompressed as read, every byte before a cut handed out first.

    ``gzip.GzipFile`` raises at a cut and drops what that read had already decompressed,
    so a cut ``.pcap.gz`` would lose the records before the cut: here the cut is raised
    (as ``EOFError``) only on the read after the last byte.
    """

    def __init__(self, raw: BinaryIO, head: bytes) -> None:
        super().__init__()
        self._raw = raw
        self._inflate = zlib.decompressobj(wbits=31)
        self._input = head  # compressed bytes already read from ``raw``

    def readable(self) -> bool:
        return True

    def read(self, size: int = -1) -> bytes:
        limit = size if size > 0 else CHUNK
        while True:
            if self._inflate.eof:  # the next member, if any
                self._input = self._inflate.unused_data + self._input
                if not self._input:
                    self._input = self._raw.read(CHUNK)
                    if not self._input:
                        return b""
                self._inflate = zlib.decompressobj(wbits=31)
            if not self._input:
                self._input = self._raw.read(CHUNK)
                if not self._input:
                    raise EOFError("gzip stream cut off before its end")
            try:
                out = self._inflate.decompress(self._input, limit)
            except zlib.error as error:
                raise gzip.BadGzipFile(f"corrupt gzip data: {error}") from None
            self._input = self._inflate.unconsumed_tail
            if out:
                return out


def iter_records(stream: BinaryIO, name: str = "<stream>") -> Iterator[Record]:
    """Every record of a pcap or pcapng stream, in file order.

    Gzip is recognised by its magic bytes, not by a file name. Raises
    :class:`CaptureError` at once for a stream that is not a capture, and after the last
    whole record for a capture cut off mid-record.
    """
    try:
        head = stream.read(CHUNK)
        while 0 < len(head) < 4:  # a short read (a pipe, a socket): the magic needs more
            more = stream.read(CHUNK)
            if not more:
                break
            head += more
    except (OSError, EOFError, gzip.BadGzipFile) as error:
        raise CaptureError(f"{name}: unreadable: {error}") from None
    if head[:2] == _GZIP_MAGIC:
        return iter_records(_Gunzip(stream, head), name)  # type: ignore[arg-type]
    if not head:
        raise CaptureError(f"{name}: empty file, not a pcap or pcapng capture")
    if head[:4] in _PCAP_MAGICS:
        return _pcap_records(stream, head, name)
    if head[:4] == _PCAPNG_SHB:
        return _pcapng_records(stream, head, name)
    starts = " ".join(f"{byte:02x}" for byte in head[:4])
    raise CaptureError(f"{name}: not a pcap or pcapng capture (starts with {starts})")


def _read(stream: BinaryIO, size: int, name: str) -> bytes:
    try:
        return stream.read(size)
    except (OSError, EOFError, gzip.BadGzipFile) as error:
        raise CaptureError(f"{name}: read failed: {error}", truncated=True) from None


def _refill(
    stream: BinaryIO, buf: bytes, pos: int, need: int, consumed: int, name: str
) -> tuple[bytes, memoryview, int] | None:
    """``buf`` from ``pos`` on, then the next chunk (at least ``need`` bytes unless the
    stream ends), a view of it, and its position in the stream; None at a clean end."""
    more = _read(stream, max(CHUNK, need), name)
    if not more:
        if pos < len(buf):
            raise _cut(name, consumed + pos)
        return None
    buf = buf[pos:] + more
    return buf, memoryview(buf), consumed + pos


def _cut(name: str, at: int) -> CaptureError:
    return CaptureError(
        f"{name}: capture cut off in the middle of a record at byte {at}", truncated=True
    )


def _pcap_records(stream: BinaryIO, buf: bytes, name: str) -> Iterator[Record]:
    """Classic pcap: 24-byte file header, then 16-byte record headers."""
    endian, nanos = _PCAP_MAGICS[buf[:4]]
    while len(buf) < 24:
        more = _read(stream, CHUNK, name)
        if not more:
            raise CaptureError(f"{name}: pcap file header cut short", truncated=True)
        buf += more
    linktype = struct.unpack_from(endian + "I", buf, 20)[0] & 0x0FFFFFFF
    unpack = struct.Struct(endian + "IIII").unpack_from
    view = memoryview(buf)
    pos = 24
    consumed = 0  # bytes of the stream before ``buf``
    while True:
        end = len(buf)
        while pos + 16 <= end:
            sec, frac, caplen, orig_len = unpack(buf, pos)
            start = pos + 16
            stop = start + caplen
            if stop > end:
                if caplen > MAX_RECORD:
                    raise CaptureError(
                        f"{name}: corrupt record length {caplen} at byte {consumed + pos}",
                        truncated=True,
                    )
                break
            yield (
                sec * 1_000_000 + (frac // 1000 if nanos else frac),
                linktype,
                view[start:stop],
                orig_len,
            )
            pos = stop
        need = 16 if pos + 16 > end else stop - pos
        refilled = _refill(stream, buf, pos, need, consumed, name)
        if refilled is None:
            return
        buf, view, consumed = refilled
        pos = 0


class _Interface:
    """What a pcapng interface description says about its packets."""

    __slots__ = ("div", "linktype", "mul", "offset_us", "snaplen")

    def __init__(self, linktype: int, snaplen: int) -> None:
        self.linktype = linktype
        self.snaplen = snaplen or MAX_RECORD
        self.mul, self.div, self.offset_us = 1, 1, 0  # default resolution: microseconds

    def set_resolution(self, code: int) -> None:
        """if_tsresol: high bit set = negative power of 2, else negative power of 10."""
        exponent = code & 0x7F
        if code & 0x80:
            self.mul, self.div = 1_000_000, 1 << exponent
        elif exponent >= 6:
            self.mul, self.div = 1, 10 ** (exponent - 6)
        else:
            self.mul, self.div = 10 ** (6 - exponent), 1


def _parse_idb(buf: bytes, pos: int, length: int, endian: str) -> _Interface:
    linktype, _reserved, snaplen = struct.unpack_from(endian + "HHI", buf, pos + 8)
    interface = _Interface(linktype, snaplen)
    option = pos + 16
    end = pos + length - 4
    while option + 4 <= end:
        code, size = struct.unpack_from(endian + "HH", buf, option)
        if code == 0:
            break
        value = option + 4
        if code == 9 and size >= 1:  # if_tsresol
            interface.set_resolution(buf[value])
        elif code == 14 and size >= 8:  # if_tsoffset, seconds
            interface.offset_us = struct.unpack_from(endian + "q", buf, value)[0] * 1_000_000
        option = value + size + (-size % 4)
    return interface


def _undeclared(name: str, index: int, at: int) -> CaptureError:
    return CaptureError(f"{name}: packet block at byte {at} names undeclared interface {index}")


def _pcapng_records(stream: BinaryIO, buf: bytes, name: str) -> Iterator[Record]:
    """pcapng: sections (each with its byte order) of interfaces and packet blocks."""
    endian = "<"
    interfaces: list[_Interface] = []
    header = struct.Struct("<II").unpack_from
    epb = struct.Struct("<IIIII").unpack_from
    u32 = struct.Struct("<I").unpack_from
    view = memoryview(buf)
    pos = 0
    consumed = 0
    last_ts = 0
    while True:
        end = len(buf)
        while pos + 12 <= end:
            if buf[pos : pos + 4] == _PCAPNG_SHB:
                bom = buf[pos + 8 : pos + 12]
                if bom == b"\x4d\x3c\x2b\x1a":
                    endian = "<"
                elif bom == b"\x1a\x2b\x3c\x4d":
                    endian = ">"
                else:
                    raise CaptureError(f"{name}: bad pcapng byte-order mark at {consumed + pos}")
                header = struct.Struct(endian + "II").unpack_from
                epb = struct.Struct(endian + "IIIII").unpack_from
                u32 = struct.Struct(endian + "I").unpack_from
                interfaces = []
            block, length = header(buf, pos)
            if length < 12 or length % 4 or length > MAX_RECORD:
                raise CaptureError(
                    f"{name}: corrupt pcapng block length {length} at byte {consumed + pos}",
                    truncated=True,
                )
            if pos + length > end:
                break
            if block in (_EPB, _PB):
                index, high, low, caplen, orig_len = epb(buf, pos + 8)
                if block == _PB:  # obsolete: a 16-bit interface id, then a drop count
                    index = struct.unpack_from(endian + "H", buf, pos + 8)[0]
                if index >= len(interfaces):
                    raise _undeclared(name, index, consumed + pos)
                interface = interfaces[index]
                last_ts = ((high << 32 | low) * interface.mul // interface.div) + (
                    interface.offset_us
                )
                start = pos + 28
                yield last_ts, interface.linktype, view[start : start + caplen], orig_len
            elif block == _SPB:
                orig_len = u32(buf, pos + 8)[0]
                if not interfaces:
                    raise _undeclared(name, 0, consumed + pos)
                interface = interfaces[0]
                caplen = min(orig_len, interface.snaplen, length - 16)
                yield last_ts, interface.linktype, view[pos + 12 : pos + 12 + caplen], orig_len
            elif block == _IDB:
                interfaces.append(_parse_idb(buf, pos, length, endian))
            pos += length
        need = 12 if pos + 12 > end else header(buf, pos)[1]
        refilled = _refill(stream, buf, pos, need, consumed, name)
        if refilled is None:
            return
        buf, view, consumed = refilled
        pos = 0
