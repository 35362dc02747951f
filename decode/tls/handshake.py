"""Handshake messages: split out of the handshake records of one direction, and the few
fields a decoder needs read out of them (RFC 8446 4, RFC 5246 7.4).

Everything is read with bounds checks: a message that does not parse raises
:class:`HandshakeError` and becomes an anomaly, never a traceback. Compiled (each TLS
connection parses its hellos: thousands in a capture), :class:`Reader` is a C class whose
reads are C calls on its C fields.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass, field

import cython

CLIENT_HELLO, SERVER_HELLO, NEW_SESSION_TICKET = 1, 2, 4
END_OF_EARLY_DATA, ENCRYPTED_EXTENSIONS, CERTIFICATE = 5, 8, 11
CERTIFICATE_REQUEST, FINISHED, KEY_UPDATE = 13, 20, 24
MAX_MESSAGE = 256 * 1024  # a handshake message held while its records arrive (chains of
# certificates are the largest: tens of KB)

# ServerHello.random of a HelloRetryRequest (RFC 8446 4.1.3)
HELLO_RETRY = bytes.fromhex("CF21AD74E59A6111BE1D8C021E65B891C2A211167ABB8C5E079E09E2C8A8339C")
_SNI, _ALPN, _ETM, _EMS, _TICKET = 0, 16, 22, 23, 35
_PSK, _EARLY_DATA, _VERSIONS = 41, 42, 43
VERSION_NAMES = {0x0300: "SSL 3.0", 0x0301: "TLS 1.0", 0x0302: "TLS 1.1", 0x0303: "TLS 1.2"}
VERSION_NAMES[0x0304] = "TLS 1.3"


class HandshakeError(ValueError):
    """A handshake message that does not parse."""


@cython.cclass
class Reader:
    """Bounds-checked reads over one message's bytes."""

    data = cython.declare(bytes)
    pos = cython.declare(cython.Py_ssize_t)
    end = cython.declare(cython.Py_ssize_t)

    def __init__(self, data: bytes, pos: int = 0, end: int | None = None) -> None:
        self.data = data
        self.pos = pos
        self.end = len(data) if end is None else end

    @cython.ccall
    @cython.locals(size=cython.Py_ssize_t)
    def take(self, size: int) -> bytes:
        if size < 0 or self.pos + size > self.end:
            raise HandshakeError("a field runs past its message")
        value = self.data[self.pos : self.pos + size]
        self.pos += size
        return value

    @cython.ccall
    @cython.locals(size=cython.int, value=cython.longlong, i=cython.Py_ssize_t)
    @cython.returns(cython.longlong)
    def uint(self, size: int) -> int:
        """A big-endian unsigned integer of ``size`` bytes (at most 4)."""
        if self.pos + size > self.end:
            raise HandshakeError("a field runs past its message")
        value = 0
        for i in range(self.pos, self.pos + size):
            value = value << 8 | self.data[i]
        self.pos += size
        return value

    @cython.ccall
    @cython.locals(length_size=cython.int)
    def vector(self, length_size: int) -> bytes:
        return self.take(self.uint(length_size))

    @cython.ccall
    @cython.locals(length_size=cython.int, size=cython.Py_ssize_t)
    def sub(self, length_size: int) -> Reader:
        """A reader over the next length-prefixed vector, which this one skips."""
        size = self.uint(length_size)
        if self.pos + size > self.end:
            raise HandshakeError("a vector runs past its message")
        inner = Reader(self.data, self.pos, self.pos + size)
        self.pos += size
        return inner

    @cython.ccall
    @cython.returns(cython.Py_ssize_t)
    def left(self) -> int:
        return self.end - self.pos


@cython.locals(reader=Reader)
def _extensions(reader: Reader) -> Reader | None:
    """A reader over the extensions block (None: there is none, which is allowed); each
    extension in it is its type (``uint(2)``) and its data (``sub(2)``)."""
    return reader.sub(2) if reader.left() else None


@cython.locals(data=bytes, i=cython.Py_ssize_t)
def _pairs(data: bytes) -> list[int]:
    """Two-byte big-endian values (cipher suites, versions); a last odd byte is ignored."""
    return [data[i] << 8 | data[i + 1] for i in range(0, len(data) - 1, 2)]


@dataclass
class ClientHello:
    random: bytes
    session_id: bytes
    suites: list[int]
    sni: str | None = None
    alpn: list[str] = field(default_factory=list)
    versions: list[int] = field(default_factory=list)  # supported_versions, if sent
    ticket: bytes | None = None  # a TLS 1.2 session ticket offered for resumption
    psk: bool = False  # a TLS 1.3 pre-shared key offered (resumption)
    early_data: bool = False


