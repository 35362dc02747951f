"""What a layer found: the next header to read (> 0), or why the record is skipped (< 0).

Plain integers shared by the layer modules: each compiled module copies the ones it
uses into C constants (a module global would be a dictionary lookup per packet).
"""

from __future__ import annotations

# The next header
TCP = 1
ETHERNET = 2
VLAN = 3
IPV4 = 4
IPV6 = 5
UDP = 6
GRE = 7
MPLS = 8
VXLAN = 9
GENEVE = 10
ERSPAN_2 = 11  # GRE 0x88BE with a sequence number: the ERSPAN type II header
ERSPAN_3 = 12  # GRE 0x22EB: the ERSPAN type III header
HELD = 0  # a fragment kept until its datagram is whole: not skipped, not yet a packet

# Why a record is skipped (each one a counter of CaptureStats)
NON_TCP = -1  # a protocol that carries no TCP (ICMP, ARP, UDP to a port with no tunnel...)
UDP_NOT_TUNNEL = -2  # UDP to a port no tunnel uses: counted by port
TRUNCATED = -3  # the snaplen (or a mirror) cut a header before the TCP header
MALFORMED = -4  # a header that contradicts itself or the one carrying it
TOO_DEEP = -5  # more nested headers than MAX_LAYERS
UNSUPPORTED_LINK = -6  # a link type pwcap does not parse

MAX_LAYERS = 32  # headers walked per record (tags and labels each count)
MAX_TAGS = 8  # tunnel ids one packet's identity holds; more is TOO_DEEP

# Tunnel kinds, as the `encapsulation` column names them
VLAN_TAG, MPLS_STACK, GRE_TUNNEL, ERSPAN_SESSION, VXLAN_VNI, GENEVE_VNI, IP_IN_IP = range(1, 8)
KIND_NAMES = {
    VLAN_TAG: "vlan",
    MPLS_STACK: "mpls",
    GRE_TUNNEL: "gre",
    ERSPAN_SESSION: "erspan",
    VXLAN_VNI: "vxlan",
    GENEVE_VNI: "geneve",
    IP_IN_IP: "ipip",
}
NO_ID = -1  # a tunnel without an id (GRE without a key, ERSPAN type I, IP in IP, MPLS)

VXLAN_PORTS = (4789, 8472)  # IANA's, and the Linux kernel's default (Flannel)
GENEVE_PORT = 6081


def label(tags: tuple[int, ...]) -> str:
    """The ``encapsulation`` label of a packet's tags ``(kind, id, kind, id...)``,
    outermost first: ``vxlan:4242/vlan:100``; empty for a bare packet."""
    parts = []
    for index in range(0, len(tags), 2):
        kind, ident = tags[index], tags[index + 1]
        name = KIND_NAMES[kind]
        parts.append(name if ident == NO_ID else f"{name}:{ident}")
    return "/".join(parts)
