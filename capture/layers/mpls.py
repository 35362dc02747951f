# cython: annotation_typing=True
"""An MPLS label stack and what its bottom label carries.

Labels are swapped hop by hop and chosen per direction, so they are no part of a
connection's identity: the stack adds ``mpls`` to the encapsulation, not its labels.
After the bottom of the stack there is no protocol field: IPv4 and IPv6 are told by the
first nibble (RFC 4385); anything else is an Ethernet pseudowire, with a control word
(first nibble 0) or without one. A frame without a control word whose destination
address starts with a 0 nibble looks like one with it: the control word is taken only
when the frame after it reads as a frame (an EtherType pwcap follows, and an IP header
of that version after it) and the bytes read without it do not.
"""

from __future__ import annotations

import cython

from .codes import ETHERNET, IPV4, IPV6, MPLS_STACK, NO_ID, NON_TCP, TOO_DEEP, TRUNCATED

if cython.compiled:
    from cython.cimports.pwcap.capture.layers.ethernet import next_header
else:
    from .cursor import Cursor
    from .ethernet import next_header

MAX_LABELS = 16
_ETHERNET = cython.declare(cython.int, ETHERNET)
_IPV4 = cython.declare(cython.int, IPV4)
_IPV6 = cython.declare(cython.int, IPV6)
_NON_TCP = cython.declare(cython.int, NON_TCP)
_TOO_DEEP = cython.declare(cython.int, TOO_DEEP)
_TRUNCATED = cython.declare(cython.int, TRUNCATED)
_MPLS_STACK = cython.declare(cython.int, MPLS_STACK)
_NO_ID = cython.declare(cython.longlong, NO_ID)
_MAX_LABELS = cython.declare(cython.int, MAX_LABELS)
_BOTTOM = cython.declare(cython.longlong, 0x100)  # the bottom-of-stack bit of an entry


def mpls(c: Cursor) -> cython.int:
    """Every label down to the bottom of the stack, then what it carries."""
    labels: cython.int = 0
    while True:
        if not c.room(4):
            return _TRUNCATED
        entry: cython.longlong = c.u32(0)
        c.at += 4
        labels += 1
        if entry & _BOTTOM:
            break
        if labels >= _MAX_LABELS:
            return _TOO_DEEP
    if not c.tag(_MPLS_STACK, _NO_ID):
        return _TOO_DEEP
    if not c.room(1):
        return _TRUNCATED
    nibble: cython.long = c.u8(0) >> 4
    if nibble == 4:
        return _IPV4
    if nibble == 6:
        return _IPV6
    if nibble == 0 and _frame(c, 4) and not _frame(c, 0):
        c.at += 4  # the pseudowire control word
    return _ETHERNET


def _frame(c: Cursor, at: cython.Py_ssize_t) -> cython.bint:
    """Whether an Ethernet frame ``at`` bytes on names a layer pwcap reads, and, when
    that is IP, begins it with that IP's version."""
    if not c.room(at + 15):
        return False
    carried: cython.int = next_header(c.u16(at + 12))
    if carried == _IPV4:
        return c.u8(at + 14) >> 4 == 4
    if carried == _IPV6:
        return c.u8(at + 14) >> 4 == 6
    return carried != _NON_TCP
