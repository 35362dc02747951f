# cython: annotation_typing=True
"""The hex SHA-256 of a message's payload (the ``payload_sha256`` column: one per message).

Compiled, it is OpenSSL's SHA-256 through its digest interface (EVP), the library hashlib
runs on: one context, made at import, is re-initialised for each payload. hashlib makes a
Python object and two OpenSSL contexts per digest (one to hash, a copy to finish), which
cost more than hashing a small message. Interpreted, or where OpenSSL offers no SHA-256
context (a build that refuses it), hashlib computes it.
"""

from __future__ import annotations

import hashlib

import cython

if cython.compiled:
    from cython.cimports.cpython.unicode import PyUnicode_DecodeASCII

    _SHA256 = EVP_MD_fetch(cython.NULL, b"SHA256", cython.NULL)  # noqa: F821 (digest.pxd)
    _CONTEXT = EVP_MD_CTX_new()  # noqa: F821 (digest.pxd)

_HEX = b"0123456789abcdef"  # a C string when compiled (digest.pxd)
_hashlib_sha256 = hashlib.sha256


@cython.ccall
def sha256_hex(payload: object) -> str:
    """The SHA-256 of ``payload``'s bytes (bytes, or a memoryview of them) in lowercase
    hex, as ``hashlib.sha256(payload).hexdigest()``."""
    if not cython.compiled or _SHA256 == cython.NULL or _CONTEXT == cython.NULL:
        return _hashlib_sha256(payload).hexdigest()
    data: cython.const[cython.uchar][::1] = payload
    digest = cython.declare(cython.uchar[32])
    text = cython.declare(cython.char[64])
    size: cython.uint = 0
    i: cython.Py_ssize_t
    start: cython.p_const_uchar = cython.address(data[0]) if data.shape[0] else _HEX
    done: cython.bint = (
        EVP_DigestInit_ex2(_CONTEXT, _SHA256, cython.NULL) == 1  # noqa: F821
        and EVP_DigestUpdate(_CONTEXT, start, data.shape[0]) == 1  # noqa: F821
        and EVP_DigestFinal_ex(_CONTEXT, digest, cython.address(size)) == 1  # noqa: F821
    )
    if not done or size != 32:
        raise RuntimeError("OpenSSL's SHA-256 failed")
    for i in range(32):
        text[2 * i] = _HEX[digest[i] >> 4]
        text[2 * i + 1] = _HEX[digest[i] & 15]
    return PyUnicode_DecodeASCII(text, 64, cython.NULL)
