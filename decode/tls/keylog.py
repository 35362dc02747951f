"""NSS key logs (the ``SSLKEYLOGFILE`` format), indexed by client random.

A line is ``LABEL CLIENT_RANDOM SECRET`` in hex: ``CLIENT_RANDOM`` gives a TLS 1.2
master secret, the ``*_TRAFFIC_SECRET*`` labels TLS 1.3's secrets. Lines of other labels
(``EXPORTER_SECRET``, the ``*_TRAFFIC_SECRET_N`` some stacks write after a key update,
``RSA``) are skipped; blank lines and ``#`` comments too; any other line is counted as
malformed and skipped, never fatal.

A key log may hold millions of lines, most for sessions the capture does not have: the
index keeps 8 bytes a line (a 24-bit prefix of the client random and where the line
starts), sorted, and a lookup reads back the few lines it points to. The secrets of a
large key log stay in the file and are held in memory only while a connection uses
them; a key log of at most :data:`HELD` bytes (thousands of sessions) is kept as read,
as are the secrets a capture embeds, so that a lookup, once a TLS connection, makes no
system call.
"""

from __future__ import annotations

import os
from array import array

import cython

if cython.compiled:
    from cython.cimports.cpython.bytes import PyBytes_AS_STRING, PyBytes_FromStringAndSize
    from cython.cimports.libc.stdlib import qsort

CHUNK = 1 << 20  # bytes of a key log file read at a time
HELD = 16 << 20  # a key log file up to this size is kept in memory once read
MAX_LINE = 512  # longer lines are malformed (a SHA-384 secret is 96 hex digits)
NEAR = 16 * MAX_LINE  # lines of one session this close together are read at once
_MAX_LINE = cython.declare(cython.Py_ssize_t, MAX_LINE)  # the same, a C constant compiled
# The labels a decoder uses; lines of any other well-formed label are skipped.
LABELS = frozenset(
    {
        "CLIENT_RANDOM",
        "CLIENT_EARLY_TRAFFIC_SECRET",
        "CLIENT_HANDSHAKE_TRAFFIC_SECRET",
        "SERVER_HANDSHAKE_TRAFFIC_SECRET",
        "CLIENT_TRAFFIC_SECRET_0",
        "SERVER_TRAFFIC_SECRET_0",
    }
)
_BYTE_LABELS = frozenset(label.encode() for label in LABELS)
_PREFIX_BITS = cython.declare(cython.int, 24)
_OFFSET_BITS = cython.declare(cython.int, 40)  # a key log of up to 1 TB
_OFFSET_MASK = cython.declare(cython.ulonglong, 0xFF_FFFF_FFFF)  # the low _OFFSET_BITS bits


class KeyLogError(OSError):
    """A key log file that cannot be read: a one-line reason naming it."""


class _Source:
    """One key log (a file, or bytes a capture embeds) and the sorted index of its lines.

    Its bytes are ``data`` when held in memory (a file's as read; the embedded lines, a
    bytearray that grows with each block); else the file is opened once, at its first
    lookup, and read with ``pread`` (no shared file position: workers forked with it read
    it as well): a capture of thousands of TLS connections looks it up thousands of
    times."""

    __slots__ = ("_dirty", "_fd", "data", "index", "path")

    def __init__(self, path: str | None, data: bytes | bytearray | None) -> None:
        self.path = path
        self.data = data
        self.index = array("Q")
        self._dirty = False
        self._fd: int | None = None

    def __del__(self) -> None:
        if self._fd is not None:
            os.close(self._fd)

    def add(self, entries: array) -> None:
        self.index.extend(entries)
        self._dirty = True

    def sorted_index(self) -> array:
        if self._dirty:
            self.index = _sorted(self.index)
            self._dirty = False
        return self.index

    def lines_at(self, offsets: list[int]) -> list[bytes]:
        """The lines that start at ``offsets``: of the embedded bytes, or of a file not
        held in memory."""
        data = self.data
        if data is not None:
            ends = [data.find(b"\n", at) for at in offsets]
            return [
                bytes(data[at : end if end >= 0 else len(data)])
                for at, end in zip(offsets, ends, strict=True)
            ]
        lines = []
        assert self.path is not None
        try:
            if self._fd is None:
                self._fd = os.open(self.path, os.O_RDONLY)
            first, last = (min(offsets), max(offsets)) if offsets else (0, 0)
            if offsets and last - first <= NEAR:
                # A session's lines are usually written together: one read for them all.
                span = os.pread(self._fd, last - first + MAX_LINE + 2, first)
                for at in offsets:
                    start = at - first
                    stop = min(start + MAX_LINE + 2, len(span))
                    end = span.find(b"\n", start, stop)
                    lines.append(span[start : end if end >= 0 else stop])
                return lines
            for at in offsets:
                line = os.pread(self._fd, MAX_LINE + 2, at)
                end = line.find(b"\n")
                lines.append(line if end < 0 else line[:end])
        except OSError as error:
            raise KeyLogError(f"{self.path}: {error.strerror or error}") from None
        return lines

    def __getstate__(self) -> tuple:
        # A file's bytes are read again where needed rather than copied to each worker.
        return (self.path, self.data if self.path is None else None, self.sorted_index())

    def __setstate__(self, state: tuple) -> None:
        self.path, self.data, self.index = state
        self._dirty = False
        self._fd = None


