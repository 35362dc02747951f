# cython: annotation_typing=True
"""The link layers a capture point writes (the record's link type says which).

Ethernet (a switch's SPAN port, a mirror's collector), Linux cooked captures v1 and v2
(``tcpdump -i any``), NFLOG (packets an iptables rule logged), BSD loopback, and raw IP
(a cloud mirror's collector or a tunnel interface). Raw IP and loopback name no EtherType:
the IP version nibble says which IP it is.
"""

from __future__ import annotations

import cython

from .codes import ETHERNET, IPV4, IPV6, MALFORMED, NON_TCP, TRUNCATED, UNSUPPORTED_LINK

if cython.compiled:
    from cython.cimports.pwcap.capture.layers.ethernet import next_header
else:
    from .cursor import Cursor
    from .ethernet import next_header

# The link types (LINKTYPE_* of the pcap and pcapng specifications)
EN10MB, BSD_NULL, RAW, RAW_ALT, RAW_OPENBSD, LOOP, LINUX_SLL, RAW_IPV4, RAW_IPV6 = (
    1, 0, 101, 12, 14, 108, 113, 228, 229
)  # fmt: skip
NFLOG, LINUX_SLL2 = 239, 276
_EN10MB = cython.declare(cython.long, EN10MB)
_BSD_NULL = cython.declare(cython.long, BSD_NULL)
_LOOP = cython.declare(cython.long, LOOP)
_RAW = cython.declare(cython.long, RAW)
_RAW_ALT = cython.declare(cython.long, RAW_ALT)
_RAW_OPENBSD = cython.declare(cython.long, RAW_OPENBSD)
_RAW_IPV4 = cython.declare(cython.long, RAW_IPV4)
_RAW_IPV6 = cython.declare(cython.long, RAW_IPV6)
_LINUX_SLL = cython.declare(cython.long, LINUX_SLL)
_LINUX_SLL2 = cython.declare(cython.long, LINUX_SLL2)
_NFLOG = cython.declare(cython.long, NFLOG)
_ETHERNET = cython.declare(cython.int, ETHERNET)
_IPV4 = cython.declare(cython.int, IPV4)
_IPV6 = cython.declare(cython.int, IPV6)
_NON_TCP = cython.declare(cython.int, NON_TCP)
_MALFORMED = cython.declare(cython.int, MALFORMED)
_TRUNCATED = cython.declare(cython.int, TRUNCATED)
_UNSUPPORTED_LINK = cython.declare(cython.int, UNSUPPORTED_LINK)
_NFULA_PAYLOAD = cython.declare(cython.long, 9)  # the TLV that holds the logged packet
_AF_INET = cython.declare(cython.long, 2)
_AF_INET6 = cython.declare(cython.long, 10)


def link(c: Cursor, linktype: cython.long) -> cython.int:
    """Past the link header of a record of ``linktype``: the layer it carries."""
    if linktype == _EN10MB:
        return _ETHERNET
    if linktype == _LINUX_SLL:  # packet type, ARPHRD type, address length and address
        if not c.room(16):
            return _TRUNCATED
        ethertype: cython.long = c.u16(14)
        c.at += 16
        return next_header(ethertype)
    if linktype == _LINUX_SLL2:  # the protocol first, then interface, ARPHRD type, address
        if not c.room(20):
            return _TRUNCATED
        ethertype = c.u16(0)
        c.at += 20
        return next_header(ethertype)
    if linktype == _NFLOG:
        return nflog(c)
    if linktype in (_BSD_NULL, _LOOP):  # an address family (in either byte order)
        if not c.room(4):
            return _TRUNCATED
        c.at += 4
        return ip_version(c)
    if linktype in (_RAW, _RAW_ALT, _RAW_OPENBSD, _RAW_IPV4, _RAW_IPV6):
        return ip_version(c)
    return _UNSUPPORTED_LINK


def ip_version(c: Cursor) -> cython.int:
    """IPv4 or IPv6 by the version nibble of the header at the cursor."""
    if not c.room(1):
        return _TRUNCATED
    version: cython.long = c.u8(0) >> 4
    if version == 4:
        return _IPV4
    if version == 6:
        return _IPV6
    return _NON_TCP


def nflog(c: Cursor) -> cython.int:
    """Linux NFLOG: address family, version, resource id, then type-length-value
    attributes, one of which is the packet. The attributes' lengths and types are in the
    byte order of the host that logged them: a type read the wrong way round is over 255
    (the kernel defines a few dozen), which tells the two apart."""
    if not c.room(4):
        return _TRUNCATED
    family: cython.long = c.u8(0)
    c.at += 4
    while c.room(4):
        length: cython.long = c.u8(0) | c.u8(1) << 8
        kind: cython.long = (c.u8(2) | c.u8(3) << 8) & 0x3FFF  # without the nesting flags
        if kind > 0xFF:  # big-endian
            length = c.u16(0)
            kind = c.u16(2) & 0x3FFF
        if length < 4:
            return _MALFORMED
        if kind == _NFULA_PAYLOAD:
            c.at += 4
            c.carry(length - 4)
            if family == _AF_INET:
                return _IPV4
            if family == _AF_INET6:
                return _IPV6
            return ip_version(c)
        c.at += (length + 3) & ~3  # attributes are padded to 4 bytes
    return _TRUNCATED if c.at < c.end else _NON_TCP  # no packet logged, or it was cut
