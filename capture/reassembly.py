"""TCP reassembly: segments in capture order, in-order stream events per connection out.

Rules, each chosen for a passive observer that cannot ask anyone to resend:

- A connection is an endpoint pair over one lifetime. A SYN opens it and names the client;
  a SYN with a new initial sequence number on a pair still open ends the old connection
  (``reused``) and starts another. Without a handshake, a known server port names the
  server, else the lower port does (a guess the decoder may overturn from content).
- Bytes are delivered once, in sequence order. Where a retransmission overlaps bytes
  already delivered, the first captured copy wins: it is what the decoder has already
  seen, and on a healthy path it is also what the receiver's stack accepted first.
- Early segments are held, bounded per direction and across all connections (when the
  total is reached, the connections holding the most give up their holes). A hole the
  receiver has not
  acknowledged is a loss on the network: its retransmission is awaited until the hold
  buffer is full, the connection closes or the capture ends. A hole the receiver has
  acknowledged reached it and will never be sent again: after ACK_SLACK more segments
  (a capture can show an ACK just before the data it acknowledges) it becomes a gap.
  Meanwhile the receiver's own later bytes wait too, so an answer is never delivered
  before the question it answers. Bytes a snaplen cut off are a gap at once.
- Sequence numbers are unwrapped against the next expected byte, so they may wrap.
"""

from __future__ import annotations

import bisect
import hashlib
import socket
from collections.abc import Iterable

import cython

from .events import ClientBy, Connection, Direction, StreamSink
from .stats import CaptureStats

if cython.compiled:  # the C declarations of a side's TCP measures (.pxd)
    from cython.cimports.pwcap.capture.tcpflow import TcpSide
else:
    from .tcpflow import TcpSide

FIN, SYN, RST, ACK = 0x01, 0x02, 0x04, 0x10
# C constants when compiled: a module global is a dict lookup at every segment.
_MASK = cython.declare(cython.longlong, (1 << 32) - 1)
_HALF = cython.declare(cython.longlong, 1 << 31)
_FIN = cython.declare(cython.long, FIN)
_SYN = cython.declare(cython.long, SYN)
_RST = cython.declare(cython.long, RST)
_ACK = cython.declare(cython.long, ACK)
_FLIPPED = (Direction.B2C, Direction.C2B)  # each direction, the roles turned round

MAX_HELD_BYTES = 4 << 20  # early bytes held per direction before a hole is given up
MAX_HELD_SEGMENTS = 4096
ACK_SLACK = 32  # segments to wait for acknowledged bytes a reordered capture may still show
MAX_HELD_TOTAL = 64 << 20  # early bytes held by all connections together
MAX_OPEN = 10_000  # open connections before the longest idle are evicted (~10 KB each)
MAX_CLOSED = 1 << 16  # endpoint pairs remembered as closed, to drop their stragglers

Key = tuple[bytes, int, bytes, int, str]  # sender ip, port, receiver ip, port, tunnel ids
# offset, ts, bytes, bytes the snaplen cut after them, offset of the other side it acknowledged
_Held = tuple[int, int, bytes, int, int]


def connection_id(
    scope: str, client_ip: str, client_port: int, server_ip: str, port: int, ts: int
) -> int:
    """A 63-bit id that is the same for the same connection in any run (fits Parquet int64).

    ``scope`` names the capture: the same connection seen in two captures (a capture and
    a filtered copy of it, two taps on one link) gets two ids, so a dataset of many
    captures never mixes their rows."""
    return _id_of(f"{scope}|{client_ip}|{client_port}|{server_ip}|{port}|{ts}".encode())


def next_connection_id(conn_id: int) -> int:
    """Another id, derived from one already taken (the same in every run)."""
    return _id_of(conn_id.to_bytes(8, "big"))


def _id_of(text: bytes) -> int:
    return int.from_bytes(hashlib.blake2b(text, digest_size=8).digest(), "big") >> 1


