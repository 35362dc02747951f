"""Record keys from the secrets a key log holds.

TLS 1.3 (RFC 8446 7.1-7.3): a traffic secret gives its direction's key and IV through
HKDF-Expand-Label, and a KeyUpdate replaces the secret by the next one of its chain.
TLS 1.2 (RFC 5246 6.3): the master secret and both randoms give the key block through
the TLS PRF (P_hash over HMAC with the suite's hash), cut into MAC keys, keys and IVs.
HKDF and HMAC come from pyca ``cryptography`` and the standard library; compiled,
HKDF-Expand-Label is OpenSSL's own TLS 1.3 KDF (the library ``cryptography`` runs on),
through one context per hash kept for the process: ``cryptography``'s HKDFExpand, an
object made per derivation, cost four times as much, and a TLS 1.3 connection derives
eight keys and IVs; ``cryptography`` is then not even imported.
"""

from __future__ import annotations

import hashlib
import hmac
from dataclasses import dataclass

import cython

from .suites import Suite

if cython.compiled:
    from cython.cimports.cpython.bytes import PyBytes_AS_STRING, PyBytes_FromStringAndSize

PREFIX = b"tls13 "


def hkdf_expand_label(secret: bytes, label: bytes, context: bytes, length: int, hash: str) -> bytes:
    """HKDF-Expand-Label (RFC 8446 7.1): HKDF-Expand of the ``tls13 ``-prefixed label."""
    if cython.compiled:
        expand = _EXPANDERS.get(hash)
        if expand is None:
            expand = _EXPANDERS[hash] = _ExpandLabel(hash.encode())
        derived = expand.derive(secret, label, context, length)
        if derived is not None:
            return derived
    from cryptography.hazmat.primitives import hashes
    from cryptography.hazmat.primitives.kdf.hkdf import HKDFExpand

    full = PREFIX + label
    info = length.to_bytes(2, "big") + bytes([len(full)]) + full + bytes([len(context)]) + context
    algorithm = {"sha256": hashes.SHA256, "sha384": hashes.SHA384}[hash]
    return HKDFExpand(algorithm(), length, info).derive(secret)


@cython.cclass
class _ExpandLabel:
    """OpenSSL's TLS 1.3 KDF in HKDF-Expand mode for one hash, its context made once
    (compiled only; its fields and the OpenSSL calls are in schedule.pxd)."""

    def __cinit__(self, digest: bytes) -> None:
        kdf = EVP_KDF_fetch(cython.NULL, OSSL_KDF_NAME_TLS1_3_KDF, cython.NULL)  # noqa: F821
        self._ctx = EVP_KDF_CTX_new(kdf) if kdf != cython.NULL else cython.NULL  # noqa: F821
        EVP_KDF_free(kdf)  # noqa: F821 (the context holds its own reference)
        self._mode = EVP_KDF_HKDF_MODE_EXPAND_ONLY  # noqa: F821
        self._digest = digest
        # The mode and the hash once (the hash is looked up by name when set); each
        # derivation gives the secret, the prefix, the label and the context.
        self._params[0] = OSSL_PARAM_construct_int(OSSL_KDF_PARAM_MODE, cython.address(self._mode))  # noqa: F821
        self._params[1] = _text(OSSL_KDF_PARAM_DIGEST, self._digest)  # noqa: F821
        self._params[2] = OSSL_PARAM_construct_end()  # noqa: F821
        if self._ctx != cython.NULL and EVP_KDF_CTX_set_params(self._ctx, self._params) != 1:  # noqa: F821
            EVP_KDF_CTX_free(self._ctx)  # noqa: F821
            self._ctx = cython.NULL

    def __dealloc__(self) -> None:
        EVP_KDF_CTX_free(self._ctx)  # noqa: F821

    def derive(self, secret: bytes, label: bytes, context: bytes, length: int) -> bytes | None:
        """The ``length`` bytes HKDF-Expand-Label gives, or None where OpenSSL cannot
        (no TLS 1.3 KDF in this OpenSSL, an unknown hash): the caller derives them then."""
        if self._ctx == cython.NULL or not 0 < length <= 255 * 64:
            return None
        out = PyBytes_FromStringAndSize(cython.NULL, length)
        self._params[0] = _octets(OSSL_KDF_PARAM_KEY, secret)  # noqa: F821
        self._params[1] = _octets(OSSL_KDF_PARAM_PREFIX, PREFIX)  # noqa: F821
        self._params[2] = _octets(OSSL_KDF_PARAM_LABEL, label)  # noqa: F821
        self._params[3] = _octets(OSSL_KDF_PARAM_DATA, context)  # noqa: F821
        self._params[4] = OSSL_PARAM_construct_end()  # noqa: F821
        raw = cython.cast(cython.p_uchar, PyBytes_AS_STRING(out))
        if EVP_KDF_derive(self._ctx, raw, length, self._params) != 1:  # noqa: F821
            return None
        return out


def _octets(name: bytes, value: bytes) -> object:
    """An OpenSSL octet-string parameter over ``value``'s own bytes (no copy)."""
    return OSSL_PARAM_construct_octet_string(name, PyBytes_AS_STRING(value), len(value))  # noqa: F821


def _text(name: bytes, value: bytes) -> object:
    """An OpenSSL UTF-8 string parameter over ``value``'s own bytes."""
    return OSSL_PARAM_construct_utf8_string(name, PyBytes_AS_STRING(value), 0)  # noqa: F821


_EXPANDERS: dict[str, _ExpandLabel] = {}  # one OpenSSL KDF context per hash (compiled)


@dataclass(frozen=True, slots=True)
class Keys:
    """One direction's record keys: ``mac_key`` for CBC suites, ``iv`` as the suite uses it."""

    key: bytes
    iv: bytes
    mac_key: bytes = b""


def traffic_keys(suite: Suite, secret: bytes) -> Keys:
    """TLS 1.3: the key and IV of one direction's traffic secret (RFC 8446 7.3)."""
    key = hkdf_expand_label(secret, b"key", b"", suite.key_size, suite.hash)
    return Keys(key, hkdf_expand_label(secret, b"iv", b"", 12, suite.hash))


def next_secret(suite: Suite, secret: bytes) -> bytes:
    """TLS 1.3: the traffic secret after a KeyUpdate (RFC 8446 7.2)."""
    size = hashlib.new(suite.hash).digest_size
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