class KeyLog:
    """The secrets of every key log given, by client random."""

    def __init__(self) -> None:
        self._sources: list[_Source] = []
        self._embedded: _Source | None = None
        self.lines = 0  # lines read, blank and comment lines included
        self.malformed = 0  # lines that are not ``LABEL HEX HEX``, skipped

    @classmethod
    def from_files(cls, paths: list[str]) -> KeyLog:
        """Every line of the key log files ``paths``; :class:`KeyLogError` if one of them
        cannot be read."""
        keylog = cls()
        for path in paths:
            keylog.add_file(str(path))
        return keylog

    def __bool__(self) -> bool:
        return bool(self._sources)

    def add_file(self, path: str) -> None:
        source = _Source(path, None)
        try:
            with open(path, "rb") as handle:
                held: list[bytes] | None = [] if os.fstat(handle.fileno()).st_size <= HELD else None
                carry = b""
                base = 0  # offset in the file of ``carry``'s first byte
                while True:
                    chunk = handle.read(CHUNK)
                    if held is not None:
                        held.append(chunk)
                    data = carry + chunk if carry else chunk
                    if not chunk:
                        if data:
                            self._scan(source, data, len(data), base)
                        break
                    cut = data.rfind(b"\n") + 1
                    if not cut and len(data) <= MAX_LINE:
                        carry = data
                        continue
                    cut = cut or len(data)  # a line longer than any key log line
                    self._scan(source, data, cut, base)
                    carry = data[cut:]
                    base += cut
        except OSError as error:
            raise KeyLogError(f"{path}: {error.strerror or error}") from None
        except UnicodeError:
            raise KeyLogError(f"{path}: not a key log") from None
        if held is not None:
            source.data = b"".join(held)
        self._sources.append(source)

    def add_bytes(self, data: bytes) -> None:
        """Key log lines from elsewhere (a pcapng Decryption Secrets Block)."""
        if self._embedded is None:
            self._embedded = _Source(None, bytearray())
            self._sources.append(self._embedded)
        held = self._embedded.data
        assert isinstance(held, bytearray)
        if held and not held.endswith(b"\n"):
            held += b"\n"
        base = len(held)
        held += data  # in place: a capture may embed any number of blocks
        self._scan(self._embedded, bytes(data), len(data), base)

    @cython.locals(
        data=bytes,
        end=cython.Py_ssize_t,
        pos=cython.Py_ssize_t,
        stop=cython.Py_ssize_t,
        fields=cython.longlong,
        lines=cython.Py_ssize_t,
        malformed=cython.Py_ssize_t,
        count=cython.Py_ssize_t,
        label_end=cython.Py_ssize_t,
        random_end=cython.Py_ssize_t,
        secret_end=cython.Py_ssize_t,
        base=cython.longlong,
        prefix=cython.ulonglong,
        slots=cython.ulonglong[:],
    )
    def _scan(self, source: _Source, data: bytes, end: int, base: int) -> None:
        """Index the lines of ``data[:end]``, which starts at ``base`` in its source.

        Compiled, a C loop over the bytes that writes the index entries in place: no
        Python object per line but the label's (a regular expression per line took
        longer than the whole load may)."""
        entries = array("Q", bytes(8 * (data.count(b"\n", 0, end) + 1)))  # one a line at most
        slots = entries
        known = _BYTE_LABELS
        lines = malformed = count = 0
        pos = 0
        while pos < end:
            lines += 1
            fields = _fields(data, pos, end)
            if fields < 0:  # not a key log line: where it ends, and whether it is blank
                stop = data.find(b"\n", pos, end)
                if stop < 0:
                    stop = end
                if stop - pos > MAX_LINE or not _blank_or_comment(data, pos, stop):
                    malformed += 1
                pos = stop + 1
                continue
            label_end = fields & 0x3FF
            random_end = fields >> 10 & 0x3FF
            secret_end = fields >> 20 & 0x3FF
            if (secret_end - random_end - 1) % 2:
                malformed += 1
            elif data[pos : pos + label_end] in known:
                if random_end - label_end - 1 != 64:
                    malformed += 1
                else:
                    prefix = _hex_prefix(data, pos + label_end + 1)
                    slots[count] = prefix << _OFFSET_BITS | (base + pos)
                    count += 1
            pos += (fields >> 30) + 1
        self.lines += lines
        self.malformed += malformed
        source.add(entries[:count])

    def secrets(self, client_random: bytes) -> dict[str, bytes]:
        """Every secret logged for the session of ``client_random``, by label (the last
        line of a label wins, as in Wireshark). Compiled, the index is searched, the
        line read, the client random compared and the secret decoded by C loops: a
        capture of thousands of TLS connections looks up thousands of sessions."""
        found: dict[str, bytes] = {}
        prefix = int.from_bytes(client_random[: _PREFIX_BITS // 8], "big")
        for source in self._sources:
            offsets = _offsets(source.sorted_index(), prefix)
            if not offsets:
                continue
            data = source.data
            if type(data) is bytes:  # a file held: its lines read where they are
                for at in offsets:
                    _take(data, at, client_random, found)
            else:
                for line in source.lines_at(offsets):
                    _take(line, 0, client_random, found)
        return found


@cython.cfunc
@cython.locals(
    data=bytes,
    pos=cython.Py_ssize_t,
    client_random=bytes,
    found=dict,
    fields=cython.longlong,
    label_end=cython.Py_ssize_t,
    random_end=cython.Py_ssize_t,
    secret_end=cython.Py_ssize_t,
)
@cython.returns(cython.void)
def _take(data: bytes, pos: int, client_random: bytes, found: dict) -> None:
    """The secret of the line at ``data[pos]`` into ``found`` under its label, if the line
    is well formed and for ``client_random``."""
    fields = _fields(data, pos, len(data))
    if fields < 0:
        return
    label_end, random_end = fields & 0x3FF, fields >> 10 & 0x3FF
    secret_end = fields >> 20 & 0x3FF
    if (secret_end - random_end - 1) % 2 == 0 and _hex_is(
        data, pos + label_end + 1, pos + random_end, client_random
    ):
        label = data[pos : pos + label_end].decode()
        found[label] = _unhex(data, pos + random_end + 1, pos + secret_end)


# -- one line's grammar: ``LABEL HEX HEX``, then spaces or tabs, then an optional CR ------


def _classes() -> bytes:
    """Each byte's classes in a line's grammar: :data:`_LABEL` (``[A-Z0-9_]``) and
    :data:`_HEX` (a hex digit), one table lookup a byte."""
    table = bytearray(256)
    for c in b"ABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789_":
        table[c] |= 1
    for c in b"0123456789abcdefABCDEF":
        table[c] |= 2
    return bytes(table)


_LABEL = cython.declare(cython.int, 1)
_HEX = cython.declare(cython.int, 2)
_CLASSES = cython.declare(bytes, _classes())


@cython.cfunc
@cython.locals(
    data=bytes,
    pos=cython.Py_ssize_t,
    end=cython.Py_ssize_t,
    i=cython.Py_ssize_t,
    label_end=cython.Py_ssize_t,
    random_end=cython.Py_ssize_t,
    secret_end=cython.Py_ssize_t,
    text=cython.p_uchar,
    classes=cython.p_uchar,
)
@cython.returns(cython.longlong)
def _fields(data: bytes, pos: int, end: int) -> int:
    """The line that starts at ``data[pos]`` and ends at the next newline or at ``end``:
    where its fields end, relative to ``pos`` (the label's, the client random's, the
    secret's, then the line's length without its newline: 10 bits each, packed), or -1 if
    the line is not ``[A-Z0-9_]+ HEX+ HEX+`` followed by spaces or tabs and an optional
    CR, or is longer than any key log line. Compiled, the bytes are read through a C
    pointer once ``pos`` and ``end`` are known to lie within them: every byte of a key
    log goes through here, a bounds check on each read cost three times the read."""
    if pos < 0 or end > len(data) or pos > end:
        return -1
    text = data  # compiled: pointers to the bytes and to the table of classes
    classes = _CLASSES
    i = pos
    while i < end and classes[text[i]] & _LABEL:
        i += 1
    label_end = i - pos
    if label_end == 0 or i >= end or text[i] != 32:
        return -1
    i += 1
    while i < end and classes[text[i]] & _HEX:
        i += 1
    random_end = i - pos
    if random_end == label_end + 1 or i >= end or text[i] != 32:
        return -1
    i += 1
    while i < end and classes[text[i]] & _HEX:
        i += 1
    secret_end = i - pos
    if secret_end == random_end + 1:
        return -1
    while i < end and (text[i] == 32 or text[i] == 9):
        i += 1
    if i < end and text[i] == 13:
        i += 1
    if (i < end and text[i] != 10) or i - pos > _MAX_LINE:
        return -1
    return label_end | random_end << 10 | secret_end << 20 | (i - pos) << 30


@cython.cfunc
@cython.locals(data=bytes, pos=cython.Py_ssize_t, stop=cython.Py_ssize_t, c=cython.int)
@cython.returns(cython.bint)
def _blank_or_comment(data: bytes, pos: int, stop: int) -> bool:
    """Whether the line ``data[pos:stop]`` is blank or, past its leading white space, a
    ``#`` comment."""
    while pos < stop:
        c = data[pos]
        if c != 32 and not 9 <= c <= 13:
            return c == 35
        pos += 1
    return True


@cython.cfunc
@cython.locals(
    data=bytes, at=cython.Py_ssize_t, i=cython.Py_ssize_t, c=cython.int, value=cython.longlong
)
@cython.returns(cython.longlong)
def _hex_prefix(data: bytes, at: int) -> int:
    """The value of the hex digits ``data[at:at + 6]`` (a client random's 24-bit prefix)."""
    value = 0
    for i in range(at, at + _PREFIX_BITS // 4):
        c = data[i] | 32  # lower case
        value = value << 4 | (c - 48 if c <= 57 else c - 87)
    return value


@cython.locals(
    entries=cython.p_ulonglong,
    prefix=cython.ulonglong,
    low=cython.Py_ssize_t,
    high=cython.Py_ssize_t,
    middle=cython.Py_ssize_t,
)
def _offsets(index: array, prefix: int) -> list[int]:
    """Where the lines of the client randoms with this 24-bit prefix start: the entries
    of the sorted ``index`` that have it (a binary search for the first). Compiled, read
    through the array's buffer address (a typed memoryview of it cost more to make than
    the search)."""
    offsets: list[int] = []
    if not len(index):
        return offsets
    if cython.compiled:
        address = cython.cast(cython.size_t, index.buffer_info()[0])
        entries = cython.cast(cython.p_ulonglong, address)
    else:
        entries = index
    low, high = 0, len(index)
    while low < high:
        middle = (low + high) // 2
        if entries[middle] >> _OFFSET_BITS < prefix:
            low = middle + 1
        else:
            high = middle
    while low < len(index) and entries[low] >> _OFFSET_BITS == prefix:
        offsets.append(entries[low] & _OFFSET_MASK)
        low += 1
    return offsets


@cython.cfunc
@cython.locals(
    line=bytes,
    start=cython.Py_ssize_t,
    stop=cython.Py_ssize_t,
    value=bytes,
    i=cython.Py_ssize_t,
    high=cython.int,
    low=cython.int,
    text=cython.p_uchar,
    wanted=cython.p_uchar,
)
@cython.returns(cython.bint)
def _hex_is(line: bytes, start: int, stop: int, value: bytes) -> bool:
    """Whether ``line[start:stop]`` is ``value`` in hex digits (either case). Compiled,
    read through C pointers once the span is known to lie within ``line``."""
    if stop - start != 2 * len(value) or start < 0 or stop > len(line):
        return False
    text = line  # compiled: pointers to the bytes
    wanted = value
    for i in range(len(value)):
        high = _digit(text[start + 2 * i])
        low = _digit(text[start + 2 * i + 1])
        if high < 0 or low < 0 or (high << 4 | low) != wanted[i]:
            return False
    return True


@cython.cfunc
@cython.locals(
    line=bytes,
    start=cython.Py_ssize_t,
    stop=cython.Py_ssize_t,
    out=bytes,
    raw=cython.p_uchar,
    text=cython.p_uchar,
    i=cython.Py_ssize_t,
    high=cython.int,
    low=cython.int,
)
def _unhex(line: bytes, start: int, stop: int) -> bytes:
    """The bytes the hex digits ``line[start:stop]`` (an even number of them, within
    ``line``) spell. Compiled, read through a C pointer and written into the bytes object
    made for them."""
    if not cython.compiled:
        return bytes.fromhex(line[start:stop].decode("ascii"))
    if start < 0 or stop > len(line) or stop < start:
        raise ValueError("not within the line")
    text = line  # compiled: a pointer to its bytes
    out = PyBytes_FromStringAndSize(cython.NULL, (stop - start) // 2)
    raw = cython.cast(cython.p_uchar, PyBytes_AS_STRING(out))
    for i in range(len(out)):
        high = _digit(text[start + 2 * i])
        low = _digit(text[start + 2 * i + 1])
        if high < 0 or low < 0:
            raise ValueError("not a hex digit")
        raw[i] = high << 4 | low
    return out


@cython.cfunc
@cython.inline
@cython.locals(c=cython.int)
@cython.returns(cython.int)
def _digit(c: int) -> int:
    """A hex digit's value, or -1."""
    if 48 <= c <= 57:
        return c - 48
    c |= 32  # lower case
    return c - 87 if 97 <= c <= 102 else -1


@cython.locals(entries=cython.ulonglong[::1])
def _sorted(index: array) -> array:
    """``index`` in ascending order. Compiled, libc's ``qsort`` over the array's own buffer:
    no Python int per entry, and no import of Arrow's compute kernels (which cost a TLS
    decode more than all its key lookups)."""
    if not cython.compiled:
        return array("Q", sorted(index))
    entries = index
    if len(index) > 1:
        qsort(cython.address(entries[0]), len(index), cython.sizeof(cython.ulonglong), _ascending)
    return index


@cython.locals(a=cython.ulonglong, b=cython.ulonglong)
def _ascending(left: object, right: object) -> int:
    """qsort's order of two index entries (compiled only: its C signature is in keylog.pxd)."""
    a = cython.cast(cython.p_ulonglong, left)[0]
    b = cython.cast(cython.p_ulonglong, right)[0]
    return (a > b) - (a < b)


def load(paths: list[str] | tuple[str, ...]) -> KeyLog:
    """The key logs named on the command line, read once per process and path."""
    key = tuple((str(path), _stamp(str(path))) for path in paths)
    cached = _LOADED.get(key)
    if cached is None:
        cached = KeyLog.from_files([str(path) for path in paths])
        _LOADED.clear()  # one run names one set of key logs: keep one
        _LOADED[key] = cached
    return cached


def _stamp(path: str) -> tuple[int, int] | None:
    try:
        status = os.stat(path)
    except OSError:
        return None
    return status.st_mtime_ns, status.st_size


_LOADED: dict[tuple, KeyLog] = {}
