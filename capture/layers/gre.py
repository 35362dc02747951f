# cython: annotation_typing=True
"""GRE (RFC 2784, with RFC 2890's key and sequence number): flags, the protocol of what
it carries, then the optional checksum, key and sequence number.

The key (when present) is the tunnel's id. GRE carries IPv4, IPv6, MPLS, whole Ethernet
frames (transparent Ethernet bridging, as Linux's gretap sends) and ERSPAN: protocol
0x88BE is ERSPAN type II when the sequence number is present and type I (a bare
mirrored frame) when it is not; 0x22EB is type III. Version 1 (PPTP) carries PPP.
"""

from __future__ import annotations

import cython

from .codes import (
    ERSPAN_2,
    ERSPAN_3,
    ERSPAN_SESSION,
    ETHERNET,
    GRE_TUNNEL,
    MALFORMED,
    NO_ID,
    NON_TCP,
    TOO_DEEP,
    TRUNCATED,
)

if cython.compiled:
    from cython.cimports.pwcap.capture.layers.ethernet import next_header
else:
    from .cursor import Cursor
    from .ethernet import next_header

_ERSPAN_2 = cython.declare(cython.int, ERSPAN_2)
_ERSPAN_3 = cython.declare(cython.int, ERSPAN_3)
_ETHERNET = cython.declare(cython.int, ETHERNET)
_MALFORMED = cython.declare(cython.int, MALFORMED)
_NON_TCP = cython.declare(cython.int, NON_TCP)
_TOO_DEEP = cython.declare(cython.int, TOO_DEEP)
_TRUNCATED = cython.declare(cython.int, TRUNCATED)
_GRE_TUNNEL = cython.declare(cython.int, GRE_TUNNEL)
_ERSPAN_SESSION = cython.declare(cython.int, ERSPAN_SESSION)
_NO_ID = cython.declare(cython.longlong, NO_ID)
_CHECKSUM = cython.declare(cython.long, 0x8000)
_ROUTING = cython.declare(cython.long, 0x4000)
_KEY = cython.declare(cython.long, 0x2000)
_SEQUENCE = cython.declare(cython.long, 0x1000)


def gre(c: Cursor) -> cython.int:
    if not c.room(4):
        return _TRUNCATED
    flags: cython.long = c.u16(0)
    protocol: cython.long = c.u16(2)
    if flags & 0x7:  # version 1: PPTP's enhanced GRE, which carries PPP
        return _NON_TCP
    if flags & _ROUTING:  # RFC 1701's source routes: deprecated, and no receiver takes it
        return _MALFORMED
    header: cython.Py_ssize_t = 4
    if flags & _CHECKSUM:
        header += 4  # the checksum and a reserved word
    key_at: cython.Py_ssize_t = header
    if flags & _KEY:
        header += 4
    if flags & _SEQUENCE:
        header += 4
    if not c.room(header):
        return _TRUNCATED
    key: cython.longlong = c.u32(key_at) if flags & _KEY else _NO_ID
    c.at += header
    if protocol == 0x88BE:
        if flags & _SEQUENCE:
            return _ERSPAN_2
        if not c.tag(_ERSPAN_SESSION, _NO_ID):  # type I: no header, no session id
            return _TOO_DEEP
        return _ETHERNET
    if protocol == 0x22EB:
        return _ERSPAN_3
    if not c.tag(_GRE_TUNNEL, key):
        return _TOO_DEEP
    return next_header(protocol)
