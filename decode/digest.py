# cython: annotation_typing=True
"""The hex SHA-256 of a message's payload (the ``payload_sha256`` column: one per message).

Compiled, it is OpenSSL's SHA-256 through its digest interface (EVP), the library hashlib
runs on: one context, made at import, is re-initialised for each payload. hashlib makes a
Python object and two OpenSSL contexts per digest (one to hash, a copy to finish), which
cost more than hashing a small message; :func:`set_sha256` writes the hex straight into
its row's column, with no str made. Interpreted, or where OpenSSL offers no SHA-256
context (a build that refuses it), hashlib computes it.
"""

from __future__ import annotations

import hashlib

import cython

if cython.compiled:
    from cython.cimports.cpython.bytes import PyBytes_AS_STRING
    from cython.cimports.cpython.unicode import PyUnicode_DecodeASCII
    from cython.cimports.pwcap.decode.openssl import (
        EVP_DigestFinal_ex,
        EVP_DigestInit_ex2,
        EVP_DigestUpdate,
        EVP_MD_CTX_new,
        EVP_MD_fetch,
    )
    from cython.cimports.pwcap.tables.columns import ColumnBuffer

    _SHA256 = EVP_MD_fetch(cython.NULL, b"SHA256", cython.NULL)
    _CONTEXT = EVP_MD_CTX_new()
else:
    from ..tables.columns import ColumnBuffer

_HEX = b"0123456789abcdef"  # a C string when compiled (digest.pxd)
_hashlib_sha256 = hashlib.sha256
HEX_SIZE = cython.declare(cython.Py_ssize_t, 64)


@cython.ccall
def sha256_hex(payload: object, start: cython.Py_ssize_t = 0, stop: cython.Py_ssize_t = -1) -> str:
    """The SHA-256 of ``payload[start:stop]`` (bytes, or a memoryview of them; ``stop``
    -1: to the end) in lowercase hex, as ``hashlib.sha256(...).hexdigest()``. A batch's
    members are spans of its bytes: hashed where they are, with no view made of each."""
    text = cython.declare(cython.char[64])
    stop = _checked(payload, start, stop)
    if not _native():
        return _hashlib_sha256(memoryview(payload)[start:stop]).hexdigest()
    _hex(_at(payload, start, stop), stop - start, text)
    return PyUnicode_DecodeASCII(text, HEX_SIZE, cython.NULL)


@cython.ccall
@cython.exceptval(-1, check=False)
def set_sha256(
    rows: ColumnBuffer,
    column: cython.Py_ssize_t,
    payload: object,
    start: cython.Py_ssize_t = 0,
    stop: cython.Py_ssize_t = -1,
) -> cython.int:
    """Set string column ``column`` of the row ``rows`` is building to :func:`sha256_hex`
    of ``payload[start:stop]``. Compiled, the hex goes from the stack into the column's
    bytes: no str is made per message."""
    text = cython.declare(cython.char[64])
    stop = _checked(payload, start, stop)
    if not _native():
        return rows.set_text(column, sha256_hex(payload, start, stop))
    _hex(_at(payload, start, stop), stop - start, text)
    return rows.set_utf8(column, text, HEX_SIZE, None)


@cython.cfunc
@cython.exceptval(-1, check=False)
def _checked(
    payload: object, start: cython.Py_ssize_t, stop: cython.Py_ssize_t
) -> cython.Py_ssize_t:
    """``stop`` (-1: the end of ``payload``), once ``start:stop`` is checked to be within it."""
    size: cython.Py_ssize_t = len(payload)
    if stop == -1:
        stop = size
    if start < 0 or stop < start or stop > size:
        raise ValueError(f"bytes {start}:{stop} are not within the {size} given")
    return stop


@cython.cfunc
def _native() -> cython.bint:
    """Whether OpenSSL's SHA-256 is called directly (compiled, with a context)."""
    return cython.compiled and _SHA256 != cython.NULL and _CONTEXT != cython.NULL


@cython.cfunc
def _at(payload: object, start: cython.Py_ssize_t, stop: cython.Py_ssize_t) -> cython.p_const_uchar:
    """Where the checked span ``start:stop`` of ``payload`` is (compiled only)."""
    if type(payload) is bytes:
        return cython.cast(cython.p_const_uchar, PyBytes_AS_STRING(payload)) + start
    data: cython.const[cython.uchar][::1] = payload
    return cython.address(data[start]) if stop > start else _HEX


@cython.cfunc
@cython.exceptval(-1, check=False)
def _hex(start: cython.p_const_uchar, size: cython.Py_ssize_t, text: cython.p_char) -> cython.int:
    """OpenSSL's SHA-256 of the ``size`` bytes at ``start``, its 64 hex digits written at
    ``text`` (compiled only)."""
    digest = cython.declare(cython.uchar[32])
    length: cython.uint = 0
    i: cython.Py_ssize_t
    done: cython.bint = (
        EVP_DigestInit_ex2(_CONTEXT, _SHA256, cython.NULL) == 1
        and EVP_DigestUpdate(_CONTEXT, start, size) == 1
        and EVP_DigestFinal_ex(_CONTEXT, digest, cython.address(length)) == 1
    )
    if not done or length != 32:
        raise RuntimeError("OpenSSL's SHA-256 failed")
    for i in range(32):
        text[2 * i] = _HEX[digest[i] >> 4]
        text[2 * i + 1] = _HEX[digest[i] & 15]
    return 0
