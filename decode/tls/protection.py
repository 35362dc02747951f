"""One direction's record protection: a record's ciphertext in, its plaintext out, with one
call of pyca ``cryptography`` per record (AES-GCM, AES-CCM, ChaCha20-Poly1305, AES-CBC).

:meth:`Protection.open` takes the record's sequence number from its caller (the record
layer counts records, and tries others after a loss) and returns ``(content type,
plaintext)``, or None when the record does not authenticate: a wrong key, damage, or the
wrong sequence number. Nothing is decided on unauthenticated bytes.
"""

from __future__ import annotations

import hmac
from typing import Protocol

from cryptography.exceptions import InvalidTag
from cryptography.hazmat.primitives.ciphers import Cipher, algorithms, modes
from cryptography.hazmat.primitives.ciphers.aead import AESCCM, AESGCM, ChaCha20Poly1305

from .schedule import Keys
from .suites import CBC, CCM8, CHACHA, GCM, Suite

TAG = 16  # the AEAD tag, but CCM_8's
APPLICATION_DATA = 23


class Protection(Protocol):
    """What the record layer calls for every protected record of one direction."""

    def open(self, seq: int, header: bytes, body: bytes) -> tuple[int, bytes] | None: ...

    def explicit_seq(self, body: bytes) -> int | None:
        """The sequence number a record states itself (TLS 1.2 AES-GCM and AES-CCM peers
        send it as their explicit nonce), as a first guess after a loss; None if none."""


def _aead(suite: Suite, key: bytes) -> AESGCM | AESCCM | ChaCha20Poly1305:
    if suite.cipher == GCM:
        return AESGCM(key)
    if suite.cipher == CHACHA:
        return ChaCha20Poly1305(key)
    return AESCCM(key, tag_length=8 if suite.cipher == CCM8 else 16)


def protection(suite: Suite, keys: Keys, encrypt_then_mac: bool = False) -> Protection:
    """The record protection of ``suite`` with one direction's ``keys``."""
    if suite.tls13:
        return Tls13(suite, keys)
    if suite.cipher == CBC:
        return Tls12Cbc(suite, keys, encrypt_then_mac)
    if suite.cipher == CHACHA:
        return Tls12Chacha(suite, keys)
    return Tls12Aead(suite, keys)


def _tag_size(suite: Suite) -> int:
    return 8 if suite.cipher == CCM8 else TAG


class Tls13:
    """TLS 1.3 (RFC 8446 5.2-5.4): nonce = IV xor sequence number, the record header as
    additional data, the true content type last in the plaintext before zero padding."""

    __slots__ = ("_aead", "_iv", "_tag")

    def __init__(self, suite: Suite, keys: Keys) -> None:
        self._aead = _aead(suite, keys.key)
        self._iv = int.from_bytes(keys.iv, "big")
        self._tag = _tag_size(suite)

    def open(self, seq: int, header: bytes, body: bytes) -> tuple[int, bytes] | None:
        if len(body) <= self._tag:
            return None
        try:
            plain = self._aead.decrypt((self._iv ^ seq).to_bytes(12, "big"), body, header)
        except InvalidTag:
            return None
        end = len(plain) - 1
        if end >= 0 and plain[end]:  # no padding: the common case, no scan
            return plain[end], plain[:end]
        plain = plain.rstrip(b"\0")
        if not plain:
            return None  # no content type at all: RFC 8446 5.4 makes it an error
        return plain[-1], plain[:-1]

    def explicit_seq(self, body: bytes) -> int | None:
        return None


