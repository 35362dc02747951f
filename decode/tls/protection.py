"""One direction's record protection: a record's ciphertext in, its plaintext out, with one
call of pyca ``cryptography`` per record (AES-GCM, AES-CCM, ChaCha20-Poly1305, AES-CBC).

:meth:`Protection.open` takes the record's sequence number from its caller (the record
layer counts records, and tries others after a loss) and returns ``(content type,
plaintext)``, or None when the record does not authenticate: a wrong key, damage, or the
wrong sequence number. Nothing is decided on unauthenticated bytes.

Compiled, the classes are C classes (their fields in protection.pxd): the record walk
calls ``open`` as C, each cipher object is made once per key, and the nonce and
additional data are written into buffers kept for the direction's life, not built as
Python integers and byte strings per record. The AES-GCM and ChaCha20-Poly1305 decryption
itself is then OpenSSL's (the library ``cryptography`` runs on) through one cipher
context per key, its key schedule done once: ``cryptography``'s AEAD objects make and key
a new context at every call, which costs more than decrypting a small record. An AES-GCM
nonce is given to that context as TLS's two fields (OpenSSL's ``tlsivfixed`` and
``tlsivinv`` parameters): the 4 bytes fixed for the key, once, then each record's other 8
with its tag in one call, where setting the whole nonce makes OpenSSL 3.0 ask the
context its nonce's length at every record.
Interpreted, or where OpenSSL refuses the cipher, ``cryptography`` decrypts; it is
imported where it is used, so that a compiled decode of AES-GCM or ChaCha20-Poly1305
never imports it (its bindings and cipher modules are slow to load, at the first TLS
connection).
"""

from __future__ import annotations

import hmac

import cython

from .hello import MAX_RECORD
from .schedule import Keys
from .suites import CBC, CCM8, CHACHA, GCM, Suite

if cython.compiled:
    from cython.cimports.cpython.bytearray import PyByteArray_AS_STRING
    from cython.cimports.cpython.bytes import PyBytes_AS_STRING, PyBytes_FromStringAndSize
    from cython.cimports.libc.string import memcmp, memcpy
    from cython.cimports.pwcap.decode.openssl import (
        EVP_CTRL_AEAD_SET_TAG,
        OSSL_CIPHER_PARAM_AEAD_TAG,
        OSSL_CIPHER_PARAM_AEAD_TLS1_IV_FIXED,
        OSSL_CIPHER_PARAM_AEAD_TLS1_SET_IV_INV,
        EVP_CIPHER_CTX_ctrl,
        EVP_CIPHER_CTX_free,
        EVP_CIPHER_CTX_new,
        EVP_CIPHER_CTX_set_params,
        EVP_CIPHER_fetch,
        EVP_CIPHER_free,
        EVP_CIPHER_get_key_length,
        EVP_DecryptFinal_ex,
        EVP_DecryptInit_ex2,
        EVP_DecryptUpdate,
        OSSL_PARAM_construct_end,
        OSSL_PARAM_construct_octet_string,
    )

TAG = cython.declare(cython.int, 16)  # the AEAD tag, but CCM_8's
# Where Tls13.open_at decrypts a record (compiled): the largest record's plaintext fits.
_SCRATCH_SIZE = cython.declare(cython.Py_ssize_t, MAX_RECORD)
_SCRATCH = bytearray(MAX_RECORD)
APPLICATION_DATA = 23


class Protection:
    """What the record layer calls for every protected record of one direction."""

    def open(self, seq: int, header: bytes, body: bytes) -> tuple[int, bytes] | None:
        raise NotImplementedError

    def open_at(self, seq: int, data: bytes, pos: int, length: int) -> tuple[int, bytes] | None:
        """:meth:`open` of the record whose header is ``data[pos:pos + 5]`` and whose
        ``length`` bytes follow it: what the record walk calls, with the bytes it holds."""
        return self.open(seq, data[pos : pos + 5], data[pos + 5 : pos + 5 + length])

    def explicit_seq(self, body: bytes) -> int | None:
        """The sequence number a record states itself (TLS 1.2 AES-GCM and AES-CCM peers
        send it as their explicit nonce), as a first guess after a loss; None if none."""
        return None


