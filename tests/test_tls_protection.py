"""A record's decryption agrees with pyca ``cryptography`` whichever engine opens it.

Compiled, AES-GCM and ChaCha20-Poly1305 records are opened through an OpenSSL cipher
context kept per key (``protection._aead``); ``cryptography`` seals random records here
and must get back exactly what it sealed, and every damaged record (a flipped bit in the
ciphertext, the tag or the additional data, a record cut short) must fail to
authenticate, as ``cryptography`` itself would say.
"""

from __future__ import annotations

import itertools
import random

import pytest
from cryptography.exceptions import InvalidTag
from cryptography.hazmat.primitives.ciphers.aead import AESCCM, AESGCM, ChaCha20Poly1305

from pwcap.decode.tls.protection import Tls13, _aead
from pwcap.decode.tls.schedule import Keys
from pwcap.decode.tls.suites import CCM8, CHACHA, GCM, SUITES

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


TLS13_SUITES = [suite for suite in SUITES.values() if suite.tls13]


@pytest.mark.parametrize("suite", TLS13_SUITES, ids=lambda suite: suite.name)
def test_a_tls13_record_opens_in_place_as_it_opens_alone(suite):
    """The record walk opens a record inside the bytes it holds (``open_at``): the same
    content type and content as ``open`` of the record's own header and body, padding
    stripped, and None for a damaged record, one of only padding, or one cut short."""
    rng = random.Random(suite.name)
    keys = Keys(rng.randbytes(suite.key_size), rng.randbytes(12))
    protection = Tls13(suite, keys)
    sealer = _sealer(suite, keys.key)
    iv = int.from_bytes(keys.iv, "big")
    cases = [(23, b"x", 0), (23, b"", 0), (22, b"hello", 7), (21, b"\x01\x00", 300)]
    cases += [(23, rng.randbytes(rng.randrange(1, 17_000)), rng.randrange(3)) for _ in range(20)]
    cases += [(0, b"", 40)]  # only padding: no content type
    for seq, (kind, content, padding) in enumerate(cases):
        inner = content + bytes([kind]) + bytes(padding)
        size = len(inner) + (8 if suite.cipher == CCM8 else 16)
        header = bytes([23, 3, 3]) + size.to_bytes(2, "big")
        nonce = (iv ^ seq).to_bytes(12, "big")
        record = header + sealer.encrypt(nonce, inner, header)
        before, after = rng.randbytes(rng.randrange(40)), rng.randbytes(rng.randrange(40))
        held = before + record + after
        expected = None if kind == 0 else (kind, content)
        assert protection.open(seq, record[:5], record[5:]) == expected
        assert protection.open_at(seq, held, len(before), size) == expected
        assert protection.open_at(seq + 1, held, len(before), size) is None  # wrong number
        at = len(before) + rng.randrange(len(record))
        damaged = held[:at] + bytes([held[at] ^ 1 << rng.randrange(8)]) + held[at + 1 :]
        assert protection.open_at(seq, damaged, len(before), size) is None
        assert (
            protection.open_at(seq, held[: len(before) + len(record) - 1], len(before), size)
            is None
        )


def _sealer(suite, key):
    """``cryptography``'s AEAD of ``suite`` for ``key``: what seals the test records."""
    cipher = {GCM: AESGCM, CHACHA: ChaCha20Poly1305}.get(suite.cipher)
    if cipher is None:
        return AESCCM(key, tag_length=8 if suite.cipher == CCM8 else 16)
    return cipher(key)


def _sealed(suite, keys, seq, content):
    """A TLS 1.3 application data record of ``content`` under ``keys``, number ``seq``."""
    inner = content + bytes([23])
    size = len(inner) + (8 if suite.cipher == CCM8 else 16)
    header = bytes([23, 3, 3]) + size.to_bytes(2, "big")
    nonce = (int.from_bytes(keys.iv, "big") ^ seq).to_bytes(12, "big")
    return header + _sealer(suite, keys.key).encrypt(nonce, inner, header)


@pytest.mark.parametrize("suite", TLS13_SUITES, ids=lambda suite: suite.name)
def test_a_tls13_direction_rekeyed_opens_as_a_new_one_and_no_longer_with_its_old_keys(suite):
    """A direction's next keys (its application secret, a KeyUpdate's) are taken by
    ``rekeyed``, in place when the suite is the same: its records open as with a
    protection made for them, numbered from 0, and the old keys' records no longer do;
    a change of suite gives a new protection."""
    rng = random.Random(suite.name + " rekeyed")
    chain = [Keys(rng.randbytes(suite.key_size), rng.randbytes(12)) for _ in range(4)]
    protection = Tls13(suite, chain[0])
    for old, new in itertools.pairwise(chain):
        contents = [rng.randbytes(rng.randrange(1, 2000)) for _ in range(3)]
        for seq, content in enumerate(contents):
            record = _sealed(suite, old, seq, content)
            assert protection.open_at(seq, record, 0, len(record) - 5) == (23, content)
        protection = protection.rekeyed(suite, new)
        for seq, content in enumerate(contents):
            stale = _sealed(suite, old, seq, content)
            assert protection.open_at(seq, stale, 0, len(stale) - 5) is None
            record = _sealed(suite, new, seq, content)
            assert protection.open_at(seq, record, 0, len(record) - 5) == (23, content)
            assert protection.open(seq, record[:5], record[5:]) == (23, content)
            assert Tls13(suite, new).open(seq, record[:5], record[5:]) == (23, content)
    other = next(each for each in TLS13_SUITES if each.key_size != suite.key_size)
    keys = Keys(rng.randbytes(other.key_size), rng.randbytes(12))
    changed = protection.rekeyed(other, keys)
    assert changed is not protection
    record = _sealed(other, keys, 0, b"other suite")
    assert changed.open_at(0, record, 0, len(record) - 5) == (23, b"other suite")