def address(raw: bytes) -> str:
    return socket.inet_ntop(socket.AF_INET if len(raw) == 4 else socket.AF_INET6, raw)


class _Holding:
    """The early bytes every connection holds, together: bounded, so many connections with
    a hole each cannot hold more than one budget between them."""

    __slots__ = ("holders", "total")

    def __init__(self) -> None:
        self.total = 0
        self.holders: set[_Half] = set()

    def add(self, half: _Half, size: int) -> None:
        self.total += size
        self.holders.add(half)

    def remove(self, half: _Half, size: int) -> None:
        self.total -= size
        if not half.held:
            self.holders.discard(half)

    def relieve(self, ts: int) -> None:
        """Over budget: the largest holders give up their holes until a quarter of the
        budget is free (so the next relief is a quarter of a budget of new bytes away)."""
        for half in sorted(self.holders, key=_held_size, reverse=True):
            if self.total <= MAX_HELD_TOTAL * 3 // 4:
                break
            if half.held:
                half.stats.hold_overflows += 1
                deliver_held(half, half.peer, ts)


def _held_size(half: _Half) -> int:
    return half.held_bytes


@cython.cclass
class _Half:
    """One direction of a connection: its sequence space, held segments and FIN.

    Compiled, a C struct (its fields' C types are in ``reassembly.pxd``): every segment
    reads and writes several of its fields.
    """

    def __init__(
        self,
        conn: Connection,
        side: Direction,
        sink: StreamSink,
        stats: CaptureStats,
        holding: _Holding,
    ) -> None:
        self.conn = conn
        self.side = side  # who sends these bytes as reassembly named the roles
        self.peer: _Half = self
        self.started = False  # the sequence number of offset 0 is known
        self.base = 0  # 32-bit sequence number of stream offset 0
        self.next = 0  # offset of the next byte to deliver
        self.held: list[_Held] = []  # segments waiting for delivery, sorted by offset
        self.held_bytes = 0
        self.holding = holding
        self.owed = 0  # the other side acknowledged every byte before this offset
        self.waited = 0  # segments seen since ``owed`` passed ``next``
        self.fin: int | None = None  # offset just past the last byte, once a FIN was seen
        self.sink = sink
        self.stats = stats
        self.tcp = TcpSide()  # what its segments show of TCP: round trips, windows

    def start(self, seq: int) -> None:
        self.started = True
        self.base = seq & _MASK

    @cython.ccall
    @cython.returns(cython.longlong)
    @cython.locals(seq=cython.longlong, nxt=cython.longlong)
    def offset(self, seq: int) -> int:
        """Stream offset of a 32-bit sequence number: the one nearest the next byte."""
        nxt = self.next
        return nxt + ((seq - self.base - nxt + _HALF) & _MASK) - _HALF

    @cython.ccall
    def direction(self) -> Direction:
        """Who sends these bytes now: the connection may have flipped its roles since."""
        return _FLIPPED[self.side] if self.conn.flipped else self.side

    @cython.ccall
    @cython.returns(cython.bint)
    def done(self) -> bool:
        return self.fin is not None and self.next >= self.fin

    def missing_acknowledged(self) -> bool:
        """The other side received bytes of ours that the capture has not shown yet."""
        return self.owed > self.next

    def ready(self) -> bool:
        """The first held segment is next in sequence and everything it acknowledged of
        the other side has been delivered."""
        held = self.held
        return bool(held) and held[0][0] <= self.next and held[0][4] <= self.peer.next

    # -- data -------------------------------------------------------------------------------

    @cython.ccall
    @cython.returns(cython.longlong)
    @cython.locals(ack=cython.longlong, at=cython.longlong)
    def acknowledged(self, ack: int) -> int:
        """The other side received every byte before ``ack``; returns that offset."""
        at = self.offset(ack)
        if self.fin is not None and at > self.fin:
            at = self.fin  # the FIN's own sequence number is no byte
        if at > self.owed:
            if self.owed <= self.next:
                self.waited = 0
            self.owed = at
        return at

    @cython.ccall
    @cython.locals(seq=cython.longlong, cut=cython.longlong, after=cython.longlong)
    @cython.locals(at=cython.longlong)
    def receive(self, ts: int, seq: int, payload: bytes, cut: int, after: int) -> None:
        """A segment with data; ``after`` is the offset of the other side's stream it
        acknowledged: those bytes came first, so they are delivered first."""
        if not self.started:
            self.start(seq)
        at = self.offset(seq)
        self.tcp.data(ts, at, at + len(payload) + cut)
        if self.fin is not None and at + len(payload) + cut > self.fin:
            self.stats.after_close += 1
            return
        if at > self.next or after > self.peer.next or (self.held and self.held[0][0] <= at):
            self._hold(ts, at, payload, cut, after)
            return
        self._accept(at, ts, payload, cut)
        if self.held or self.peer.held:  # a hole filled: what waited behind it may go
            drain_in_time_order(self, self.peer)

    def pop_and_accept(self) -> None:
        at, ts, payload, cut, _ = self.held.pop(0)
        self.held_bytes -= len(payload)
        self.holding.remove(self, len(payload))
        self._accept(at, ts, payload, cut)

    def declare_hole(self, ts: int, until: int) -> None:
        """The bytes from the next one up to ``until`` will never be seen: a gap."""
        if until > self.next:
            self._gap(self.held[0][1] if self.held else ts, until - self.next)

    @cython.ccall
    @cython.locals(at=cython.longlong, cut=cython.longlong)
    @cython.locals(skip=cython.longlong, size=cython.longlong)
    def _accept(self, at: int, ts: int, payload: bytes, cut: int) -> None:
        """Deliver a segment that starts at or before the next byte, minus what was seen."""
        skip = self.next - at
        if skip > 0:
            size = len(payload)
            if skip >= size + cut:
                self.stats.retransmitted_bytes += size
                self.tcp.resent(ts, at, size + cut)
                return
            self.stats.retransmitted_bytes += min(skip, size)
            self.tcp.resent(ts, at, skip)
            if skip >= size:
                cut -= skip - size
                payload = b""
            else:
                payload = payload[skip:]
        direction = self.direction()
        if payload:
            if type(payload) is not bytes:  # a view: the sink keeps what it is given
                payload = bytes(payload)
            conn = self.conn
            # Counted first: the sink may overturn the roles while it takes these bytes,
            # and the flip then carries the count to their true sender's side.
            conn.bytes[direction] += len(payload)
            self.sink.on_data(conn, direction, ts, self.next, payload)
            self.next += len(payload)
        if cut:
            self._gap(ts, cut, direction)

    def _hold(self, ts: int, at: int, payload: bytes, cut: int, after: int) -> None:
        held = self.held
        index = bisect.bisect_right(held, at, key=_held_offset)
        if index and held[index - 1][0] == at:  # the same segment again: the first copy wins
            self.stats.retransmitted_bytes += len(payload)
            self.tcp.resent(ts, at, len(payload) + cut)
            return
        held.insert(index, (at, ts, bytes(payload), cut, after))
        self.held_bytes += len(payload)
        self.holding.add(self, len(payload))
        self.stats.reordered_segments += 1
        if self.held_bytes > MAX_HELD_BYTES or len(held) > MAX_HELD_SEGMENTS:
            self.stats.hold_overflows += 1
            settle(self, self.peer, ts)
            if len(held) > MAX_HELD_SEGMENTS // 2:  # a hole nobody acknowledged: give up
                self.declare_hole(ts, held[0][0])
                drain_in_time_order(self, self.peer)
        if self.holding.total > MAX_HELD_TOTAL:
            self.holding.relieve(ts)

    def _gap(self, ts: int, size: int, direction: Direction | None = None) -> None:
        if direction is None:
            direction = self.direction()
        conn = self.conn
        conn.gaps += 1
        conn.gap_bytes[direction] += size  # first, as for data: the sink may flip the roles
        self.sink.on_gap(conn, direction, ts, self.next, size)
        self.stats.gaps += 1
        self.stats.gap_bytes += size
        self.next += size


