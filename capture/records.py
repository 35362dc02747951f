# cython: annotation_typing=True
"""Capture records out of pcap and pcapng bytes, read in bounded chunks.

The reader never needs a file path: it pulls chunks from any binary stream (a local file,
a gzip stream, bytes fetched from object storage), so memory stays bounded by the chunk
size and the largest record. A :class:`RecordWalk` steps from record to record over the
current chunk (the capture path parses each in place, making no object per record);
:func:`iter_records` gives them as ``(ts_us, linktype, data, orig_len)`` where ``data``
is a memoryview into the current chunk: consumers copy what they keep.

Compiled by Cython, the walk reads the record and block headers as C integers; every
read is of a header the chunk was first checked to hold whole.
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

import cython

from .stats import CaptureStats

if cython.compiled:  # a refill reads straight into the chunk it makes
    from cython.cimports.cpython.buffer import PyBUF_WRITE
    from cython.cimports.cpython.bytes import PyBytes_AS_STRING, PyBytes_FromStringAndSize
    from cython.cimports.cpython.memoryview import PyMemoryView_FromMemory
    from cython.cimports.libc.string import memcpy

CHUNK = 1 << 22  # bytes pulled from the stream per refill
MAX_RECORD = 1 << 26  # a record longer than this means a corrupt length field
# Timestamps a dataset (Parquet int64 microseconds) and a calendar (years 1970-9999) hold;
# a pcapng clock beyond them is damage.
MAX_TS = 253_402_300_799_999_999

Record = tuple[int, int, memoryview, int]

_PCAP_MAGICS = {  # -> big-endian, nanosecond timestamps
    b"\xd4\xc3\xb2\xa1": (False, False),
    b"\xa1\xb2\xc3\xd4": (True, False),
    b"\x4d\x3c\xb2\xa1": (False, True),
    b"\xa1\xb2\x3c\x4d": (True, True),
}
_BIT62, _BIT63 = 1 << 62, 1 << 63  # bounds of the pcapng clocks computed in C
_PCAPNG_SHB = b"\x0a\x0d\x0d\x0a"
_GZIP_MAGIC = b"\x1f\x8b"

# pcapng block types
_IDB = cython.declare(cython.ulonglong, 1)  # C constants when compiled
_PB = cython.declare(cython.ulonglong, 2)
_SPB = cython.declare(cython.ulonglong, 3)
_EPB = cython.declare(cython.ulonglong, 6)
_DSB = cython.declare(cython.ulonglong, 10)  # Decryption Secrets Block
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
    """Every record of a pcap or pcapng stream, in file order (see :func:`walk_records`)."""
    return _views(walk_records(stream, name, stats))


def _views(walk: RecordWalk) -> Iterator[Record]:
    view, buf = memoryview(b""), b""
    while walk.next():
        if walk.buf is not buf:
            buf = walk.buf
            view = memoryview(buf)
        yield walk.ts, walk.linktype, view[walk.start : walk.stop], walk.orig_len


def walk_records(
    stream: BinaryIO, name: str = "<stream>", stats: CaptureStats | None = None
) -> RecordWalk:
    """A walk over the records of a pcap or pcapng stream, in file order.

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
        return walk_records(_Gunzip(stream, head), name, stats)  # type: ignore[arg-type]
    if not head:
        raise CaptureError(f"{name}: empty file, not a pcap or pcapng capture")
    if head[:4] in _PCAP_MAGICS:
        return _PcapWalk(stream, head, name, stats)
    if head[:4] == _PCAPNG_SHB:
        return _PcapngWalk(stream, head, name, stats)
    starts = " ".join(f"{byte:02x}" for byte in head[:4])
    raise CaptureError(f"{name}: not a pcap or pcapng capture (starts with {starts})")


def _read(stream: BinaryIO, size: int, name: str) -> bytes:
    try:
        return stream.read(size)
    except (OSError, EOFError, gzip.BadGzipFile) as error:
        raise CaptureError(f"{name}: read failed: {error}", truncated=True) from None


