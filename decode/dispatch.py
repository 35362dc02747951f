"""The connection dispatcher: the :class:`pwcap.capture.events.StreamSink` between
reassembly and the protocol decoders.

It picks each connection's decoder through the :mod:`pwcap.decode.registry` (by port, or
by content after buffering the first bytes), reports every gap in a decoded stream as an
``anomalies`` row (the decoders only resynchronise after one), and writes the
``connections`` row when a connection ends. A connection whose client opens with a
ClientHello (whatever its port) gets a :class:`pwcap.decode.tls.stream.TlsStream` in
front: its plaintext is then detected and decoded as a plaintext connection's bytes are.
:mod:`pwcap.decode.driver` runs it over a capture.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable
from functools import partial
from typing import Any

import cython

from ..capture.events import ClientBy, Connection, Direction
from ..capture.reassembly import MAX_OPEN
from ..capture.tcpflow import tcp_columns
from .api import ConnectionDecoder, DecodeOptions, Row, RowSink
from .registry import SNIFF_TOTAL, UNKNOWN, Decision, Protocol, Registry, Sniffer
from .tls import looks_like_client_hello
from .tls.keys import Secrets
from .tls.stream import TlsStream

TLS = "tls"

CHECK_EVERY = 64  # deliveries (``on_data`` calls) between two calls of ``after_data``
_CLIENT_BY = {ClientBy.SYN: "syn", ClientBy.PORT: "port", ClientBy.GUESS: "guess"}


class _Tracked:
    """A connection's state here: undecided (sniffer), decoded (decoder) or neither."""

    __slots__ = (
        "anomalies",
        "conn",
        "decoder",
        "gaps",
        "midstream",
        "protocol",
        "sniff_cut",
        "sniffer",
        "tls",
    )

    def __init__(self, conn: Connection) -> None:
        self.conn = conn
        self.protocol = UNKNOWN
        self.decoder: ConnectionDecoder | None = None
        self.sniffer: Sniffer | None = None
        self.sniff_cut = False  # undecided when the sniffers' memory budget ran out
        # The TLS transform its bytes go through first; the decoder or sniffer then reads
        # the plaintext (TlsStream.data_out), not reassembly's bytes.
        self.tls: TlsStream | None = None
        self.anomalies = 0  # rows the dispatcher itself wrote (gaps...)
        self.midstream = conn.client_by != ClientBy.SYN  # no handshake: joined late
        # Gaps (direction, ts, offset, size) met while sniffing: which protocol lost the
        # bytes is known only once the content decides; never written if it does not.
        self.gaps: list[tuple[Direction, int, int, int]] = []


