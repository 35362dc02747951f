"""The contract between TCP reassembly and the protocol decoders.

Reassembly pushes events into a :class:`StreamSink` instead of returning lists, so the
per-packet hot path allocates nothing it does not have to. A sink never does I/O of its
own on behalf of reassembly; it is fed, like a sans-IO protocol object.

Timestamps are integer microseconds since the Unix epoch (UTC), taken from the capture
record that carried the bytes.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from enum import IntEnum
from typing import Any, Protocol

LABELS = ("c2b", "b2c")  # each Direction as the tables write it, by its value


class Direction(IntEnum):
    """Which side sent the bytes: the connection's client (initiator) or its server."""

    C2B = 0
    B2C = 1

    @property
    def label(self) -> str:
        return LABELS[self]


class ClientBy(IntEnum):
    """How reassembly decided which endpoint is the client."""

    SYN = 0  # saw the SYN (or SYN-ACK): certain
    PORT = 1  # no handshake; the other end uses a well-known server port
    GUESS = 2  # no handshake, no known port: the lower port taken as the server (a guess)


@dataclass(slots=True)
class Connection:
    """One TCP connection: an endpoint pair over one lifetime (a new SYN starts another)."""

    conn_id: int
    client_ip: str
    client_port: int
    server_ip: str
    server_port: int
    first_ts: int
    client_by: ClientBy
    last_ts: int = 0
    bytes: list[int] = field(default_factory=lambda: [0, 0])  # delivered, per Direction
    gap_bytes: list[int] = field(default_factory=lambda: [0, 0])  # declared missing
    gaps: int = 0
    # The roles turned round since reassembly named the client (as Zeek's
    # connection_flipped): reassembly labels the directions of later bytes by it.
    flipped: bool = False
    # What each side's segments show of TCP (a capture.tcpflow.TcpSide per Direction,
    # turned round with the roles): empty for a connection made without reassembly.
    tcp: list[Any] = field(default_factory=list)
    # The tunnel ids it was carried in, outermost first ("vxlan:4242/vlan:100"; "" when
    # bare): part of its identity, as its endpoints are.
    encapsulation: str = ""

    def flip(self) -> None:
        """Exchange client and server: content proved reassembly's choice wrong. Only the
        decode dispatcher calls this, once a decoder or the content test says so."""
        self.client_ip, self.server_ip = self.server_ip, self.client_ip
        self.client_port, self.server_port = self.server_port, self.client_port
        self.bytes.reverse()
        self.gap_bytes.reverse()
        self.tcp.reverse()
        self.flipped = not self.flipped


class StreamSink(Protocol):
    """Receives reassembled, in-order stream events for every connection.

    ``offset`` is the position of the first byte in that direction's stream, counted from
    the first byte reassembly saw (the byte after the SYN when there was one). Offsets
    only grow: after a gap of ``size`` bytes at ``offset``, the next data starts at
    ``offset + size``.
    """

    def on_open(self, conn: Connection) -> None: ...

    def on_data(
        self, conn: Connection, direction: Direction, ts: int, offset: int, data: bytes
    ) -> None:
        """Bytes carried by one capture record (all of them share its timestamp ``ts``)."""

    def on_gap(
        self, conn: Connection, direction: Direction, ts: int, offset: int, size: int
    ) -> None:
        """``size`` bytes at ``offset`` were never captured; delivery resumes after them."""

    def on_close(self, conn: Connection, ts: int, reason: str) -> None:
        """The connection ended: ``fin``, ``rst``, ``reused``, ``evicted``, ``end_of_capture``."""