def drain_in_time_order(one: _Half, other: _Half) -> None:
    """Deliver what both directions of a connection held and can now deliver, earliest
    captured first, so the decoder sees the conversation in the order it happened."""
    while True:
        one_ready, other_ready = one.ready(), other.ready()
        if one_ready and (not other_ready or one.held[0][1] <= other.held[0][1]):
            one.pop_and_accept()
        elif other_ready:
            other.pop_and_accept()
        else:
            return


def settle(one: _Half, other: _Half, ts: int) -> None:
    """Stop waiting for bytes the receiver acknowledged: declare them gaps, in turn, and
    deliver whatever waited behind them."""
    while True:
        drain_in_time_order(one, other)
        for half in sorted((one, other), key=_first_held_ts):  # unblock the earlier bytes
            if half.missing_acknowledged() and not (half.held and half.held[0][0] <= half.next):
                until = min(half.owed, half.held[0][0]) if half.held else half.owed
                if not half.held and until == half.next + 1 and half.fin is None:
                    half.owed = half.next  # the sequence number of a FIN the capture lost
                    continue
                waiting = half.peer.held  # gap only what the other side's next bytes need
                if waiting and half.next < waiting[0][4] < until:
                    until = waiting[0][4]
                half.declare_hole(ts, until)
                half.waited = 0
                break
        else:
            return


