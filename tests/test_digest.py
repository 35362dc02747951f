"""A payload's digest is SHA-256 as published (FIPS 180-2's examples), whatever holds the
bytes: bytes, or a memoryview into a larger buffer (a batch member's payload)."""

from __future__ import annotations

import pytest

from pwcap.decode.digest import set_sha256, sha256_hex
from pwcap.tables.columns import ColumnBuffer
from pwcap.tables.schema import arrow_schema, position

VECTORS = [  # FIPS 180-2, appendix B, and the empty message
    (b"", "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855"),
    (b"abc", "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad"),
    (
        b"abcdbcdecdefdefgefghfghighijhijkijkljklmklmnlmnomnopnopq",
        "248d6a61d20638b8e5c026930c3e6039a33ce45964ff2167f6ecedd419db06c1",
    ),
    (b"a" * 1_000_000, "cdc76e5c9914fb9281a1c7e284d73e67f1809a48a497200e046d39ccc7112cd0"),
]


@pytest.mark.parametrize(("message", "digest"), VECTORS)
def test_digest_is_the_published_sha256(message, digest):
    assert sha256_hex(message) == digest


@pytest.mark.parametrize(("message", "digest"), VECTORS)
def test_digest_of_a_view_into_a_larger_buffer(message, digest):
    around = b"\xff" * 7 + message + b"\x00" * 9
    assert sha256_hex(memoryview(around)[7 : 7 + len(message)]) == digest


def test_digest_takes_only_bytes():
    with pytest.raises(TypeError):
        sha256_hex("abc")


@pytest.mark.parametrize(("message", "digest"), VECTORS)
def test_digest_of_a_span_of_bytes(message, digest):
    around = b"\xff" * 7 + message + b"\x00" * 9
    assert sha256_hex(around, 7, 7 + len(message)) == digest


@pytest.mark.parametrize(("start", "stop"), [(-1, 3), (4, 3), (0, 17)])
def test_a_span_outside_the_bytes_is_refused(start, stop):
    with pytest.raises(ValueError):
        sha256_hex(b"\x00" * 16, start, stop)


@pytest.mark.parametrize(("message", "digest"), VECTORS)
def test_the_digest_set_in_a_row_is_the_published_sha256(message, digest):
    rows = ColumnBuffer(arrow_schema("messages"), limit=4)
    column = position("messages", "payload_sha256")
    rows.set_text(column, "replaced")
    set_sha256(rows, column, b"\xff" * 7 + message + b"\x00" * 9, 7, 7 + len(message))
    assert rows.take_row()["payload_sha256"] == digest


def test_a_digest_of_a_span_outside_the_bytes_sets_nothing():
    rows = ColumnBuffer(arrow_schema("messages"), limit=4)
    column = position("messages", "payload_sha256")
    with pytest.raises(ValueError):
        set_sha256(rows, column, b"\x00" * 16, 4, 17)
    assert rows.take_row()["payload_sha256"] is None
