"""Record keys from the secrets a key log holds.

TLS 1.3 (RFC 8446 7.1-7.3): a traffic secret gives its direction's key and IV through
HKDF-Expand-Label, and a KeyUpdate replaces the secret by the next one of its chain.
TLS 1.2 (RFC 5246 6.3): the master secret and both randoms give the key block through
the TLS PRF (P_hash over HMAC with the suite's hash), cut into MAC keys, keys and IVs.
HKDF and HMAC come from pyca ``cryptography`` and the standard library.
"""

from __future__ import annotations

import hashlib
import hmac
from dataclasses import dataclass

from cryptography.hazmat.primitives import hashes
from cryptography.hazmat.primitives.kdf.hkdf import HKDFExpand

from .suites import Suite

_HASHES = {"sha256": hashes.SHA256, "sha384": hashes.SHA384}


def hkdf_expand_label(secret: bytes, label: bytes, context: bytes, length: int, hash: str) -> bytes:
    """HKDF-Expand-Label (RFC 8446 7.1): HKDF-Expand of the ``tls13 ``-prefixed label."""
    full = b"tls13 " + label
    info = length.to_bytes(2, "big") + bytes([len(full)]) + full + bytes([len(context)]) + context
    return HKDFExpand(_HASHES[hash](), length, info).derive(secret)


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
