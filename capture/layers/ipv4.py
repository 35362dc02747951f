# cython: annotation_typing=True
"""IPv4: the header (options skipped by its length), its addresses, its fragments, and
the layer its protocol number names. :func:`carried` is that table, which IPv6 shares.

A total length of 0 means the packet runs to the end of the record (captured before
segmentation offload split it). A fragment goes to :mod:`.fragments`; once its datagram
is whole, the walk reads on in the datagram.
"""

from __future__ import annotations

import cython

from .codes import (
    GRE,
    HELD,
    IP_IN_IP,
    IPV4,
    IPV6,
    MALFORMED,
    NO_ID,
    NON_TCP,
    TCP,
    TOO_DEEP,
    TRUNCATED,
    UDP,
)

if not cython.compiled:
    from .cursor import Cursor
    from .fragments import Fragments

_TCP = cython.declare(cython.int, TCP)
_UDP = cython.declare(cython.int, UDP)
_GRE = cython.declare(cython.int, GRE)
_IPV4 = cython.declare(cython.int, IPV4)
_IPV6 = cython.declare(cython.int, IPV6)
_HELD = cython.declare(cython.int, HELD)
_NON_TCP = cython.declare(cython.int, NON_TCP)
_MALFORMED = cython.declare(cython.int, MALFORMED)
_TOO_DEEP = cython.declare(cython.int, TOO_DEEP)
_TRUNCATED = cython.declare(cython.int, TRUNCATED)
_IP_IN_IP = cython.declare(cython.int, IP_IN_IP)
_NO_ID = cython.declare(cython.longlong, NO_ID)


def ipv4(c: Cursor, fragments: Fragments) -> cython.int:
    if not c.room(20):
        return _TRUNCATED
    version_ihl: cython.long = c.u8(0)
    header: cython.Py_ssize_t = (version_ihl & 0x0F) * 4
    if version_ihl >> 4 != 4 or header < 20:
        return _MALFORMED
    if not c.room(header):
        return _TRUNCATED
    total: cython.long = c.u16(2)
    ident: cython.long = c.u16(4)
    fragment: cython.long = c.u16(6)
    protocol: cython.long = c.u8(9)
    c.src = c.copy(12, 16)
    c.dst = c.copy(16, 20)
    c.ident = ident
    if total:
        if total < header:
            return _MALFORMED
        c.carry(total)
    c.at += header
    if fragment & 0x3FFF:  # more fragments follow, or this one is not the first
        whole = fragments.add(c, 4, ident, (fragment & 0x1FFF) * 8, fragment & 0x2000, protocol)
        if whole is None:
            return _HELD
        c.replace(whole)
    return carried(c, protocol)


def carried(c: Cursor, protocol: cython.long) -> cython.int:
    """The layer an IP protocol number names (anything else carries no TCP)."""
    if protocol == 6:
        return _TCP
    if protocol == 17:
        return _UDP
    if protocol == 47:
        return _GRE
    if protocol == 4 or protocol == 41:  # IPv4 or IPv6 in IP
        if not c.tag(_IP_IN_IP, _NO_ID):
            return _TOO_DEEP
        return _IPV4 if protocol == 4 else _IPV6
    return _NON_TCP
