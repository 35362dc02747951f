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
import re
import struct
import zlib
from collections.abc import Iterator
from typing import BinaryIO

from pwcap.capture.stats import CaptureStats

CHUNK = 1 << 22  # bytes pulled from the stream per refill
MAX_RECORD = 1 << 26  # a record longer than this means a corrupt length field
# Timestamps a dataset (Parquet int64 microseconds) and a calendar (years 1970-9999) hold;
# a pcapng clock beyond them is damage.
MAX_TS = 253_402_300_799_999_999

Record = tuple[int, int, memoryview, int]

_PCAP_MAGICS = {
    b"\xd4\xc3\xb2\xa1": ("<", False),
    b"\xa1\xb2\xc3\xd4": (">", False),
    b"\x4d\x3c\xb2\xa1": ("<", True),
    b"\xa1\xb2\x3c\x4d": (">", True),
}
_PCAPNG_SHB = b"\x0a\x0d\x0d\x0a"
_GZIP_MAGIC = b"\x1f\x8b"

# pcapng block types, and the fewest bytes each needs for its fixed fields
_IDB, _PB, _SPB, _EPB = 1, 2, 3, 6
_MIN_BLOCK = {_IDB: 20, _PB: 32, _SPB: 16, _EPB: 32}
_NONZERO = re.compile(rb"[^\x00]")


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
        self._failed: str | None = None  # the damage found, raised on the next read

    def readable(self) -> bool:
        return True

    def read(self, size: int = -1) -> bytes:
        if self._failed is not None:
            raise gzip.BadGzipFile(self._failed)
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
            before = self._inflate.copy()
            try:
                out = self._inflate.decompress(self._input, limit)
            except zlib.error as error:
                return self._salvage(before, limit, str(error))
            self._input = self._inflate.unconsumed_tail
            if out:
                return out

    def _salvage(self, before: zlib._Decompress, limit: int, error: str) -> bytes:
        """What the pending input inflates to before the damage; the damage is raised on
        the next read. A bad CRC or length in a member's trailer is found only after all
        of its data inflated: every record is kept, then the reader reports the trailer."""
        data, good, bad, best = self._input, 0, len(self._input), b""
        while bad - good > 1:  # the longest prefix that inflates without an error
            middle = (good + bad) // 2
            trial = before.copy()
            try:
                out = trial.decompress(data[:middle], limit)
            except zlib.error:
                bad = middle
            else:
                good, best = middle, out
        self._input = b""
        if "check" in error:  # zlib: "incorrect data check" / "incorrect length check"
            self._failed = f"gzip trailer CRC or length does not match the data ({error})"
        else:
            self._failed = f"corrupt gzip data: {error}"
        if not best:
            raise gzip.BadGzipFile(self._failed)
        return best


def iter_records(
    stream: BinaryIO, name: str = "<stream>", stats: CaptureStats | None = None
) -> Iterator[Record]:
    """Every record of a pcap or pcapng stream, in file order.

    Gzip is recognised by its magic bytes, not by a file name. Raises
    :class:`CaptureError` at once for a stream that is not a capture, and after the last
    whole record for a capture cut off mid-record. Damage the reader steps over (a pcapng
    block too short for its fields, a timestamp beyond any calendar, zero padding after
    the last record) is counted in ``stats``.
    """
    stats = stats if stats is not None else CaptureStats()
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
        return iter_records(_Gunzip(stream, head), name, stats)  # type: ignore[arg-type]
    if not head:
        raise CaptureError(f"{name}: empty file, not a pcap or pcapng capture")
    if head[:4] in _PCAP_MAGICS:
        return _pcap_records(stream, head, name, stats)
    if head[:4] == _PCAPNG_SHB:
        return _pcapng_records(stream, head, name, stats)
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


def _zero_padding(
    stream: BinaryIO, buf: bytes, pos: int, consumed: int, name: str, stats: CaptureStats
) -> None:
    """Zeros where a record header should be: padding to the end of the file (counted in
    ``stats``, at C speed, so a gigabyte of it costs a second), or damage after which
    nothing can be trusted to be a record boundary (raised as a cut)."""
    start = consumed + pos
    while True:
        found = _NONZERO.search(buf, pos)
        if found is not None:
            at = consumed + found.start()
            raise CaptureError(
                f"{name}: {at - start} zero bytes at byte {start} are not a record;"
                " the rest of the file is not read",
                truncated=True,
            )
        consumed += len(buf)
        buf, pos = _read(stream, CHUNK, name), 0
        if not buf:
            stats.padding_bytes += consumed - start
            return


def _pcap_records(stream: BinaryIO, buf: bytes, name: str, stats: CaptureStats) -> Iterator[Record]:
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
            if not caplen and not orig_len and not sec:
                _zero_padding(stream, buf, pos, consumed, name, stats)
                return
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
        value = option + 4
        if code == 0 or value + size > end:  # the end, or an option running past its block
            break
        if code == 9 and size >= 1:  # if_tsresol
            interface.set_resolution(buf[value])
        elif code == 14 and size >= 8:  # if_tsoffset, seconds
            interface.offset_us = struct.unpack_from(endian + "q", buf, value)[0] * 1_000_000
        option = value + size + (-size % 4)
    return interface


def _pcapng_records(
    stream: BinaryIO, buf: bytes, name: str, stats: CaptureStats
) -> Iterator[Record]:
    """pcapng: sections (each with its byte order) of interfaces and packet blocks.

    A block is delimited by its length, so a damaged one (too short for its fields, a
    packet longer than its block, an interface never declared) is skipped alone and
    counted in ``stats.bad_blocks``. A timestamp no calendar holds is counted in
    ``stats.bad_timestamps`` and replaced by the previous packet's, so its bytes are kept.
    """
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
                if not block and not length:
                    _zero_padding(stream, buf, pos, consumed, name, stats)
                    return
                raise CaptureError(
                    f"{name}: corrupt pcapng block length {length} at byte {consumed + pos}",
                    truncated=True,
                )
            if pos + length > end:
                break
            if length < _MIN_BLOCK.get(block, 12):
                stats.bad_blocks += 1
            elif block in (_EPB, _PB):
                index, high, low, caplen, orig_len = epb(buf, pos + 8)
                if block == _PB:  # obsolete: a 16-bit interface id, then a drop count
                    index = struct.unpack_from(endian + "H", buf, pos + 8)[0]
                if index >= len(interfaces) or caplen > length - 32:
                    stats.bad_blocks += 1
                else:
                    interface = interfaces[index]
                    ts = ((high << 32 | low) * interface.mul // interface.div) + (
                        interface.offset_us
                    )
                    if 0 <= ts <= MAX_TS:
                        last_ts = ts
                    else:
                        stats.bad_timestamps += 1
                    start = pos + 28
                    yield last_ts, interface.linktype, view[start : start + caplen], orig_len
            elif block == _SPB:
                orig_len = u32(buf, pos + 8)[0]
                if not interfaces:
                    stats.bad_blocks += 1
                else:
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
