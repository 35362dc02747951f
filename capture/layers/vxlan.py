# cython: annotation_typing=True
"""VXLAN (RFC 7348): 8 bytes of flags and a 24-bit VNI, then an Ethernet frame. The VNI
is the tenant: the same inner addresses in two VNIs are two connections."""

from __future__ import annotations

import cython

from .codes import ETHERNET, MALFORMED, TOO_DEEP, TRUNCATED, VXLAN_VNI

if not cython.compiled:
    from .cursor import Cursor

_ETHERNET = cython.declare(cython.int, ETHERNET)
_MALFORMED = cython.declare(cython.int, MALFORMED)
_TOO_DEEP = cython.declare(cython.int, TOO_DEEP)
_TRUNCATED = cython.declare(cython.int, TRUNCATED)
_VXLAN_VNI = cython.declare(cython.int, VXLAN_VNI)
_VALID_VNI = cython.declare(cython.long, 0x08)  # the I flag


def vxlan(c: Cursor) -> cython.int:
    if not c.room(8):
        return _TRUNCATED
    if not c.u8(0) & _VALID_VNI:
        return _MALFORMED
    vni: cython.longlong = c.u32(4) >> 8
    c.at += 8
    if not c.tag(_VXLAN_VNI, vni):
        return _TOO_DEEP
    return _ETHERNET
