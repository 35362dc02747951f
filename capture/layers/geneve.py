# cython: annotation_typing=True
"""Geneve (RFC 8926): a fixed header with a 24-bit VNI and the protocol it carries (an
Ethernet frame, IPv4 or IPv6), then variable-length options, each walked by its own
length: options that do not add up to the header's option length are damage."""

from __future__ import annotations

import cython

from .codes import GENEVE_VNI, MALFORMED, NON_TCP, TOO_DEEP, TRUNCATED

if cython.compiled:
    from cython.cimports.pwcap.capture.layers.ethernet import next_header
else:
    from .cursor import Cursor
    from .ethernet import next_header

_MALFORMED = cython.declare(cython.int, MALFORMED)
_NON_TCP = cython.declare(cython.int, NON_TCP)
_TOO_DEEP = cython.declare(cython.int, TOO_DEEP)
_TRUNCATED = cython.declare(cython.int, TRUNCATED)
_GENEVE_VNI = cython.declare(cython.int, GENEVE_VNI)


def geneve(c: Cursor) -> cython.int:
    if not c.room(8):
        return _TRUNCATED
    first: cython.long = c.u8(0)
    if first >> 6:  # version 0 is the only one defined
        return _NON_TCP
    header: cython.Py_ssize_t = 8 + (first & 0x3F) * 4
    protocol: cython.long = c.u16(2)
    vni: cython.longlong = c.u32(4) >> 8
    if not c.room(header):
        return _TRUNCATED
    option: cython.Py_ssize_t = 8
    while option < header:  # class (2 bytes), type, 3 flag bits and a length in words
        if option + 4 > header:
            return _MALFORMED
        option += 4 + (c.u8(option + 3) & 0x1F) * 4
    if option != header:
        return _MALFORMED
    c.at += header
    if not c.tag(_GENEVE_VNI, vni):
        return _TOO_DEEP
    return next_header(protocol)
