"""A record's decryption agrees with pyca ``cryptography`` whichever engine opens it.

Compiled, AES-GCM and ChaCha20-Poly1305 records are opened through an OpenSSL cipher
context kept per key (``protection._aead``); ``cryptography`` seals random records here
and must get back exactly what it sealed, and every damaged record (a flipped bit in the
ciphertext, the tag or the additional data, a record cut short) must fail to
authenticate, as ``cryptography`` itself would say.
"""

from __future__ import annotations

import random

import pytest
from cryptography.exceptions import InvalidTag
from cryptography.hazmat.primitives.ciphers.aead import AESGCM, ChaCha20Poly1305

from pwcap.decode.tls.protection import _aead
from pwcap.decode.tls.suites import CHACHA, GCM, SUITES

AEAD_SUITES = {
    (suite.cipher, suite.key_size): suite
    for suite in SUITES.values()
    if suite.cipher in (GCM, CHACHA)
}


@pytest.mark.parametrize("kind", sorted(AEAD_SUITES), ids=lambda kind: f"{kind[0]}-{kind[1]}")
def test_records_open_as_cryptography_sealed_them_and_damage_never_authenticates(kind):
    suite = AEAD_SUITES[kind]
    rng = random.Random(repr(kind))
    key = rng.randbytes(suite.key_size)
    sealer = ChaCha20Poly1305(key) if suite.cipher == CHACHA else AESGCM(key)
    opener = _aead(suite, key)
    for size in [0, 1, 15, 16, 17, 300, 1500, 16_385] + [rng.randrange(3000) for _ in range(40)]:
        nonce = bytearray(rng.randbytes(12))
        aad = rng.randbytes(rng.choice([5, 13]))
        plain = rng.randbytes(size)
        sealed = sealer.encrypt(bytes(nonce), plain, aad)
        assert opener.decrypt(nonce, sealed, aad) == plain
        assert opener.decrypt(nonce, sealed, bytearray(aad)) == plain
        at = rng.randrange(len(sealed))
        damaged = sealed[:at] + bytes([sealed[at] ^ 1 << rng.randrange(8)]) + sealed[at + 1 :]
        other_aad = bytes([aad[0] ^ 1]) + aad[1:]
        for record, extra in ((damaged, aad), (sealed, other_aad), (sealed[:-1], aad)):
            with pytest.raises(InvalidTag):
                opener.decrypt(nonce, record, extra)
    with pytest.raises(InvalidTag):
        opener.decrypt(bytearray(12), bytes(15), b"")  # shorter than a tag