def _held_offset(item: _Held) -> int:
    return item[0]


def _first_held_ts(half: _Half) -> float:
    return half.held[0][1] if half.held else float("inf")


def deliver_held(one: _Half, other: _Half, ts: int) -> None:
    """Deliver everything both directions hold, earliest first, declaring the holes before
    it: the connection ends, or holds more than the budget lets it wait for."""
    settle(one, other, ts)
    while one.held or other.held:
        half = one if not other.held or (one.held and one.held[0][1] <= other.held[0][1]) else other
        half.declare_hole(ts, half.held[0][0])
        half.pop_and_accept()


def flush(one: _Half, other: _Half, ts: int) -> None:
    """The connection ends: deliver everything held and declare the bytes missing before
    a FIN."""
    deliver_held(one, other, ts)
    for half in (one, other):
        if half.fin is not None:
            half.declare_hole(ts, half.fin)


@cython.cclass
class Reassembler:
    """Feeds a :class:`StreamSink` from TCP segments given in capture order.

    Compiled, its :meth:`segment` is a C call for the record reader (``reassembly.pxd``).
    """

    def __init__(
        self,
        sink: StreamSink,
        stats: CaptureStats | None = None,
        server_ports: Iterable[int] = (),
        scope: str = "",
    ) -> None:
        self.sink = sink
        self.stats = stats if stats is not None else CaptureStats()
        self.server_ports = frozenset(server_ports)
        self.scope = scope  # the capture's name, part of every connection id
        self._halves: dict[Key, _Half] = {}  # keyed by (sender, port, receiver, port, tunnel)
        self._open: dict[int, tuple[Key, Key]] = {}  # conn_id -> its two keys
        self._closed: dict[Key, None] = {}  # recently closed pairs, oldest first
        # Ids given to recently closed connections, oldest first: a SYN record repeated
        # after its connection ended would otherwise open one with the same id.
        self._closed_ids: dict[int, None] = {}
        self._holding = _Holding()
        self._segments = 0  # TCP segments not yet added to stats (see count_segments)

    @cython.ccall
    @cython.locals(sport=cython.long, dport=cython.long, flags=cython.long)
    @cython.locals(seq=cython.longlong, ack=cython.longlong, cut=cython.longlong)
    @cython.locals(half=_Half, peer=_Half, owing=_Half, window=cython.long, wscale=cython.long)
    def segment(
        self,
        ts: int,
        src: bytes,
        sport: int,
        dst: bytes,
        dport: int,
        seq: int,
        ack: int,
        flags: int,
        payload: bytes,
        cut: int = 0,
        window: int = 0,
        wscale: int = -1,
        tunnel: str = "",
    ) -> None:
        """One TCP segment; ``cut`` is how many of its payload bytes the snaplen removed,
        ``window`` its advertised window as sent, ``wscale`` a SYN's window scale (-1:
        none), ``tunnel`` the label of the tunnel ids it came in (part of its flow's
        identity)."""
        self._segments += 1  # a C counter: count_segments() adds it to stats
        key = (src, sport, dst, dport, tunnel)
        half = self._halves.get(key)
        if half is None and sport == dport and src == dst:
            self.stats.malformed += 1  # a "land" packet to its own sender: no connection
            return
        if flags & _SYN:
            half = self._syn(ts, key, half, seq, ack, flags)
            if half is None:
                return
            seq += 1  # the SYN takes one sequence number; any data follows it
        elif half is None:
            if not payload and not cut:
                return  # a bare ACK, FIN or RST of a connection not being followed
            if key in self._closed:
                self.stats.after_close += 1
                return
            half = self._open_midstream(ts, key)
        conn = half.conn
        if ts >= conn.last_ts:
            conn.last_ts = ts
        elif ts < conn.first_ts:  # a clock that runs backwards: first <= last all the same
            conn.first_ts = ts
        peer = half.peer
        half.tcp.segment(ts, window, flags & _SYN, flags & _RST, flags & _ACK, wscale)
        after = 0
        if flags & _ACK and peer.started:
            after = peer.acknowledged(ack)
            peer.tcp.acked(ts, after)
        if payload or cut:
            half.receive(ts, seq, payload, cut, after)
        if flags & (_FIN | _RST):
            self._end(ts, half, seq, len(payload) + cut, flags)
            return
        if half.fin is not None and half.done() and peer.done():
            self._close(half, ts, "fin")  # late bytes filled the last hole before the FIN
            return
        for owing in (peer, half):
            if owing.owed > owing.next:
                owing.waited += 1
                if owing.waited >= ACK_SLACK:
                    settle(half, peer, ts)
                    break

    @cython.ccall
    @cython.returns(cython.void)
    def count_segments(self) -> None:
        """Add the segments seen since the last call to ``stats.tcp_segments`` (counted in
        C per segment: an attribute update of ``stats`` per segment costs a Python call)."""
        self.stats.tcp_segments += self._segments
        self._segments = 0

    def finish(self) -> None:
        """The capture ended: declare open holes and close every connection still open."""
        self.count_segments()
        for conn_id in list(self._open):
            half = self._halves[self._open[conn_id][0]]
            self._close(half, half.conn.last_ts, "end_of_capture")

    def open_connections(self) -> int:
        return len(self._open)

    # -- connection lifetime ------------------------------------------------------------------

    def _syn(
        self, ts: int, key: Key, half: _Half | None, seq: int, ack: int, flags: int
    ) -> _Half | None:
        """The half a SYN or SYN-ACK belongs to, opening (or reopening) its connection."""
        src, sport, dst, dport, tunnel = key
        isn = (seq + 1) & _MASK
        if flags & ACK:  # SYN-ACK: the sender is the server
            if half is None:  # the client's SYN was not captured (or comes later)
                self._closed.pop(key, None)
                reverse = (dst, dport, src, sport, tunnel)
                half = self._open_connection(ts, reverse, ClientBy.SYN).peer
                half.peer.start(ack)  # it acknowledges the client's ISN: a late SYN matches
            if not half.started:
                half.start(isn)
            return half
        if half is not None:
            if half.started and half.base == isn:
                return half  # the same SYN again
            self._close(half, ts, "reused")
        self._closed.pop(key, None)
        half = self._open_connection(ts, key, ClientBy.SYN)
        half.start(isn)
        return half

    def _open_midstream(self, ts: int, key: Key) -> _Half:
        src, sport, dst, dport, tunnel = key
        reverse = (dst, dport, src, sport, tunnel)
        if dport in self.server_ports:
            return self._open_connection(ts, key, ClientBy.PORT)
        if sport in self.server_ports:
            return self._open_connection(ts, reverse, ClientBy.PORT).peer
        if sport < dport:
            return self._open_connection(ts, reverse, ClientBy.GUESS).peer
        return self._open_connection(ts, key, ClientBy.GUESS)

    def _open_connection(self, ts: int, key: Key, client_by: ClientBy) -> _Half:
        """A new connection whose client sends on ``key``; returns the client's half; its
        id is derived again while an open or recently closed connection has it."""
        if len(self._open) >= MAX_OPEN:
            self._evict_idle()
        src, sport, dst, dport, tunnel = key
        client_ip, server_ip = address(src), address(dst)
        conn_id = connection_id(self.scope, client_ip, sport, server_ip, dport, ts)
        while conn_id in self._open or conn_id in self._closed_ids:
            conn_id = next_connection_id(conn_id)
        conn = Connection(
            conn_id,
            client_ip,
            sport,
            server_ip,
            dport,
            ts,
            client_by,
            last_ts=ts,
            encapsulation=tunnel,
        )
        client = _Half(conn, Direction.C2B, self.sink, self.stats, self._holding)
        server = _Half(conn, Direction.B2C, self.sink, self.stats, self._holding)
        client.peer, server.peer = server, client
        client.tcp.peer, server.tcp.peer = server.tcp, client.tcp
        conn.tcp = [client.tcp, server.tcp]
        reverse = (dst, dport, src, sport, tunnel)
        self._halves[key] = client
        self._halves[reverse] = server
        self._open[conn.conn_id] = (key, reverse)
        self.stats.connections += 1
        self.sink.on_open(conn)
        return client

    def _end(self, ts: int, half: _Half, seq: int, size: int, flags: int) -> None:
        if flags & RST:
            self._close(half, ts, "rst")
            return
        if half.fin is None:
            if not half.started:
                half.start(seq)
            half.fin = half.offset(seq) + size
            half.owed = min(half.owed, half.fin)  # an ACK of the FIN seen before the FIN
        if half.peer.fin is not None:  # both sides closed: only retransmissions may follow
            settle(half, half.peer, ts)
        if half.done() and half.peer.done():
            self._close(half, ts, "fin")

    def _close(self, half: _Half, ts: int, reason: str) -> None:
        conn = half.conn
        keys = self._open.pop(conn.conn_id)
        flush(half, half.peer, ts)
        self.stats.delivered_bytes += sum(conn.bytes)  # counted once, not per delivery
        for key in keys:
            del self._halves[key]
            self._closed[key] = None
        while len(self._closed) > MAX_CLOSED:
            del self._closed[next(iter(self._closed))]
        self._closed_ids[conn.conn_id] = None
        if len(self._closed_ids) > MAX_CLOSED:
            del self._closed_ids[next(iter(self._closed_ids))]
        self.sink.on_close(conn, ts, reason)
        # Two halves naming each other are a reference cycle: apart, reference counting
        # frees the closed connection now, not the cyclic collector some time later.
        peer = half.peer
        half.peer = peer.peer = None

    def _evict_idle(self) -> None:
        """Close the longest idle tenth of the open connections (bounded memory; a tenth at
        a time, so the sort is paid once per ``MAX_OPEN // 10`` new connections)."""
        halves = [self._halves[keys[0]] for keys in self._open.values()]
        halves.sort(key=lambda half: half.conn.last_ts)
        for half in halves[: len(halves) - MAX_OPEN * 9 // 10]:
            self.stats.evicted += 1
            self._close(half, half.conn.last_ts, "evicted")