@cython.cfunc
def _read_after(
    stream: BinaryIO, buf: bytes, pos: cython.Py_ssize_t, size: cython.Py_ssize_t, name: str
) -> bytes:
    """``buf[pos:]`` followed by up to ``size`` bytes read from ``stream``, read straight
    into the new chunk (compiled, from a stream with ``readinto``): reading into one chunk
    and joining it to the rest of the last made two, and twice the memory to fault in."""
    if not cython.compiled or not isinstance(stream, io.BufferedIOBase | io.FileIO):
        return buf[pos:] + _read(stream, size, name)
    if pos < 0 or pos > len(buf) or size < 0:
        raise ValueError("refill out of range")
    left: cython.Py_ssize_t = len(buf) - pos
    chunk: bytes = PyBytes_FromStringAndSize(cython.NULL, left + size)  # private until returned
    memcpy(PyBytes_AS_STRING(chunk), PyBytes_AS_STRING(buf) + pos, left)
    space = PyMemoryView_FromMemory(PyBytes_AS_STRING(chunk) + left, size, PyBUF_WRITE)
    filled: cython.Py_ssize_t = 0
    try:
        while filled < size:
            got = stream.readinto(space[filled:])
            if not got:
                break
            filled += got
    except (OSError, EOFError, gzip.BadGzipFile) as error:
        raise CaptureError(f"{name}: read failed: {error}", truncated=True) from None
    finally:
        space.release()
    return chunk if filled == size else chunk[: left + filled]


def _cut(name: str, at: int) -> CaptureError:
    return CaptureError(
        f"{name}: capture cut off in the middle of a record at byte {at}", truncated=True
    )


def _zero_padding(
    stream: BinaryIO, buf: bytes, pos: int, consumed: int, name: str, stats: CaptureStats
) -> None:
    """Zeros where a record header should be: padding to the end of the file (counted in
    ``stats``, searched at C speed, so a file padded with gigabytes stays quick), or
    damage after which nothing can be trusted to be a record boundary (raised as a cut)."""
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


@cython.cfunc
@cython.inline
def _field(
    buf: bytes, at: cython.Py_ssize_t, width: cython.int, big: cython.bint
) -> cython.ulonglong:
    """The unsigned ``width``-byte field at ``buf[at]`` in the file's byte order (the
    caller checked that the block holds it)."""
    value: cython.ulonglong = 0
    index: cython.int
    for index in range(width):
        value |= cython.cast(cython.ulonglong, buf[at + index]) << 8 * (
            width - 1 - index if big else index
        )
    return value


@cython.cfunc
@cython.inline
def _min_block(block: cython.ulonglong) -> cython.ulonglong:
    """The fewest bytes a pcapng block of this type needs for its fixed fields."""
    if block == _IDB:
        return 20
    if block == _SPB:
        return 16
    if block in (_PB, _EPB):
        return 32
    if block == _DSB:
        return 20
    return 12


@cython.cclass
class RecordWalk:
    """The records of one capture, one :meth:`next` at a time, each left in the walk's
    fields: ``ts``, ``linktype``, ``orig_len`` and its bytes, ``buf[start:stop]`` (``buf``
    is the current chunk of the stream). Nothing is made per record, so the reader parses
    them in place; :func:`iter_records` makes the tuples of callers that want them.

    Its fields' C types are in ``records.pxd``; the two formats are its subclasses.
    """

    def __init__(self, stream: BinaryIO, buf: bytes, name: str, stats: CaptureStats) -> None:
        self.buf = buf
        self.ts = self.linktype = self.start = self.stop = self.orig_len = 0
        self._stream = stream
        self._name = name
        self._stats = stats
        self._pos = 0  # where the next record starts in ``buf``
        self._consumed = 0  # bytes of the stream before ``buf``
        self._ended = False
        # Called with (secrets type, bytes) for each pcapng Decryption Secrets Block:
        # TLS key log lines a capture embeds (``editcap --inject-secrets``).
        self.on_secrets = None

    @cython.ccall
    @cython.exceptval(-1, check=False)
    def next(self) -> cython.bint:
        """Step to the next record: false at the end of the capture."""
        raise NotImplementedError

    @cython.cfunc
    @cython.exceptval(-1, check=False)
    def _refill(self, need: cython.Py_ssize_t) -> cython.bint:
        """``buf`` from the next record on, then the next chunk (at least ``need`` bytes
        unless the stream ends); false at a clean end."""
        chunk = _read_after(self._stream, self.buf, self._pos, max(CHUNK, need), self._name)
        if len(chunk) == len(self.buf) - self._pos:  # nothing more
            if self._pos < len(self.buf):
                raise _cut(self._name, self._consumed + self._pos)
            self._ended = True
            return False
        self._consumed += self._pos
        self.buf = chunk
        self._pos = 0
        return True

    @cython.cfunc
    @cython.exceptval(-1, check=False)
    def _padding(self) -> cython.bint:
        """Zeros where a record header should be: the end, or damage (raised)."""
        self._ended = True
        _zero_padding(self._stream, self.buf, self._pos, self._consumed, self._name, self._stats)
        return False


