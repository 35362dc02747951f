"""NSS key logs (the ``SSLKEYLOGFILE`` format), indexed by client random.

A line is ``LABEL CLIENT_RANDOM SECRET`` in hex: ``CLIENT_RANDOM`` gives a TLS 1.2
master secret, the ``*_TRAFFIC_SECRET*`` labels TLS 1.3's secrets. Lines of other labels
(``EXPORTER_SECRET``, the ``*_TRAFFIC_SECRET_N`` some stacks write after a key update,
``RSA``) are skipped; blank lines and ``#`` comments too; any other line is counted as
malformed and skipped, never fatal.

A key log may hold millions of lines, most for sessions the capture does not have: the
index keeps 8 bytes a line (a 24-bit prefix of the client random and where the line
starts), sorted, and a lookup reads back the few lines it points to. The secrets
themselves stay in the file (or, for secrets a capture embeds, in the bytes given) and
are held in memory only while a connection uses them.
"""

from __future__ import annotations

import os
import re
from array import array
from bisect import bisect_left

CHUNK = 1 << 20  # bytes of a key log file read at a time
MAX_LINE = 512  # longer lines are malformed (a SHA-384 secret is 96 hex digits)
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
_LINE = re.compile(rb"([A-Z0-9_]+) ([0-9a-fA-F]+) ([0-9a-fA-F]+)[ \t]*\r?")
_PREFIX_BITS = 24
_OFFSET_BITS = 40  # a key log of up to 1 TB
_OFFSET_MASK = (1 << _OFFSET_BITS) - 1


class KeyLogError(OSError):
    """A key log file that cannot be read: a one-line reason naming it."""


class _Source:
    """One key log (a file, or bytes a capture embeds) and the sorted index of its lines."""

    __slots__ = ("_data", "_dirty", "index", "path")

    def __init__(self, path: str | None, data: bytearray | None) -> None:
        self.path = path
        self._data = data
        self.index = array("Q")
        self._dirty = False

    def add(self, entries: array) -> None:
        self.index.extend(entries)
        self._dirty = True

    def sorted_index(self) -> array:
        if self._dirty:
            self.index = array("Q", sorted(self.index))
            self._dirty = False
        return self.index

    def lines_at(self, offsets: list[int]) -> list[bytes]:
        data = self._data
        if data is not None:
            ends = [data.find(b"\n", at) for at in offsets]
            return [
                data[at : end if end >= 0 else len(data)]
                for at, end in zip(offsets, ends, strict=True)
            ]
        lines = []
        assert self.path is not None
        try:
            with open(self.path, "rb") as handle:
                for at in offsets:
                    handle.seek(at)
                    lines.append(handle.readline(MAX_LINE + 2))
        except OSError as error:
            raise KeyLogError(f"{self.path}: {error.strerror or error}") from None
        return lines

    def __getstate__(self) -> tuple:
        return (self.path, self._data, self.sorted_index())

    def __setstate__(self, state: tuple) -> None:
        self.path, self._data, self.index = state
        self._dirty = False


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
                carry = b""
                base = 0  # offset in the file of ``carry``'s first byte
                while True:
                    chunk = handle.read(CHUNK)
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
        self._sources.append(source)

    def add_bytes(self, data: bytes) -> None:
        """Key log lines from elsewhere (a pcapng Decryption Secrets Block)."""
        if self._embedded is None:
            self._embedded = _Source(None, bytearray())
            self._sources.append(self._embedded)
        held = self._embedded._data
        assert held is not None
        if held and not held.endswith(b"\n"):
            held += b"\n"
        base = len(held)
        held += data
        self._scan(self._embedded, bytes(data), len(data), base)

    def _scan(self, source: _Source, data: bytes, end: int, base: int) -> None:
        """Index the lines of ``data[:end]``, which starts at ``base`` in its source."""
        entries = array("Q")
        pos = base
        known = _BYTE_LABELS
        match = _LINE.fullmatch
        prefix = _PREFIX_BITS // 4  # hex digits
        lines = data[:end].split(b"\n") if end < len(data) else data.split(b"\n")
        if lines and not lines[-1]:
            lines.pop()  # the newline that ends the last line starts no other
        malformed = 0
        for line in lines:
            at = pos
            pos += len(line) + 1
            if len(line) > MAX_LINE:
                malformed += 1
                continue
            found = match(line)
            if found is None:
                stripped = line.strip()
                if stripped and stripped[0] != 35:  # not blank, not a '#' comment
                    malformed += 1
                continue
            label, random, secret = found.groups()
            if len(secret) % 2:
                malformed += 1
            elif label in known:
                if len(random) != 64:
                    malformed += 1
                else:
                    entries.append(int(random[:prefix], 16) << _OFFSET_BITS | at)
        self.lines += len(lines)
        self.malformed += malformed
        source.add(entries)

    def secrets(self, client_random: bytes) -> dict[str, bytes]:
        """Every secret logged for the session of ``client_random``, by label (the last
        line of a label wins, as in Wireshark)."""
        found: dict[str, bytes] = {}
        prefix = int.from_bytes(client_random[: _PREFIX_BITS // 8], "big")
        wanted = client_random.hex().encode()
        for source in self._sources:
            index = source.sorted_index()
            at = bisect_left(index, prefix << _OFFSET_BITS)
            offsets = []
            while at < len(index) and index[at] >> _OFFSET_BITS == prefix:
                offsets.append(index[at] & _OFFSET_MASK)
                at += 1
            for line in source.lines_at(offsets):
                parsed = _LINE.fullmatch(line.rstrip(b"\n"))
                if parsed is None:
                    continue
                label, random, secret = parsed.groups()
                if random.lower() == wanted:
                    found[label.decode()] = bytes.fromhex(secret.decode())
        return found


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