class Tls12Aead:
    """TLS 1.2 AES-GCM (RFC 5288) and AES-CCM (RFC 6655): a 4-byte salt from the key
    block and an 8-byte explicit nonce in front of each record."""

    __slots__ = ("_aead", "_salt", "_tag")

    def __init__(self, suite: Suite, keys: Keys) -> None:
        self._aead = _aead(suite, keys.key)
        self._salt = keys.iv
        self._tag = _tag_size(suite)

    def open(self, seq: int, header: bytes, body: bytes) -> tuple[int, bytes] | None:
        size = len(body) - 8 - self._tag
        if size < 0:
            return None
        aad = seq.to_bytes(8, "big") + header[:3] + size.to_bytes(2, "big")
        try:
            plain = self._aead.decrypt(self._salt + body[:8], body[8:], aad)
        except InvalidTag:
            return None
        return header[0], plain

    def explicit_seq(self, body: bytes) -> int | None:
        return int.from_bytes(body[:8], "big") if len(body) >= 8 else None


class Tls12Chacha:
    """TLS 1.2 ChaCha20-Poly1305 (RFC 7905): nonce = IV xor sequence number, nothing
    explicit in the record."""

    __slots__ = ("_aead", "_iv")

    def __init__(self, suite: Suite, keys: Keys) -> None:
        self._aead = _aead(suite, keys.key)
        self._iv = int.from_bytes(keys.iv, "big")

    def open(self, seq: int, header: bytes, body: bytes) -> tuple[int, bytes] | None:
        size = len(body) - TAG
        if size < 0:
            return None
        aad = seq.to_bytes(8, "big") + header[:3] + size.to_bytes(2, "big")
        try:
            plain = self._aead.decrypt((self._iv ^ seq).to_bytes(12, "big"), body, aad)
        except InvalidTag:
            return None
        return header[0], plain

    def explicit_seq(self, body: bytes) -> int | None:
        return None


class Tls12Cbc:
    """TLS 1.2 AES-CBC with HMAC, the IV in front of each record (RFC 5246 6.2.3.2):
    MAC-then-encrypt, or encrypt-then-MAC when both peers agreed to it (RFC 7366)."""

    __slots__ = ("_etm", "_hash", "_key", "_mac", "_mac_key")

    def __init__(self, suite: Suite, keys: Keys, encrypt_then_mac: bool) -> None:
        self._key = algorithms.AES(keys.key)
        self._mac_key = keys.mac_key
        self._hash = suite.mac
        self._mac = suite.mac_size
        self._etm = encrypt_then_mac

    def open(self, seq: int, header: bytes, body: bytes) -> tuple[int, bytes] | None:
        mac_size = self._mac
        prefix = seq.to_bytes(8, "big") + header[:3]
        if self._etm:
            sealed = body[:-mac_size]
            if len(sealed) < 32 or len(sealed) % 16:
                return None
            expected = hmac.digest(
                self._mac_key, prefix + len(sealed).to_bytes(2, "big") + sealed, self._hash
            )
            if not hmac.compare_digest(expected, body[-mac_size:]):
                return None
            plain = self._decrypt(sealed)
            return None if plain is None else (header[0], plain)
        if len(body) < 16 + max(mac_size + 1, 16) or len(body) % 16:
            return None
        plain = self._decrypt(body)
        if plain is None or len(plain) < mac_size:
            return None
        data, mac = plain[:-mac_size], plain[-mac_size:]
        expected = hmac.digest(
            self._mac_key, prefix + len(data).to_bytes(2, "big") + data, self._hash
        )
        return (header[0], data) if hmac.compare_digest(expected, mac) else None

    def _decrypt(self, sealed: bytes) -> bytes | None:
        """The plaintext of IV + CBC blocks, its padding checked and removed."""
        decryptor = Cipher(self._key, modes.CBC(sealed[:16])).decryptor()
        padded = decryptor.update(sealed[16:]) + decryptor.finalize()
        pad = padded[-1]
        if pad + 1 > len(padded) or padded[-pad - 1 :] != bytes([pad]) * (pad + 1):
            return None
        return padded[: -pad - 1]

    def explicit_seq(self, body: bytes) -> int | None:
        return None


__all__ = ["APPLICATION_DATA", "Protection", "protection"]