@cython.ccall
def _aead(suite: Suite, key: bytes) -> object:
    """The decrypting object of ``suite`` for ``key``: ``decrypt(nonce, data, aad)`` as
    ``cryptography``'s AEAD classes have it (OpenSSL's context when compiled)."""
    if cython.compiled and suite.cipher in (GCM, CHACHA):
        kind = _CIPHERS.get((suite.cipher, len(key)))
        if kind is None:
            gcm = suite.cipher == GCM
            name = b"AES-%d-GCM" % (len(key) * 8) if gcm else b"ChaCha20-Poly1305"
            kind = _CIPHERS[suite.cipher, len(key)] = _Cipher(name, gcm)
        opener = _EvpAead(kind, key)
        if opener.ready():
            return opener
    from cryptography.hazmat.primitives.ciphers.aead import AESCCM, AESGCM, ChaCha20Poly1305

    if suite.cipher == GCM:
        return AESGCM(key)
    if suite.cipher == CHACHA:
        return ChaCha20Poly1305(key)
    return AESCCM(key, tag_length=8 if suite.cipher == CCM8 else 16)


def _decrypted(aead: object, nonce: bytearray, data: bytes, aad: object) -> bytes | None:
    """``aead``'s plaintext of ``data`` (its tag last), or None if it does not
    authenticate."""
    if cython.compiled and type(aead) is _EvpAead:
        return cython.cast(_EvpAead, aead).opened(nonce, data, aad)
    from cryptography.exceptions import InvalidTag

    try:
        return aead.decrypt(nonce, data, aad)
    except InvalidTag:
        return None


@cython.cclass
class _Cipher:
    """One OpenSSL cipher, fetched once for the process: a fetch looks its name up in the
    provider's tables, and a TLS 1.3 connection keys four contexts (compiled only)."""

    def __cinit__(self, name: bytes, gcm: bool) -> None:
        self._cipher = EVP_CIPHER_fetch(cython.NULL, name, cython.NULL)
        self._gcm = gcm

    def __dealloc__(self) -> None:
        if self._cipher != cython.NULL:
            EVP_CIPHER_free(self._cipher)


_CIPHERS: dict[tuple[str, int], _Cipher] = {}  # by cipher and key size (compiled)


