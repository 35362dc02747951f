"""Record keys from the secrets a key log holds.

TLS 1.3 (RFC 8446 7.1-7.3): a traffic secret gives its direction's key and IV through
HKDF-Expand-Label, and a KeyUpdate replaces the secret by the next one of its chain.
TLS 1.2 (RFC 5246 6.3): the master secret and both randoms give the key block through
the TLS PRF (P_hash over HMAC with the suite's hash), cut into MAC keys, keys and IVs.

Every output TLS 1.3 derives (a key, an IV, the next secret, a Finished key) is at most
one hash long, and HKDF-Expand of at most one hash is a single HMAC (RFC 5869 2.3:
T(1) = HMAC(secret, info | 0x01)). Compiled, that HMAC is OpenSSL's (the library
``cryptography`` and hashlib run on) through one MAC context per hash kept for the
process, keyed once per secret for both the key and the IV: a context or a provider
fetch per derivation (OpenSSL's TLS 1.3 KDF, ``cryptography``'s HKDFExpand, hashlib's
one-shot HMAC) cost more than the hashing. Interpreted, hashlib's HMAC; longer outputs,
which TLS never asks for, are ``cryptography``'s HKDFExpand.
"""

from __future__ import annotations

import hmac

import cython

from .suites import DIGEST_SIZES, Suite

if cython.compiled:
    from cython.cimports.cpython.bytes import PyBytes_AS_STRING, PyBytes_FromStringAndSize
    from cython.cimports.libc.string import memcpy
    from cython.cimports.pwcap.decode.openssl import (
        OSSL_MAC_PARAM_DIGEST,
        EVP_MAC_CTX_free,
        EVP_MAC_CTX_new,
        EVP_MAC_CTX_set_params,
        EVP_MAC_fetch,
        EVP_MAC_final,
        EVP_MAC_free,
        EVP_MAC_init,
        EVP_MAC_update,
        OSSL_PARAM_construct_end,
        OSSL_PARAM_construct_utf8_string,
    )

PREFIX = b"tls13 "


def hkdf_label(label: bytes, context: bytes, length: int) -> bytes:
    """The HkdfLabel structure (RFC 8446 7.1): HKDF-Expand's info for ``label``."""
    full = PREFIX + label
    return length.to_bytes(2, "big") + bytes([len(full)]) + full + bytes([len(context)]) + context


def hkdf_expand_label(secret: bytes, label: bytes, context: bytes, length: int, hash: str) -> bytes:
    """HKDF-Expand-Label (RFC 8446 7.1): HKDF-Expand of the ``tls13 ``-prefixed label."""
    info = hkdf_label(label, context, length)
    if length <= DIGEST_SIZES[hash]:
        return _hmac(hash).first(secret, info + b"\x01", length)
    from cryptography.hazmat.primitives import hashes
    from cryptography.hazmat.primitives.kdf.hkdf import HKDFExpand

    algorithm = {"sha256": hashes.SHA256, "sha384": hashes.SHA384}[hash]
    return HKDFExpand(algorithm(), length, info).derive(secret)


class _Digests:
    """One hash's HMAC over hashlib (interpreted): what :class:`_Hmac` does compiled."""

    def __init__(self, hash: str) -> None:
        self._hash = hash

    def first(self, key: bytes, data: bytes, length: int) -> bytes:
        """The first ``length`` bytes of HMAC(``key``, ``data``)."""
        return hmac.digest(key, data, self._hash)[:length]

    def pair(self, key: bytes, data: bytes, length: int, more: bytes, more_length: int) -> tuple:
        """:meth:`first` of ``data`` and of ``more``, under one ``key``."""
        return self.first(key, data, length), self.first(key, more, more_length)