@cython.locals(
    reader=Reader, block=Reader, data=Reader, names=Reader, protocols=Reader, kind=cython.int
)
def client_hello(body: bytes) -> ClientHello:
    reader = Reader(body)
    reader.take(2)  # legacy_version
    hello = ClientHello(reader.take(32), reader.vector(1), [])
    hello.suites = _pairs(reader.vector(2))
    reader.vector(1)  # compression methods
    block = _extensions(reader)
    while block is not None and block.left():
        kind = block.uint(2)
        data = block.sub(2)
        if kind == _SNI:
            names = data.sub(2)
            while names.left():
                name_type, name = names.uint(1), names.vector(2)
                if name_type == 0:
                    hello.sni = name.decode("ascii", "replace")
        elif kind == _ALPN:
            protocols = data.sub(2)
            while protocols.left():
                hello.alpn.append(protocols.vector(1).decode("ascii", "replace"))
        elif kind == _VERSIONS:
            hello.versions = _pairs(data.vector(1))
        elif kind == _TICKET:
            hello.ticket = data.take(data.left()) or None
        elif kind == _PSK:
            hello.psk = True
        elif kind == _EARLY_DATA:
            hello.early_data = True
    return hello


@dataclass
class ServerHello:
    random: bytes
    session_id: bytes
    suite: int
    version: int  # the negotiated version: supported_versions, else legacy_version
    encrypt_then_mac: bool = False
    psk: bool = False  # TLS 1.3: the server accepted a pre-shared key (resumption)

    @property
    def retry(self) -> bool:
        """A HelloRetryRequest: the client sends another ClientHello."""
        return self.random == HELLO_RETRY


@cython.locals(reader=Reader, block=Reader, data=Reader, kind=cython.int)
def server_hello(body: bytes) -> ServerHello:
    reader = Reader(body)
    legacy = reader.uint(2)
    hello = ServerHello(reader.take(32), reader.vector(1), reader.uint(2), legacy)
    reader.take(1)  # compression method
    block = _extensions(reader)
    while block is not None and block.left():
        kind = block.uint(2)
        data = block.sub(2)
        if kind == _VERSIONS:
            hello.version = data.uint(2)
        elif kind == _ETM:
            hello.encrypt_then_mac = True
        elif kind == _PSK:
            hello.psk = True
    return hello


@cython.locals(reader=Reader, entries=Reader)
def certificate_count(body: bytes, tls13: bool) -> int:
    """How many certificates a Certificate message carries (0: the client sent none)."""
    reader = Reader(body)
    if tls13:
        reader.vector(1)  # certificate_request_context
    entries = reader.sub(3)
    count = 0
    while entries.left():
        entries.vector(3)
        if tls13:
            entries.vector(2)  # the entry's extensions
        count += 1
    return count


@cython.locals(reader=Reader)
def session_ticket(body: bytes, tls13: bool) -> bytes:
    """The ticket of a NewSessionTicket message."""
    reader = Reader(body)
    reader.take(4)  # lifetime
    if tls13:
        reader.take(4)  # age_add
        reader.vector(1)  # nonce
    return reader.vector(2)


def key_update_requested(body: bytes) -> bool:
    """Whether a KeyUpdate asks the peer to update its keys too."""
    if len(body) != 1 or body[0] > 1:
        raise HandshakeError("a KeyUpdate is one byte, 0 or 1")
    return body[0] == 1


class Messages:
    """One direction's handshake messages, joined from the records that carry them (a
    message may span records, a record may hold several): at most :data:`MAX_MESSAGE`
    bytes held."""

    __slots__ = ("_buffer",)

    def __init__(self) -> None:
        self._buffer = b""

    @cython.locals(buffer=bytes, pos=cython.Py_ssize_t, size=cython.Py_ssize_t, kind=cython.int)
    def feed(self, data: bytes) -> Iterator[tuple[int, bytes]]:
        """The whole messages ``data`` completes, as (type, body)."""
        buffer = self._buffer + data if self._buffer else data
        pos = 0
        while len(buffer) - pos >= 4:
            size = buffer[pos + 1] << 16 | buffer[pos + 2] << 8 | buffer[pos + 3]
            if size > MAX_MESSAGE:
                self._buffer = b""
                raise HandshakeError(f"a handshake message of {size} bytes (at most {MAX_MESSAGE})")
            if len(buffer) - pos - 4 < size:
                break
            kind = buffer[pos]
            body = buffer[pos + 4 : pos + 4 + size]
            pos += 4 + size
            self._buffer = buffer[pos:]  # kept as is if the caller stops here
            yield kind, body
        self._buffer = buffer[pos:]

    def pending(self) -> bool:
        """Part of a message is held: it continues in the next handshake record."""
        return bool(self._buffer)