@cython.cclass
class _EvpAead:
    """One key's AES-GCM or ChaCha20-Poly1305 decryption through an OpenSSL cipher context
    keyed once (compiled only; its fields and the OpenSSL calls are in protection.pxd)."""

    @cython.locals(kind=_Cipher)
    def __cinit__(self, kind: _Cipher, key: bytes) -> None:
        self._ctx = EVP_CIPHER_CTX_new()
        self._kind = kind
        self._fields = kind._gcm  # AES-GCM: the nonce in TLS's fixed and invocation fields
        self._fixed_set = False
        # A record's invocation field and tag, copied into the object's own buffers that
        # these parameters name: built once, not at every record.
        self._record[0] = OSSL_PARAM_construct_octet_string(
            OSSL_CIPHER_PARAM_AEAD_TLS1_SET_IV_INV,
            cython.address(self._invocation[0]),
            8,
        )
        self._record[1] = OSSL_PARAM_construct_octet_string(
            OSSL_CIPHER_PARAM_AEAD_TAG,
            cython.address(self._tag[0]),
            TAG,
        )
        self._record[2] = OSSL_PARAM_construct_end()
        self._ok = (
            self._ctx != cython.NULL
            and kind._cipher != cython.NULL
            and EVP_CIPHER_get_key_length(kind._cipher) == len(key)
            and EVP_DecryptInit_ex2(
                self._ctx,
                kind._cipher,
                cython.cast(cython.p_uchar, PyBytes_AS_STRING(key)),
                cython.NULL,
                cython.NULL,
            )
            == 1
        )

    def __dealloc__(self) -> None:
        if self._ctx != cython.NULL:
            EVP_CIPHER_CTX_free(self._ctx)

    def ready(self) -> bool:
        return self._ok

    def rekey(self, key: bytes) -> bool:
        """Whether the context took ``key`` in place of its key (its cipher kept): a
        direction's next keys without a context allocated, and the old one cleansed and
        freed, at each change. The fixed part of the nonce is given again with the next
        record."""
        self._fixed_set = False
        self._ok = (
            self._ok
            and EVP_CIPHER_get_key_length(self._kind._cipher) == len(key)
            and EVP_DecryptInit_ex2(
                self._ctx,
                cython.NULL,
                cython.cast(cython.p_uchar, PyBytes_AS_STRING(key)),
                cython.NULL,
                cython.NULL,
            )
            == 1
        )
        return self._ok

    def decrypt(self, nonce: bytearray, data: bytes, aad: object) -> bytes:
        """``data``'s plaintext (its last 16 bytes the tag), or InvalidTag: as
        ``cryptography``'s AEAD classes have it."""
        plain = self.opened(nonce, data, aad)
        if plain is None:
            from cryptography.exceptions import InvalidTag

            raise InvalidTag
        return plain

    @cython.locals(size=cython.Py_ssize_t, out=bytes, start=cython.p_uchar)
    def opened(self, nonce: bytearray, data: bytes, aad: object) -> bytes | None:
        """``data``'s plaintext (its last 16 bytes the tag), or None if it does not
        authenticate with ``nonce`` and ``aad`` (bytes or a bytearray)."""
        size = len(data) - TAG
        if size < 0 or size > 1 << 24 or len(nonce) != 12:
            return None
        out = PyBytes_FromStringAndSize(cython.NULL, size)
        if type(aad) is bytes:
            start = cython.cast(cython.p_uchar, PyBytes_AS_STRING(aad))
        else:
            start = cython.cast(cython.p_uchar, PyByteArray_AS_STRING(aad))
        if not self._run(
            cython.cast(cython.p_uchar, PyByteArray_AS_STRING(nonce)),
            start,
            len(aad),
            cython.cast(cython.p_uchar, PyBytes_AS_STRING(data)),
            size,
            cython.cast(cython.p_uchar, PyBytes_AS_STRING(out)),
        ):
            return None
        return out

    @cython.locals(done=cython.int, more=cython.int, ignored=cython.int, tag=cython.p_void)
    def _run(
        self, nonce: object, aad: object, aad_size: int, sealed: object, size: int, out: object
    ) -> bool:
        """Whether the ``size`` bytes at ``sealed``, their tag right after them, decrypt
        into ``out`` and authenticate with ``aad`` and the 12-byte ``nonce`` (C pointers
        all: the caller checked the sizes; the C signature is in protection.pxd)."""
        done = more = ignored = 0
        tag = cython.cast(cython.p_void, sealed + size)
        if not self._nonce_and_tag(nonce, tag):
            return False
        return (
            EVP_DecryptUpdate(self._ctx, cython.NULL, cython.address(ignored), aad, aad_size) == 1
            and EVP_DecryptUpdate(self._ctx, out, cython.address(done), sealed, size) == 1
            and EVP_DecryptFinal_ex(self._ctx, out + done, cython.address(more)) == 1
        )

    def _nonce_and_tag(self, nonce: object, tag: object) -> bool:
        """The record's 12-byte ``nonce`` and 16-byte ``tag`` given to the context (C
        pointers). AES-GCM: the first 4 bytes as the fixed field when they change (once a
        key), the other 8 as the invocation field with the tag in one call; if OpenSSL
        refuses the fields, the whole nonce from then on, as any AEAD takes it."""
        if self._fields:
            if not self._fixed_set or memcmp(nonce, self._fixed, 4) != 0:
                memcpy(self._fixed, nonce, 4)
                self._params[0] = OSSL_PARAM_construct_octet_string(
                    OSSL_CIPHER_PARAM_AEAD_TLS1_IV_FIXED,
                    cython.address(self._fixed[0]),
                    4,
                )
                self._params[1] = OSSL_PARAM_construct_end()
                self._fixed_set = EVP_CIPHER_CTX_set_params(self._ctx, self._params) == 1
                self._fields = self._fixed_set
            if self._fields:
                memcpy(self._invocation, nonce + 4, 8)
                memcpy(self._tag, tag, TAG)
                if EVP_CIPHER_CTX_set_params(self._ctx, self._record) == 1:
                    return True
                self._fields = False
        return (
            EVP_DecryptInit_ex2(self._ctx, cython.NULL, cython.NULL, nonce, cython.NULL) == 1
            and EVP_CIPHER_CTX_ctrl(self._ctx, EVP_CTRL_AEAD_SET_TAG, TAG, tag) == 1
        )


def protection(suite: Suite, keys: Keys, encrypt_then_mac: bool = False) -> Protection:
    """The record protection of ``suite`` with one direction's ``keys``."""
    if suite.tls13:
        return Tls13(suite, keys)
    if suite.cipher == CBC:
        return Tls12Cbc(suite, keys, encrypt_then_mac)
    if suite.cipher == CHACHA:
        return Tls12Chacha(suite, keys)
    return Tls12Aead(suite, keys)


@cython.cfunc
@cython.returns(cython.Py_ssize_t)
def _tag_size(suite: Suite) -> int:
    return 8 if suite.cipher == CCM8 else TAG


@cython.cfunc
@cython.locals(data=bytes, at=cython.Py_ssize_t, value=cython.ulonglong, i=cython.Py_ssize_t)
@cython.returns(cython.ulonglong)
def _u64(data: bytes, at: int) -> int:
    """The 8 big-endian bytes ``data[at:at + 8]`` as a number (an IV's last 8 bytes)."""
    if at < 0 or at + 8 > len(data):
        raise IndexError("8 bytes beyond the data")
    value = 0
    for i in range(at, at + 8):
        value = value << 8 | data[i]
    return value