@cython.cclass
class _Hmac:
    """OpenSSL's HMAC for one hash, its context made once (compiled only; its fields and
    the OpenSSL calls are in schedule.pxd)."""

    def __cinit__(self, digest: bytes, size: int) -> None:
        mac = EVP_MAC_fetch(cython.NULL, b"HMAC", cython.NULL)
        self._ctx = EVP_MAC_CTX_new(mac) if mac != cython.NULL else cython.NULL
        EVP_MAC_free(mac)  # the context holds its own reference
        self._digest = digest
        self._size = 0
        self._params[0] = OSSL_PARAM_construct_utf8_string(
            OSSL_MAC_PARAM_DIGEST,
            PyBytes_AS_STRING(self._digest),
            0,
        )
        self._params[1] = OSSL_PARAM_construct_end()
        if self._ctx != cython.NULL and EVP_MAC_CTX_set_params(self._ctx, self._params) == 1:
            self._size = size  # the hash's (OpenSSL says it only once keyed)

    def __dealloc__(self) -> None:
        EVP_MAC_CTX_free(self._ctx)

    def ready(self) -> bool:
        return self._size > 0

    def first(self, key: bytes, data: bytes, length: int) -> bytes:
        """The first ``length`` bytes (at most the hash's) of HMAC(``key``, ``data``)."""
        out = PyBytes_FromStringAndSize(cython.NULL, length)
        if not self._mac(key, data, out, length):
            raise ValueError("OpenSSL's HMAC failed")
        return out

    def pair(self, key: bytes, data: bytes, length: int, more: bytes, more_length: int) -> tuple:
        """:meth:`first` of ``data`` and of ``more``: the key's pads are hashed once."""
        out = PyBytes_FromStringAndSize(cython.NULL, length)
        second = PyBytes_FromStringAndSize(cython.NULL, more_length)
        if not (self._mac(key, data, out, length) and self._mac(None, more, second, more_length)):
            raise ValueError("OpenSSL's HMAC failed")
        return out, second

    @cython.locals(size=cython.size_t, raw=cython.p_uchar)
    def _mac(self, key: object, data: bytes, out: bytes, length: int) -> bool:
        """HMAC(``key``, ``data``) cut to ``length`` bytes into ``out`` (``key`` None:
        the previous call's key again)."""
        digest = cython.declare(cython.uchar[64])
        size = 0
        if self._size == 0 or not 0 < length <= self._size or self._size > 64:
            return False
        if key is None:
            keyed = EVP_MAC_init(self._ctx, cython.NULL, 0, cython.NULL)
        else:
            raw = cython.cast(cython.p_uchar, PyBytes_AS_STRING(key))
            keyed = EVP_MAC_init(self._ctx, raw, len(key), cython.NULL)
        raw = cython.cast(cython.p_uchar, PyBytes_AS_STRING(data))
        if (
            keyed != 1
            or EVP_MAC_update(self._ctx, raw, len(data)) != 1
            or EVP_MAC_final(self._ctx, digest, cython.address(size), 64) != 1
            or size < cython.cast(cython.size_t, length)  # length > 0, checked above
        ):
            return False
        memcpy(PyBytes_AS_STRING(out), digest, length)
        return True


_HMACS: dict[str, object] = {}  # one HMAC per hash: an OpenSSL context compiled


def _hmac(hash: str) -> object:
    """The HMAC of ``hash`` (a hashlib name): OpenSSL's context compiled, hashlib's else."""
    found = _HMACS.get(hash)
    if found is None:
        found = _Digests(hash)
        if cython.compiled:
            native = _Hmac(hash.upper().encode(), DIGEST_SIZES[hash])
            if native.ready():
                found = native
        _HMACS[hash] = found
    return found


@cython.cclass
class Keys:
    """One direction's record keys: ``mac_key`` for CBC suites, ``iv`` as the suite uses it
    (a C class compiled, its fields in schedule.pxd: a connection makes several)."""

    def __init__(self, key: bytes, iv: bytes, mac_key: bytes = b"") -> None:
        self.key = key
        self.iv = iv
        self.mac_key = mac_key


_KEY_LABELS: dict[int, bytes] = {}  # HkdfLabel | 0x01 of "key" by key size
_IV_LABEL = hkdf_label(b"iv", b"", 12) + b"\x01"


def traffic_keys(suite: Suite, secret: bytes) -> Keys:
    """TLS 1.3: the key and IV of one direction's traffic secret (RFC 8446 7.3): one HMAC
    each (both at most one hash long), under the one secret."""
    size = suite.key_size
    label = _KEY_LABELS.get(size)
    if label is None:
        label = _KEY_LABELS[size] = hkdf_label(b"key", b"", size) + b"\x01"
    key, iv = _hmac(suite.hash).pair(secret, label, size, _IV_LABEL, 12)
    return Keys(key, iv)


def next_secret(suite: Suite, secret: bytes) -> bytes:
    """TLS 1.3: the traffic secret after a KeyUpdate (RFC 8446 7.2)."""
    size = DIGEST_SIZES[suite.hash]
    return hkdf_expand_label(secret, b"traffic upd", b"", size, suite.hash)


def prf(secret: bytes, label: bytes, seed: bytes, length: int, hash: str) -> bytes:
    """The TLS 1.2 PRF (RFC 5246 5): P_hash(secret, label + seed) cut to ``length``."""
    seed = label + seed
    out = bytearray()
    a = seed
    while len(out) < length:
        a = hmac.digest(secret, a, hash)
        out += hmac.digest(secret, a + seed, hash)
    return bytes(out[:length])


def key_block(
    suite: Suite, master: bytes, client_random: bytes, server_random: bytes
) -> tuple[Keys, Keys]:
    """TLS 1.2: the client's and the server's write keys (RFC 5246 6.3)."""
    mac, key, iv = suite.mac_size, suite.key_size, suite.iv_size
    block = prf(
        master, b"key expansion", server_random + client_random, 2 * (mac + key + iv), suite.hash
    )
    parts = []
    at = 0
    for size in (mac, mac, key, key, iv, iv):
        parts.append(block[at : at + size])
        at += size
    client_mac, server_mac, client_key, server_key, client_iv, server_iv = parts
    return Keys(client_key, client_iv, client_mac), Keys(server_key, server_iv, server_mac)
