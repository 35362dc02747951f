# cython: annotation_typing=True
"""UDP: only a tunnel makes it worth reading on (pwcap decodes TCP), and its destination
port says which: VXLAN (4789, Linux's 8472, and the ports ``--vxlan-port`` adds) or
Geneve (6081). Any other UDP is skipped, counted by its lower port (the service's, in
either direction), so a summary can name a tunnel on a port pwcap was not told of."""

from __future__ import annotations

import cython

from .codes import MALFORMED, TRUNCATED, UDP_NOT_TUNNEL

if not cython.compiled:
    from .cursor import Cursor

_MALFORMED = cython.declare(cython.int, MALFORMED)
_TRUNCATED = cython.declare(cython.int, TRUNCATED)
_UDP_NOT_TUNNEL = cython.declare(cython.int, UDP_NOT_TUNNEL)


def udp(c: Cursor, tunnels: bytes) -> cython.int:
    """The UDP header; ``tunnels[port]`` is the layer a destination port carries (0 for
    none): a table of 65,536 bytes, one C load per datagram."""
    if not c.room(8):
        return _TRUNCATED
    sport: cython.long = c.u16(0)
    dport: cython.long = c.u16(2)
    length: cython.long = c.u16(4)
    if length:  # 0: an IPv6 jumbogram's, or offloaded: up to the end of the packet
        if length < 8:
            return _MALFORMED
        c.carry(length)
    c.at += 8
    carried: cython.int = tunnels[dport]
    if carried:
        return carried
    c.port = min(sport, dport)
    return _UDP_NOT_TUNNEL