@cython.cfunc
@cython.locals(
    target=bytearray, at=cython.Py_ssize_t, value=cython.ulonglong, i=cython.int, raw=cython.p_uchar
)
@cython.returns(cython.void)
def _put_u64(target: bytearray, at: int, value: int) -> None:
    """``value`` as 8 big-endian bytes at ``target[at:at + 8]`` (written through a C
    pointer compiled, the span checked once)."""
    if at < 0 or at + 8 > len(target):
        raise IndexError("8 bytes beyond the buffer")
    raw = target  # compiled: a pointer to its bytes
    for i in range(7, -1, -1):
        raw[at + i] = value & 0xFF
        value >>= 8


@cython.cfunc
@cython.locals(aad=bytearray, seq=cython.ulonglong, header=bytes, size=cython.Py_ssize_t)
@cython.returns(cython.void)
def _tls12_aad(aad: bytearray, seq: int, header: bytes, size: int) -> None:
    """TLS 1.2's additional data (RFC 5246 6.2.3.3): the sequence number, the record's
    type and version, the plaintext's length, into the 13 bytes of ``aad``."""
    _put_u64(aad, 0, seq)
    aad[8] = header[0]
    aad[9] = header[1]
    aad[10] = header[2]
    aad[11] = size >> 8
    aad[12] = size & 0xFF


class Tls13(Protection):
    """TLS 1.3 (RFC 8446 5.2-5.4): nonce = IV xor sequence number, the record header as
    additional data, the true content type last in the plaintext before zero padding."""

    def __init__(self, suite: Suite, keys: Keys) -> None:
        self._suite = suite
        self._aead = _aead(suite, keys.key)
        self._evp = self._aead if isinstance(self._aead, _EvpAead) else None
        self._nonce = bytearray(keys.iv)  # its last 8 bytes: the IV's, xor the sequence
        self._iv = _u64(keys.iv, 4)
        self._tag = _tag_size(suite)

    def rekeyed(self, suite: Suite, keys: Keys) -> Tls13:
        """The direction's protection under its next keys (its application secret after
        the handshake's, a KeyUpdate's): this object, its cipher context keyed anew in
        place, when the suite is the same; else a new one. Each TLS 1.3 connection
        changes keys at least once a direction."""
        if suite is not self._suite:
            return Tls13(suite, keys)
        if self._evp is None or not self._evp.rekey(keys.key):
            self._aead = _aead(suite, keys.key)
            self._evp = self._aead if isinstance(self._aead, _EvpAead) else None
        self._nonce[:] = keys.iv
        self._iv = _u64(keys.iv, 4)
        return self

    @cython.locals(plain=bytes, end=cython.Py_ssize_t)
    def open(self, seq: int, header: bytes, body: bytes) -> tuple[int, bytes] | None:
        if len(body) <= self._tag:
            return None
        _put_u64(self._nonce, 4, self._iv ^ seq)
        plain = _decrypted(self._aead, self._nonce, body, header)
        if plain is None:
            return None
        end = len(plain) - 1
        if end >= 0 and plain[end]:  # no padding: the common case, no scan
            return plain[end], plain[:end]
        plain = plain.rstrip(b"\0")
        if not plain:
            return None  # no content type at all: RFC 8446 5.4 makes it an error
        return plain[-1], plain[:-1]

    @cython.locals(
        data=bytes,
        pos=cython.Py_ssize_t,
        length=cython.Py_ssize_t,
        size=cython.Py_ssize_t,
        end=cython.Py_ssize_t,
        record=cython.p_uchar,
        scratch=cython.p_uchar,
    )
    def open_at(self, seq: int, data: bytes, pos: int, length: int) -> tuple[int, bytes] | None:
        """Compiled with OpenSSL's context: the record decrypted from ``data`` itself into
        a buffer shared by all records (they are opened one at a time), and only its
        content, without the type and padding, copied out: no bytes object for the
        header, the ciphertext, or the padded plaintext."""
        size = length - TAG
        if (
            not cython.compiled
            or self._evp is None
            or size <= 0
            or size > _SCRATCH_SIZE
            or pos < 0
            or pos + 5 + length > len(data)
        ):
            return self.open(seq, data[pos : pos + 5], data[pos + 5 : pos + 5 + length])
        _put_u64(self._nonce, 4, self._iv ^ seq)
        record = cython.cast(cython.p_uchar, PyBytes_AS_STRING(data)) + pos
        scratch = cython.cast(cython.p_uchar, PyByteArray_AS_STRING(_SCRATCH))
        if not self._evp._run(
            cython.cast(cython.p_uchar, PyByteArray_AS_STRING(self._nonce)),
            record,
            5,
            record + 5,
            size,
            scratch,
        ):
            return None
        end = size - 1
        while end >= 0 and scratch[end] == 0:  # padding (RFC 8446 5.4)
            end -= 1
        if end < 0:
            return None  # no content type at all: RFC 8446 5.4 makes it an error
        return scratch[end], PyBytes_FromStringAndSize(cython.cast(cython.p_char, scratch), end)


