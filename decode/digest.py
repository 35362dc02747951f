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
    from cython.cimports.cpython.bytes import PyBytes_AS_STRING
    from cython.cimports.cpython.unicode import PyUnicode_DecodeASCII

    _SHA256 = EVP_MD_fetch(cython.NULL, b"SHA256", cython.NULL)  # noqa: F821 (digest.pxd)
    _CONTEXT = EVP_MD_CTX_new()  # noqa: F821 (digest.pxd)

_HEX = b"0123456789abcdef"  # a C string when compiled (digest.pxd)
_hashlib_sha256 = hashlib.sha256


@cython.ccall
def sha256_hex(payload: object, start: cython.Py_ssize_t = 0, stop: cython.Py_ssize_t = -1) -> str:
    """The SHA-256 of ``payload[start:stop]`` (bytes, or a memoryview of them; ``stop``
    -1: to the end) in lowercase hex, as ``hashlib.sha256(...).hexdigest()``. A batch's
    members are spans of its bytes: hashed where they are, with no view made of each."""
    size: cython.Py_ssize_t = len(payload)
    if stop == -1:
        stop = size
    if start < 0 or stop < start or stop > size:
        raise ValueError(f"bytes {start}:{stop} are not within the {size} given")
    if not cython.compiled or _SHA256 == cython.NULL or _CONTEXT == cython.NULL:
        return _hashlib_sha256(memoryview(payload)[start:stop]).hexdigest()
    if type(payload) is bytes:
        return _hex(
            cython.cast(cython.p_const_uchar, PyBytes_AS_STRING(payload)) + start, stop - start
        )
    data: cython.const[cython.uchar][::1] = payload
    return _hex(cython.address(data[start]) if stop > start else _HEX, stop - start)


@cython.cfunc
def _hex(start: cython.p_const_uchar, size: cython.Py_ssize_t) -> str:
    """OpenSSL's SHA-256 of the ``size`` bytes at ``start``, in hex (compiled only)."""
    digest = cython.declare(cython.uchar[32])
    text = cython.declare(cython.char[64])
    length: cython.uint = 0
    i: cython.Py_ssize_t
    done: cython.bint = (
        EVP_DigestInit_ex2(_CONTEXT, _SHA256, cython.NULL) == 1  # noqa: F821
        and EVP_DigestUpdate(_CONTEXT, start, size) == 1  # noqa: F821
        and EVP_DigestFinal_ex(_CONTEXT, digest, cython.address(length)) == 1  # noqa: F821
    )
    if not done or length != 32:
        raise RuntimeError("OpenSSL's SHA-256 failed")
    for i in range(32):
        text[2 * i] = _HEX[digest[i] >> 4]
        text[2 * i + 1] = _HEX[digest[i] & 15]
    return PyUnicode_DecodeASCII(text, 64, cython.NULL)
