"""Two OpenSSL calls Python's ``ssl`` module does not offer, made on the very SSL_CTX and
SSL objects it created (the same libssl, through ctypes): the TLS 1.3 cipher suites a
server accepts (``SSL_CTX_set_ciphersuites``) and a KeyUpdate (``SSL_key_update``).

The object pointers are read where CPython's ``_ssl`` module keeps them (right after the
object header), and each is checked against what ``ssl`` itself reports before use.
"""

from __future__ import annotations

import ctypes
import ssl
import sys

SSL_KEY_UPDATE_REQUESTED = 1  # the peer updates its own sending keys too
_HEADER = 2 * ctypes.sizeof(ctypes.c_void_p)  # PyObject_HEAD: reference count, type


class OpenSSLError(RuntimeError):
    pass


def _libssl() -> ctypes.CDLL:
    """The libssl that ``_ssl`` is linked with (already loaded: dlopen finds it)."""
    import _ssl

    with open("/proc/self/maps") as maps:
        paths = {line.split()[-1] for line in maps if "libssl" in line and "/" in line}
    for path in sorted(paths):
        library = ctypes.CDLL(path)
        if hasattr(library, "SSL_key_update"):
            return library
    raise OpenSSLError(f"no libssl with SSL_key_update loaded for {_ssl.__file__}")


_LIB = _libssl() if sys.platform == "linux" else None


def _pointer(owner: object, offset: int) -> int:
    return ctypes.c_void_p.from_address(id(owner) + offset).value or 0


def _context_pointer(context: ssl.SSLContext) -> int:
    """SSL_CTX* of ``context``: checked by its options, which both sides must agree on."""
    assert _LIB is not None
    pointer = _pointer(context, _HEADER)
    _LIB.SSL_CTX_get_options.restype = ctypes.c_uint64
    _LIB.SSL_CTX_get_options.argtypes = [ctypes.c_void_p]
    if not pointer or _LIB.SSL_CTX_get_options(pointer) != context.options:
        raise OpenSSLError("cannot find the SSL_CTX of an ssl.SSLContext")
    return pointer


def _ssl_pointer(connection: ssl.SSLObject) -> int:
    """SSL* of a connection: checked by its protocol version and cipher."""
    assert _LIB is not None
    native = connection._sslobj  # type: ignore[attr-defined]  # _ssl._SSLSocket
    pointer = _pointer(native, _HEADER + ctypes.sizeof(ctypes.c_void_p))  # after `Socket`
    _LIB.SSL_get_version.restype = ctypes.c_char_p
    _LIB.SSL_get_version.argtypes = [ctypes.c_void_p]
    if not pointer or _LIB.SSL_get_version(pointer).decode() != connection.version():
        raise OpenSSLError("cannot find the SSL of an ssl.SSLObject")
    return pointer


def set_ciphersuites(context: ssl.SSLContext, suites: str) -> None:
    """The TLS 1.3 suites ``context`` accepts, e.g. ``TLS_CHACHA20_POLY1305_SHA256``."""
    assert _LIB is not None
    _LIB.SSL_CTX_set_ciphersuites.argtypes = [ctypes.c_void_p, ctypes.c_char_p]
    if _LIB.SSL_CTX_set_ciphersuites(_context_pointer(context), suites.encode()) != 1:
        raise OpenSSLError(f"OpenSSL refused the TLS 1.3 cipher suites {suites!r}")


def key_update(connection: ssl.SSLObject) -> None:
    """Send a KeyUpdate asking the peer to update too (with the next record written)."""
    assert _LIB is not None
    _LIB.SSL_key_update.argtypes = [ctypes.c_void_p, ctypes.c_int]
    if _LIB.SSL_key_update(_ssl_pointer(connection), SSL_KEY_UPDATE_REQUESTED) != 1:
        raise OpenSSLError("SSL_key_update failed")