class Tls12Aead(Protection):
    """TLS 1.2 AES-GCM (RFC 5288) and AES-CCM (RFC 6655): a 4-byte salt from the key
    block and an 8-byte explicit nonce in front of each record."""

    def __init__(self, suite: Suite, keys: Keys) -> None:
        self._aead = _aead(suite, keys.key)
        self._nonce = bytearray(keys.iv + bytes(8))  # the salt, then the record's nonce
        self._aad = bytearray(13)
        self._tag = _tag_size(suite)

    @cython.locals(size=cython.Py_ssize_t, i=cython.int)
    def open(self, seq: int, header: bytes, body: bytes) -> tuple[int, bytes] | None:
        size = len(body) - 8 - self._tag
        if size < 0:
            return None
        _tls12_aad(self._aad, seq, header, size)
        for i in range(8):
            self._nonce[4 + i] = body[i]
        plain = _decrypted(self._aead, self._nonce, body[8:], self._aad)
        return None if plain is None else (header[0], plain)

    def explicit_seq(self, body: bytes) -> int | None:
        return int.from_bytes(body[:8], "big") if len(body) >= 8 else None


class Tls12Chacha(Protection):
    """TLS 1.2 ChaCha20-Poly1305 (RFC 7905): nonce = IV xor sequence number, nothing
    explicit in the record."""

    def __init__(self, suite: Suite, keys: Keys) -> None:
        self._aead = _aead(suite, keys.key)
        self._nonce = bytearray(keys.iv)
        self._iv = _u64(keys.iv, 4)
        self._aad = bytearray(13)

    @cython.locals(size=cython.Py_ssize_t)
    def open(self, seq: int, header: bytes, body: bytes) -> tuple[int, bytes] | None:
        size = len(body) - TAG
        if size < 0:
            return None
        _tls12_aad(self._aad, seq, header, size)
        _put_u64(self._nonce, 4, self._iv ^ seq)
        plain = _decrypted(self._aead, self._nonce, body, self._aad)
        return None if plain is None else (header[0], plain)


class Tls12Cbc(Protection):
    """TLS 1.2 AES-CBC with HMAC, the IV in front of each record (RFC 5246 6.2.3.2):
    MAC-then-encrypt, or encrypt-then-MAC when both peers agreed to it (RFC 7366)."""

    def __init__(self, suite: Suite, keys: Keys, encrypt_then_mac: bool) -> None:
        from cryptography.hazmat.primitives.ciphers import algorithms

        self._key = algorithms.AES(keys.key)
        self._mac_key = keys.mac_key
        self._hash = suite.mac
        self._mac = suite.mac_size
        self._etm = encrypt_then_mac
        self._aad = bytearray(13)  # what the MAC covers before the data: as AEAD's aad

    def open(self, seq: int, header: bytes, body: bytes) -> tuple[int, bytes] | None:
        mac_size = self._mac
        if self._etm:
            sealed = body[:-mac_size]
            if len(sealed) < 32 or len(sealed) % 16:
                return None
            _tls12_aad(self._aad, seq, header, len(sealed))
            expected = hmac.digest(self._mac_key, self._aad + sealed, self._hash)
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
        _tls12_aad(self._aad, seq, header, len(data))
        expected = hmac.digest(self._mac_key, self._aad + data, self._hash)
        return (header[0], data) if hmac.compare_digest(expected, mac) else None

    def _decrypt(self, sealed: bytes) -> bytes | None:
        """The plaintext of IV + CBC blocks, its padding checked and removed."""
        from cryptography.hazmat.primitives.ciphers import Cipher, modes

        decryptor = Cipher(self._key, modes.CBC(sealed[:16])).decryptor()
        padded = decryptor.update(sealed[16:]) + decryptor.finalize()
        pad = padded[-1]
        if pad + 1 > len(padded) or padded[-pad - 1 :] != bytes([pad]) * (pad + 1):
            return None
        return padded[: -pad - 1]


__all__ = ["APPLICATION_DATA", "Protection", "protection"]
