# cython: annotation_typing=True
"""ERSPAN types II and III (draft-foschiano-erspan): the header a switch's remote SPAN
puts before each mirrored frame, inside GRE. Its 10-bit session id is the mirror
session, part of the mirrored flows' identity. Type III may add an 8-byte
platform-specific subheader (the O flag) and may mirror a bare IP packet instead of an
Ethernet frame (frame type 2)."""

from __future__ import annotations

import cython

from .codes import ERSPAN_SESSION, ETHERNET, NON_TCP, TOO_DEEP, TRUNCATED

if cython.compiled:
    from cython.cimports.pwcap.capture.layers.link import ip_version
else:
    from .cursor import Cursor
    from .link import ip_version

_ETHERNET = cython.declare(cython.int, ETHERNET)
_NON_TCP = cython.declare(cython.int, NON_TCP)
_TOO_DEEP = cython.declare(cython.int, TOO_DEEP)
_TRUNCATED = cython.declare(cython.int, TRUNCATED)
_ERSPAN_SESSION = cython.declare(cython.int, ERSPAN_SESSION)


def erspan2(c: Cursor) -> cython.int:
    """Version 1 (type II): version, VLAN, CoS, encapsulation, truncated flag, session
    id, then a reserved field and the port index: 8 bytes."""
    if not c.room(8):
        return _TRUNCATED
    if c.u8(0) >> 4 != 1:
        return _NON_TCP
    session: cython.long = c.u16(2) & 0x3FF
    c.at += 8
    if not c.tag(_ERSPAN_SESSION, session):
        return _TOO_DEEP
    return _ETHERNET


def erspan3(c: Cursor) -> cython.int:
    """Version 2 (type III): as type II's first word, a timestamp, then the security
    group tag, frame type, hardware id and flags: 12 bytes."""
    if not c.room(12):
        return _TRUNCATED
    if c.u8(0) >> 4 != 2:
        return _NON_TCP
    session: cython.long = c.u16(2) & 0x3FF
    frame_type: cython.long = (c.u8(10) >> 2) & 0x1F
    header: cython.Py_ssize_t = 20 if c.u8(11) & 0x01 else 12
    if not c.room(header):
        return _TRUNCATED
    c.at += header
    if not c.tag(_ERSPAN_SESSION, session):
        return _TOO_DEEP
    if frame_type == 0:
        return _ETHERNET
    if frame_type == 2:
        return ip_version(c)
    return _NON_TCP