@cython.cclass
class _PcapWalk(RecordWalk):
    """Classic pcap: 24-byte file header, then 16-byte record headers."""

    def __init__(self, stream: BinaryIO, buf: bytes, name: str, stats: CaptureStats) -> None:
        super().__init__(stream, buf, name, stats)
        self._big, self._nanos = _PCAP_MAGICS[buf[:4]]
        self._begun = False

    @cython.ccall
    @cython.exceptval(-1, check=False)
    def next(self) -> cython.bint:
        if self._ended:
            return False
        if not self._begun:
            self._begin()
        big: cython.bint = self._big
        while True:
            buf: bytes = self.buf
            pos: cython.Py_ssize_t = self._pos
            need: cython.Py_ssize_t = 16
            if pos + 16 <= len(buf):
                sec: cython.ulonglong = _field(buf, pos, 4, big)
                frac: cython.ulonglong = _field(buf, pos + 4, 4, big)
                caplen: cython.ulonglong = _field(buf, pos + 8, 4, big)
                orig_len: cython.ulonglong = _field(buf, pos + 12, 4, big)
                if not caplen and not orig_len and not sec:
                    return self._padding()
                if pos + 16 + caplen <= len(buf):
                    self.ts = sec * 1_000_000 + (frac // 1000 if self._nanos else frac)
                    self.start = pos + 16
                    self.stop = self._pos = self.start + caplen
                    self.orig_len = orig_len
                    return True
                if caplen > MAX_RECORD:
                    raise CaptureError(
                        f"{self._name}: corrupt record length {caplen} at byte"
                        f" {self._consumed + pos}",
                        truncated=True,
                    )
                need = 16 + caplen
            if not self._refill(need):
                return False

    @cython.cfunc
    @cython.exceptval(-1, check=False)
    def _begin(self) -> cython.int:
        """The file header: its link type."""
        while len(self.buf) < 24:
            more = _read(self._stream, CHUNK, self._name)
            if not more:
                raise CaptureError(f"{self._name}: pcap file header cut short", truncated=True)
            self.buf += more
        self.linktype = _field(self.buf, 20, 4, self._big) & 0x0FFFFFFF
        self._pos = 24
        self._begun = True
        return 0


@cython.cclass
class _Interface:
    """What a pcapng interface description says about its packets.

    Compiled, a packet's time is C arithmetic whenever it cannot overflow 64 bits (the
    usual resolutions and offsets); the rest are Python integers. Both give the same.
    """

    def __init__(self, linktype: cython.long, snaplen: cython.ulonglong) -> None:
        self.linktype = linktype
        self.snaplen = snaplen or MAX_RECORD
        self._mul, self._div, self._offset_us = 1, 1, 0  # default resolution: microseconds
        self._exact()

    def set_resolution(self, code: int) -> None:
        """if_tsresol: high bit set = negative power of 2, else negative power of 10 (a
        Python integer: powers up to 2**127)."""
        exponent = code & 0x7F
        if code & 0x80:
            self._mul, self._div = 1_000_000, 1 << exponent
        elif exponent >= 6:
            self._mul, self._div = 1, 10 ** (exponent - 6)
        else:
            self._mul, self._div = 10 ** (6 - exponent), 1
        self._exact()

    def set_offset(self, seconds: int) -> None:
        """if_tsoffset: the seconds to add to every timestamp."""
        self._offset_us = seconds * 1_000_000
        self._exact()

    def _exact(self) -> None:
        """The C copies of the clock when they fit, and the largest raw timestamp whose
        time they give without overflow (``stamp * mul <= 2**62``)."""
        self.fits = self._div < _BIT63 and -_BIT62 <= self._offset_us <= _BIT62
        if self.fits:
            self.mul, self.div, self.offset_us = self._mul, self._div, self._offset_us
            self.exact_limit = _BIT62 // self._mul

    @cython.cfunc
    @cython.exceptval(-2, check=False)
    def time(self, stamp: cython.ulonglong) -> cython.longlong:
        """The time in microseconds of a raw timestamp, or -1 when no calendar holds it."""
        ts: cython.longlong
        if self.fits and stamp <= self.exact_limit:
            ts = cython.cast(cython.longlong, stamp * self.mul // self.div) + self.offset_us
            return ts if 0 <= ts <= MAX_TS else -1
        exact = stamp * self._mul // self._div + self._offset_us
        return exact if 0 <= exact <= MAX_TS else -1


def _parse_idb(buf: bytes, pos: int, length: int, big: bool) -> _Interface:
    interface = _Interface(_field(buf, pos + 8, 2, big), _field(buf, pos + 12, 4, big))
    option = pos + 16
    end = pos + length - 4
    while option + 4 <= end:
        code, size = _field(buf, option, 2, big), _field(buf, option + 2, 2, big)
        value = option + 4
        if code == 0 or value + size > end:  # the end, or an option running past its block
            break
        if code == 9 and size >= 1:  # if_tsresol
            interface.set_resolution(buf[value])
        elif code == 14 and size >= 8:  # if_tsoffset, seconds
            interface.set_offset(struct.unpack_from(">q" if big else "<q", buf, value)[0])
        option = value + size + (4 - size % 4) % 4
    return interface


@cython.cclass
class _PcapngWalk(RecordWalk):
    """pcapng: sections (each with its byte order) of interfaces and packet blocks.

    A block is delimited by its length, so a damaged one (too short for its fields, a
    packet longer than its block, an interface never declared) is skipped alone and
    counted in ``stats.bad_blocks``. A timestamp no calendar holds is counted in
    ``stats.bad_timestamps`` and replaced by the previous packet's, so its bytes are kept.
    """

    def __init__(self, stream: BinaryIO, buf: bytes, name: str, stats: CaptureStats) -> None:
        super().__init__(stream, buf, name, stats)
        self._big = False
        self._interfaces = []

    @cython.ccall
    @cython.exceptval(-1, check=False)
    def next(self) -> cython.bint:
        if self._ended:
            return False
        while True:
            buf: bytes = self.buf
            pos: cython.Py_ssize_t = self._pos
            need: cython.Py_ssize_t = 12
            while pos + 12 <= len(buf):
                if buf[pos : pos + 4] == _PCAPNG_SHB:
                    bom = buf[pos + 8 : pos + 12]
                    if bom == b"\x4d\x3c\x2b\x1a":
                        self._big = False
                    elif bom == b"\x1a\x2b\x3c\x4d":
                        self._big = True
                    else:
                        raise CaptureError(
                            f"{self._name}: bad pcapng byte-order mark at {self._consumed + pos}"
                        )
                    self._interfaces = []
                big: cython.bint = self._big
                block: cython.ulonglong = _field(buf, pos, 4, big)
                length: cython.ulonglong = _field(buf, pos + 4, 4, big)
                if length < 12 or length % 4 or length > MAX_RECORD:
                    if not block and not length:
                        self._pos = pos
                        return self._padding()
                    raise CaptureError(
                        f"{self._name}: corrupt pcapng block length {length} at byte"
                        f" {self._consumed + pos}",
                        truncated=True,
                    )
                if pos + length > len(buf):
                    need = length
                    break
                self._pos = pos + length
                if self._block(buf, pos, block, length):
                    return True
                pos = self._pos
            self._pos = pos
            if not self._refill(need):
                return False

    @cython.cfunc
    @cython.exceptval(-1, check=False)
    def _block(
        self, buf: bytes, pos: cython.Py_ssize_t, block: cython.ulonglong, length: cython.ulonglong
    ) -> cython.bint:
        """Take the whole block at ``pos``: whether it is a packet (then the current record)."""
        big: cython.bint = self._big
        caplen: cython.ulonglong
        interface: _Interface
        if length < _min_block(block):
            self._stats.bad_blocks += 1
        elif block in (_EPB, _PB):
            if block == _PB:  # obsolete: a 16-bit interface id, then a drop count
                index: cython.ulonglong = _field(buf, pos + 8, 2, big)
            else:
                index = _field(buf, pos + 8, 4, big)
            caplen = _field(buf, pos + 20, 4, big)
            if index >= len(self._interfaces) or caplen > length - 32:
                self._stats.bad_blocks += 1
            else:
                interface = self._interfaces[index]
                ts: cython.longlong = interface.time(
                    _field(buf, pos + 12, 4, big) << 32 | _field(buf, pos + 16, 4, big)
                )
                if ts >= 0:
                    self.ts = ts
                else:
                    self._stats.bad_timestamps += 1
                return self._packet(interface, pos + 28, caplen, _field(buf, pos + 24, 4, big))
        elif block == _SPB:
            orig_len: cython.ulonglong = _field(buf, pos + 8, 4, big)
            if not self._interfaces:
                self._stats.bad_blocks += 1
            else:
                interface = self._interfaces[0]
                caplen = min(orig_len, interface.snaplen, length - 16)
                return self._packet(interface, pos + 12, caplen, orig_len)
        elif block == _IDB:
            self._interfaces.append(_parse_idb(buf, pos, length, big))
        elif block == _DSB:
            size: cython.ulonglong = _field(buf, pos + 12, 4, big)
            if size > length - 20:
                self._stats.bad_blocks += 1
            elif self.on_secrets is not None:
                self.on_secrets(_field(buf, pos + 8, 4, big), buf[pos + 16 : pos + 16 + size])
        return False

    @cython.cfunc
    @cython.exceptval(-1, check=False)
    def _packet(
        self,
        interface: _Interface,
        start: cython.Py_ssize_t,
        caplen: cython.Py_ssize_t,
        orig_len: cython.ulonglong,
    ) -> cython.bint:
        self.linktype = interface.linktype
        self.start = start
        self.stop = start + caplen
        self.orig_len = orig_len
        return True