@cython.cclass
class Dispatcher:
    """The StreamSink of one capture: detection, decoding and the `connections` rows.

    Compiled, its attributes are C fields: every delivery reads several of them."""

    _rows = cython.declare(object)
    _connection = cython.declare(object)
    _registry = cython.declare(object)
    _options = cython.declare(object)
    _after_data = cython.declare(object)
    _countdown = cython.declare(cython.Py_ssize_t)
    _tracked = cython.declare(dict)
    _feed = cython.declare(dict)
    _sniffing = cython.declare(dict)
    _sniffed = cython.declare(object, visibility="readonly")
    events = cython.declare(object, visibility="readonly")
    last_ts = cython.declare(object, visibility="readonly")
    connections = cython.declare(object, visibility="readonly")
    _closed_bytes = cython.declare(object)
    _secrets = cython.declare(object)
    tls = cython.declare(object, visibility="readonly")

    def __init__(
        self,
        rows: RowSink,
        connection: Callable[[Row], None],
        registry: Registry,
        options: DecodeOptions,
        after_data: Callable[[], None] = lambda: None,
        secrets: Secrets | None = None,
    ) -> None:
        self._rows = rows
        self._connection = connection
        self._registry = registry
        self._options = options
        self._after_data = after_data  # called every CHECK_EVERY deliveries: progress
        self._countdown = CHECK_EVERY
        self._tracked = {}  # conn_id -> its _Tracked
        # conn_id -> the callable that takes this connection's bytes (the hot path)
        self._feed = {}
        # Connections whose content is still undecided (conn_id -> _Tracked), and what
        # their sniffers hold
        self._sniffing = {}
        self._sniffed = 0
        self.events = 0  # stream events received: none means the file gave nothing
        self.last_ts = 0
        self.connections = Counter()  # connections closed, by protocol
        self._closed_bytes = 0
        self._secrets = secrets if secrets is not None else Secrets()  # TLS sessions' keys
        self.tls = Counter()  # TLS connections closed, by outcome (decrypted or why not)

    # -- StreamSink ----------------------------------------------------------------------

    def on_open(self, conn: Connection) -> None:
        self.events += 1
        tracked = _Tracked(conn)
        self._tracked[conn.conn_id] = tracked
        protocol = self._registry.by_port(conn)
        if protocol is None:
            self._sniff_content(tracked)
        else:
            self._start(tracked, protocol)
            if tracked.decoder is not None:  # unless its client opens with a ClientHello
                self._feed[conn.conn_id] = self._first_bytes(tracked)

    def _sniff_content(self, tracked: _Tracked) -> None:
        """The connection's protocol is for its first bytes (or plaintext) to tell."""
        tracked.sniffer = Sniffer(tracked.conn, self._options.max_frame_size)
        self._sniffing[tracked.conn.conn_id] = tracked
        self._route(tracked, self._sniff_data(tracked))

    def _route(self, tracked: _Tracked, feed: Callable[[Direction, int, int, bytes], None]) -> None:
        """Where the connection's stream bytes go: its plaintext's, for TLS."""
        if tracked.tls is not None:
            tracked.tls.data_out = feed
        else:
            self._feed[tracked.conn.conn_id] = feed

    def _first_bytes(self, tracked: _Tracked) -> Callable[[Direction, int, int, bytes], None]:
        """The feed of a connection decided by its port, for its first bytes: a client
        opening with a ClientHello puts TLS in front of the decoder."""

        def feed(direction: Direction, ts: int, offset: int, data: bytes) -> None:
            decoder = tracked.decoder
            assert decoder is not None
            if direction == Direction.C2B and looks_like_client_hello(data):
                self._start_tls(tracked)
                tracked.tls.data_out = decoder.on_data
                tracked.tls.on_data(direction, ts, offset, data)
            else:
                self._feed[tracked.conn.conn_id] = decoder.on_data
                decoder.on_data(direction, ts, offset, data)

        return feed

    def on_data(
        self, conn: Connection, direction: Direction, ts: int, offset: int, data: bytes
    ) -> None:
        self._feed[conn.conn_id](direction, ts, offset, data)
        self._countdown -= 1
        if not self._countdown:
            self._countdown = CHECK_EVERY
            self._after_data()

    def on_gap(
        self, conn: Connection, direction: Direction, ts: int, offset: int, size: int
    ) -> None:
        self.events += 1
        tracked = self._tracked[conn.conn_id]
        if tracked.tls is not None:  # it says what the loss cost, and tells the plaintext
            tracked.tls.on_gap(direction, ts, offset, size)
            return
        sniffer = tracked.sniffer
        if sniffer is not None:
            tracked.gaps.append((direction, ts, offset, size))
            self._sniff(tracked, sniffer, sniffer.on_gap, direction, ts, offset, size)
        elif tracked.decoder is not None:
            self._gap_row(tracked, direction, ts, offset, size)
            tracked.decoder.on_gap(direction, ts, offset, size)
        # else unknown: a loss there is no decoding problem

    def _plain_gap(
        self, tracked: _Tracked, direction: Direction, ts: int, offset: int, size: int
    ) -> None:
        """Plaintext lost in a TLS stream (its own anomaly row already says how)."""
        sniffer = tracked.sniffer
        if sniffer is not None:
            self._sniff(tracked, sniffer, sniffer.on_gap, direction, ts, offset, size)
        elif tracked.decoder is not None:
            tracked.decoder.on_gap(direction, ts, offset, size)

    def _gap_row(
        self, tracked: _Tracked, direction: Direction, ts: int, offset: int, size: int
    ) -> None:
        detail = f"{size} bytes missing from the capture"
        self._anomaly(tracked, direction, ts, offset, size, "gap", detail)

    def _anomaly(
        self,
        tracked: _Tracked,
        direction: Direction | None,
        ts: int,
        offset: int | None,
        size: int | None,
        kind: str,
        detail: str,
    ) -> None:
        """An ``anomalies`` row the dispatcher itself finds, counted on its connection."""
        tracked.anomalies += 1
        self._rows.anomalies.add(
            {
                "ts": ts,
                "capture": self._options.capture,
                "conn_id": tracked.conn.conn_id,
                "direction": None if direction is None else direction.label,
                "protocol": tracked.protocol,
                "kind": kind,
                "stream_offset": offset,
                "size": size,
                "detail": detail,
            }
        )

    def _connection_anomalies(self, tracked: _Tracked, ts: int, reason: str) -> None:
        """What a connection's row alone would not say: closed early to bound memory,
        bytes nothing decoded, streams the capture joined late."""
        conn = tracked.conn
        if reason == "evicted":
            detail = (
                f"closed while open: {MAX_OPEN} connections were open at once and this one"
                " had been idle longest; what it carries later is another connection"
            )
            self._anomaly(tracked, None, ts, None, None, "evicted", detail)
        if tracked.tls is not None and tracked.tls.outcome != "decrypted":
            return  # the TLS anomalies say why nothing was decoded
        if tracked.decoder is None:
            if sum(conn.bytes):
                why = (
                    "encrypted (TLS)"
                    if tracked.protocol != UNKNOWN
                    else "no protocol pwcap decodes was recognised in its bytes"
                )
                if tracked.sniff_cut:
                    why += (
                        " (recognition stopped early: the connections still undecided held"
                        " more of their first bytes than the memory budget allows)"
                    )
                detail = f"{sum(conn.bytes)} bytes not decoded: {why}"
                self._anomaly(
                    tracked, None, conn.first_ts, None, sum(conn.bytes), "not_decoded", detail
                )
            elif sum(conn.gap_bytes):  # it spoke, but the capture kept none of its bytes
                missing = sum(conn.gap_bytes)
                detail = (
                    f"{missing} bytes not decoded: none of them is in the capture (a snaplen"
                    " that keeps the headers alone?)"
                )
                self._anomaly(tracked, None, conn.first_ts, None, missing, "not_decoded", detail)
            return
        if tracked.midstream:
            for direction in Direction:
                if conn.bytes[direction]:
                    detail = "the capture began after this stream did: its first bytes are unknown"
                    self._anomaly(tracked, direction, conn.first_ts, 0, None, "midstream", detail)

    def on_close(self, conn: Connection, ts: int, reason: str) -> None:
        self.events += 1
        tracked = self._tracked.pop(conn.conn_id)
        del self._feed[conn.conn_id]
        tls = tracked.tls
        if tls is not None:
            tls.on_close(ts)  # first: what it lost reaches the decoder before its end
            self.tls[tls.outcome] += 1
        if tracked.sniffer is not None:  # never decided: not a protocol we know
            self._stop_sniffing(tracked)
            tracked.protocol = UNKNOWN
        if tls is not None and not tls.plaintext:
            tracked.protocol = TLS  # nothing decrypted: TLS is all it is known to be
        fields: Row = {}
        if tracked.decoder is not None:
            tracked.decoder.on_close(ts)
            fields = tracked.decoder.connection_fields()
        if tls is not None:
            fields = {**fields, **tls.connection_fields()}
        self._connection_anomalies(tracked, ts, reason)
        self.last_ts = max(self.last_ts, ts)
        self._closed_bytes += sum(conn.bytes)
        self._connection(self._connection_row(tracked, fields, ts, reason))
        tracked.tls = None  # its callbacks hold this _Tracked: no cycle outlives the close
        self.connections[tracked.protocol] += 1

    # -- after the capture -----------------------------------------------------------------

    def close_all(self, reason: str) -> None:
        """End the connections reassembly left open (a capture that stopped abruptly)."""
        for tracked in list(self._tracked.values()):
            conn = tracked.conn
            self.on_close(conn, conn.last_ts or self.last_ts or conn.first_ts, reason)

    def open_connections(self) -> int:
        return len(self._tracked)

    def stream_bytes(self) -> int:
        """Stream bytes delivered so far (a capture's progress, short of its headers)."""
        return self._closed_bytes + sum(sum(t.conn.bytes) for t in self._tracked.values())

    # -- detection ---------------------------------------------------------------------------

    def _sniff_data(self, tracked: _Tracked) -> Callable[[Direction, int, int, bytes], None]:
        def feed(direction: Direction, ts: int, offset: int, data: bytes) -> None:
            sniffer = tracked.sniffer
            assert sniffer is not None
            self._sniff(tracked, sniffer, sniffer.on_data, direction, ts, offset, data)

        return feed

    def _sniff(
        self,
        tracked: _Tracked,
        sniffer: Sniffer,
        event: Callable[[Direction, int, int, Any], Decision | None],
        direction: Direction,
        ts: int,
        offset: int,
        value: bytes | int,
    ) -> None:
        """One event (data or a gap's size) into ``sniffer``: what it holds is counted
        toward the sniffers' budget, and its decision acted on."""
        held = sniffer.held
        decision = event(direction, ts, offset, value)
        self._sniffed += sniffer.held - held
        if decision is not None:
            self._decide(tracked, decision)
        if self._sniffed > SNIFF_TOTAL:
            self._relieve_sniffing()

    def _relieve_sniffing(self) -> None:
        """The undecided connections hold more than the budget: those holding most decide
        now from what they have, until a quarter of the budget is free again."""
        for tracked in sorted(self._sniffing.values(), key=_sniffer_held, reverse=True):
            if self._sniffed <= SNIFF_TOTAL * 3 // 4:
                break
            assert tracked.sniffer is not None
            decision = tracked.sniffer.give_up()
            tracked.sniff_cut = decision.protocol is None
            self._decide(tracked, decision)

    def _stop_sniffing(self, tracked: _Tracked) -> Sniffer:
        sniffer = tracked.sniffer
        assert sniffer is not None
        tracked.sniffer = None
        del self._sniffing[tracked.conn.conn_id]
        self._sniffed -= sniffer.held
        return sniffer

    def _decide(self, tracked: _Tracked, decision: Decision) -> None:
        sniffer = self._stop_sniffing(tracked)
        gaps, tracked.gaps = tracked.gaps, []
        protocol = decision.protocol
        if tracked.tls is not None and (
            decision.reversed or protocol is None or protocol.name == TLS
        ):
            protocol = None  # plaintext of TLS: its handshake told the roles; no TLS in TLS
        if protocol is None:
            tracked.protocol = UNKNOWN
            self._route(tracked, _ignore)
            return
        if decision.reversed:
            tracked.conn.flip()
        if protocol.name == TLS:
            decoder = self._start_tls(tracked)
        else:
            self._start(tracked, protocol)
            decoder = tracked.decoder
            if decoder is None:
                return
            for direction, ts, offset, size in gaps:
                if decision.reversed:
                    direction = Direction(1 - direction)
                self._gap_row(tracked, direction, ts, offset, size)
        for kind, direction, ts, offset, value in sniffer.events:
            if decision.reversed:
                direction = Direction(1 - direction)
            if kind == "data":
                decoder.on_data(direction, ts, offset, value)
            else:
                decoder.on_gap(direction, ts, offset, value)

    def _start(self, tracked: _Tracked, protocol: Protocol) -> None:
        tracked.protocol = protocol.name
        if protocol.factory is None:  # recognised, not decodable
            self._route(tracked, _ignore)
            return
        # The roles are the other way round when the decoder says so: the connection
        # records it, and reassembly labels its later bytes by it. (Its own method, not
        # one of this connection's _Tracked, which holds the decoder: no reference cycle.)
        # Under TLS the handshake told the roles.
        flip = tracked.conn.flip if tracked.tls is None else _keep_roles
        decoder = protocol.factory(tracked.conn, self._rows, self._options, flip)
        tracked.decoder = decoder
        self._route(tracked, decoder.on_data)

    def _start_tls(self, tracked: _Tracked) -> TlsStream:
        """TLS in front: reassembly's bytes go to the transform, its plaintext to the
        decoder the port names, else to content detection."""
        tls = TlsStream(
            self._secrets,
            _ignore,
            partial(self._plain_gap, tracked),
            partial(self._anomaly, tracked),
        )
        tracked.tls = tls
        self._feed[tracked.conn.conn_id] = tls.on_data
        if tracked.decoder is None:
            tracked.protocol = TLS  # until its plaintext tells more
            protocol = self._registry.by_port(tracked.conn)
            if protocol is not None and protocol.factory is not None:
                self._start(tracked, protocol)
            else:
                self._sniff_content(tracked)
        return tls

    # -- rows ----------------------------------------------------------------------------------

    def _connection_row(self, tracked: _Tracked, fields: Row, ts: int, reason: str) -> Row:
        conn = tracked.conn
        row: Row = {
            "conn_id": conn.conn_id,
            "capture": self._options.capture,
            "protocol": tracked.protocol,
            "client_ip": conn.client_ip,
            "client_port": conn.client_port,
            "server_ip": conn.server_ip,
            "server_port": conn.server_port,
            "encapsulation": conn.encapsulation,
            "client_by": "content" if conn.flipped else _CLIENT_BY[conn.client_by],
            "first_ts": conn.first_ts,
            "last_ts": max(conn.last_ts, ts) if conn.last_ts else ts,
            "bytes_c2b": conn.bytes[Direction.C2B],
            "bytes_b2c": conn.bytes[Direction.B2C],
            "frames_c2b": 0,
            "frames_b2c": 0,
            "gaps": conn.gaps,
            "gap_bytes": sum(conn.gap_bytes),
            "close_reason": reason,
            "midstream": tracked.midstream,
            "flipped": conn.flipped,
        }
        if conn.tcp:
            row.update(tcp_columns(*conn.tcp))
        row.update(fields)
        row["anomalies"] = fields.get("anomalies", 0) + tracked.anomalies
        return row


def _sniffer_held(tracked: _Tracked) -> int:
    assert tracked.sniffer is not None
    return tracked.sniffer.held


def _ignore(direction: Direction, ts: int, offset: int, data: bytes) -> None:
    """Bytes of a connection that is not decoded (unknown protocol)."""


def _keep_roles() -> None:
    """A decoder of TLS plaintext may not turn the roles round: the handshake told them."""
