"""A recording :class:`~pwcap.capture.StreamSink`: the contract reassembly promises its sink,
checked on every event.

It rebuilds every connection's two byte streams from the events reassembly delivers, and
checks the sink contract as it goes, so every fuzz target and test using it also proves
the contract:

- ``on_open`` comes once per connection, before any other event of it;
- per direction, every ``on_data`` / ``on_gap`` starts exactly where the previous one
  ended (offsets are contiguous from 0), data is never empty, gaps are never empty;
- ``on_close`` comes once, and nothing follows it.

Gaps are kept as ``Gap`` entries, and :meth:`Stream.filled` renders them as placeholder
bytes so a stream with holes can still be compared with an original byte for byte.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from pwcap.capture import Connection, Direction


@dataclass(frozen=True)
class Gap:
    """``size`` bytes at ``offset`` that the capture did not carry, declared at ``ts``."""

    offset: int
    size: int
    ts: int


@dataclass
class Stream:
    """One direction of one connection, as delivered."""

    pieces: list[bytes | Gap] = field(default_factory=list)
    timestamps: list[tuple[int, int, int]] = field(default_factory=list)  # offset, size, ts
    length: int = 0  # delivered bytes plus gap bytes: the next expected offset

    @property
    def data(self) -> bytes:
        """The delivered bytes only, gaps left out."""
        return b"".join(piece for piece in self.pieces if isinstance(piece, bytes))

    @property
    def gaps(self) -> list[Gap]:
        return [piece for piece in self.pieces if isinstance(piece, Gap)]

    @property
    def gap_bytes(self) -> int:
        return sum(gap.size for gap in self.gaps)

    def filled(self, fill: int = 0) -> bytes:
        """The whole stream with every gap replaced by ``size`` bytes of value ``fill``."""
        return b"".join(
            piece if isinstance(piece, bytes) else bytes([fill]) * piece.size
            for piece in self.pieces
        )


@dataclass
class Recorded:
    """Everything delivered for one connection."""

    conn: Connection
    streams: tuple[Stream, Stream] = field(default_factory=lambda: (Stream(), Stream()))
    close_reason: str | None = None
    close_ts: int | None = None

    def stream(self, direction: Direction) -> Stream:
        return self.streams[direction]

    @property
    def client(self) -> str:
        return _endpoint(self.conn.client_ip, self.conn.client_port)

    @property
    def server(self) -> str:
        return _endpoint(self.conn.server_ip, self.conn.server_port)


def _endpoint(ip: str, port: int) -> str:
    """``ip:port`` exactly as the broker journals write endpoints (IPv6 without brackets)."""
    return f"{ip}:{port}"


class RecordingSink:
    """Records every event per connection and fails at once on a contract violation."""

    def __init__(self) -> None:
        self.connections: dict[int, Recorded] = {}  # by conn_id, in opening order
        self.events = 0

    def on_open(self, conn: Connection) -> None:
        assert conn.conn_id not in self.connections, f"connection {conn.conn_id} opened twice"
        self.connections[conn.conn_id] = Recorded(conn)
        self.events += 1

    def on_data(
        self, conn: Connection, direction: Direction, ts: int, offset: int, data: bytes
    ) -> None:
        stream = self._stream(conn, direction, offset, "data")
        assert data, f"empty data event on {conn.conn_id} {direction.label} at {offset}"
        stream.pieces.append(bytes(data))
        stream.timestamps.append((offset, len(data), ts))
        stream.length += len(data)
        self.events += 1

    def on_gap(
        self, conn: Connection, direction: Direction, ts: int, offset: int, size: int
    ) -> None:
        stream = self._stream(conn, direction, offset, "gap")
        assert size > 0, f"gap of {size} bytes on {conn.conn_id} {direction.label} at {offset}"
        stream.pieces.append(Gap(offset, size, ts))
        stream.length += size
        self.events += 1

    def on_close(self, conn: Connection, ts: int, reason: str) -> None:
        recorded = self._open(conn)
        recorded.close_reason = reason
        recorded.close_ts = ts
        self.events += 1

    def _open(self, conn: Connection) -> Recorded:
        recorded = self.connections.get(conn.conn_id)
        assert recorded is not None, f"event for connection {conn.conn_id} before on_open"
        assert recorded.close_reason is None, (
            f"event for connection {conn.conn_id} after on_close ({recorded.close_reason})"
        )
        return recorded

    def _stream(self, conn: Connection, direction: Direction, offset: int, kind: str) -> Stream:
        stream = self._open(conn).stream(direction)
        assert offset == stream.length, (
            f"{kind} on {conn.conn_id} {direction.label} at offset {offset}, "
            f"expected {stream.length}"
        )
        return stream

    # -- views for assertions ---------------------------------------------------------------

    def by_endpoints(self) -> dict[tuple[str, str], Recorded]:
        """Connections keyed by (client, server) ``ip:port``; fails if a pair repeats."""
        keyed: dict[tuple[str, str], Recorded] = {}
        for recorded in self.connections.values():
            key = (recorded.client, recorded.server)
            assert key not in keyed, f"two connections between {key}"
            keyed[key] = recorded
        return keyed

    def directed_streams(self) -> dict[tuple[str, str], Stream]:
        """Non-empty streams keyed by (sender, receiver) ``ip:port``."""
        streams: dict[tuple[str, str], Stream] = {}
        for (client, server), recorded in self.by_endpoints().items():
            for direction, key in (
                (Direction.C2B, (client, server)),
                (Direction.B2C, (server, client)),
            ):
                stream = recorded.stream(direction)
                if stream.length:
                    streams[key] = stream
        return streams
