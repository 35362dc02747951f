# cython: annotation_typing=True
"""Ethernet II and VLAN tags (802.1Q; 802.1ad QinQ and the older 0x9100/0x9200 stacks).

A tag adds its VLAN id to the packet's identity; a priority tag (VLAN 0) adds nothing.
:func:`next_header` is the EtherType table every layer that names its payload by an
EtherType shares (Linux cooked captures, GRE, Geneve).
"""

from __future__ import annotations

import cython

from .codes import (
    ETHERNET,
    IPV4,
    IPV6,
    MPLS,
    NON_TCP,
    TOO_DEEP,
    TRUNCATED,
    VLAN,
    VLAN_TAG,
)

if not cython.compiled:
    from .cursor import Cursor

_ETHERNET = cython.declare(cython.int, ETHERNET)
_VLAN = cython.declare(cython.int, VLAN)
_IPV4 = cython.declare(cython.int, IPV4)
_IPV6 = cython.declare(cython.int, IPV6)
_MPLS = cython.declare(cython.int, MPLS)
_NON_TCP = cython.declare(cython.int, NON_TCP)
_TRUNCATED = cython.declare(cython.int, TRUNCATED)
_TOO_DEEP = cython.declare(cython.int, TOO_DEEP)
_VLAN_TAG = cython.declare(cython.int, VLAN_TAG)


def next_header(ethertype: cython.long) -> cython.int:
    """The layer an EtherType announces (anything else carries no TCP pwcap reads)."""
    if ethertype == 0x0800:
        return _IPV4
    if ethertype == 0x86DD:
        return _IPV6
    if ethertype == 0x8100 or ethertype == 0x88A8 or ethertype == 0x9100 or ethertype == 0x9200:
        return _VLAN
    if ethertype == 0x8847 or ethertype == 0x8848:  # MPLS unicast, multicast
        return _MPLS
    if ethertype == 0x6558:  # transparent Ethernet bridging: a whole frame (GRE, Geneve)
        return _ETHERNET
    return _NON_TCP


def ethernet(c: Cursor) -> cython.int:
    """Destination and source addresses, then the EtherType."""
    if not c.room(14):
        return _TRUNCATED
    ethertype: cython.long = c.u16(12)
    c.at += 14
    return next_header(ethertype)


def vlan(c: Cursor) -> cython.int:
    """One tag: priority and VLAN id, then the EtherType of what it tags."""
    if not c.room(4):
        return _TRUNCATED
    vid: cython.long = c.u16(0) & 0x0FFF
    ethertype: cython.long = c.u16(2)
    c.at += 4
    if vid and not c.tag(_VLAN_TAG, vid):
        return _TOO_DEEP
    return next_header(ethertype)
