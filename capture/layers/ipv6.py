# cython: annotation_typing=True
"""IPv6: the fixed header, the extension headers (each skipped by its length), the
fragment header (its fragments go to :mod:`.fragments`), then the layer the last next
header names. A payload length of 0 (a jumbogram, or offload) runs to the record's end."""

from __future__ import annotations

import cython

from .codes import HELD, MALFORMED, NON_TCP, TRUNCATED

if cython.compiled:
    from cython.cimports.pwcap.capture.layers.ipv4 import carried
else:
    from .cursor import Cursor
    from .fragments import Fragments
    from .ipv4 import carried

MAX_EXTENSIONS = 16  # extension headers read per packet
_HELD = cython.declare(cython.int, HELD)
_MALFORMED = cython.declare(cython.int, MALFORMED)
_NON_TCP = cython.declare(cython.int, NON_TCP)
_TRUNCATED = cython.declare(cython.int, TRUNCATED)
_MAX_EXTENSIONS = cython.declare(cython.int, MAX_EXTENSIONS)
_FRAGMENT = cython.declare(cython.long, 44)
_AUTHENTICATION = cython.declare(cython.long, 51)
_NO_NEXT_HEADER = cython.declare(cython.long, 59)


def ipv6(c: Cursor, fragments: Fragments) -> cython.int:
    if not c.room(40):
        return _TRUNCATED
    if c.u8(0) >> 4 != 6:
        return _MALFORMED
    payload: cython.long = c.u16(4)
    proto: cython.long = c.u8(6)
    c.src = c.copy(8, 24)
    c.dst = c.copy(24, 40)
    c.ident = -1
    if payload:
        c.carry(40 + payload)
    c.at += 40
    extensions: cython.int = 0
    while extension(proto):
        extensions += 1
        if extensions > _MAX_EXTENSIONS:
            return _MALFORMED
        if not c.room(8):  # every extension header is at least 8 bytes long
            return _TRUNCATED
        if proto == _FRAGMENT:
            field: cython.long = c.u16(2)  # offset in 8-byte units, two reserved bits, M
            proto = c.u8(0)
            ident: cython.longlong = c.u32(4)
            c.at += 8
            if field & 0xFFF9:  # not an atomic fragment (offset 0, no more fragments)
                whole = fragments.add(c, 6, ident, field & 0xFFF8, field & 1, proto)
                if whole is None:
                    return _HELD
                proto = fragments.protocol
                c.replace(whole)
            continue
        length: cython.Py_ssize_t = c.u8(1)
        # the authentication header's length is in 4-byte units minus 2, the others' in
        # 8-byte units minus 1
        length = (length + 2) * 4 if proto == _AUTHENTICATION else (length + 1) * 8
        proto = c.u8(0)
        c.at += length
    if proto == _NO_NEXT_HEADER:
        return _NON_TCP
    return carried(c, proto)


def extension(proto: cython.long) -> cython.bint:
    """Hop-by-hop, routing, fragment, destination options, authentication, mobility,
    HIP and shim6: the headers IPv6 chains before its payload."""
    return (
        proto == 0
        or proto == 43
        or proto == 44
        or proto == 60
        or proto == 51
        or proto == 135
        or proto == 139
        or proto == 140
    )
