"""Which protocol a connection speaks: its port first, then its first bytes.

As in Wireshark's dissector tables, every protocol pwcap knows is registered once, in
:data:`PROTOCOLS`, with its well-known ports, a content test and the decoder to create.
A connection on a decoded protocol's port (or a port the user named with ``--pulsar-port``
/ ``--kafka07-port``) is decided at once. Any other connection is held back while its first
bytes are buffered (at most :data:`SNIFF_LIMIT` per direction, and :data:`SNIFF_TOTAL` for
all such connections together) and offered to each content test in turn; the buffered
events are then replayed into the chosen decoder, so nothing seen before the decision is
lost. TLS is recognised by content only (a ClientHello, or any record when the capture
began after the handshake), on any port: the dispatcher puts :mod:`pwcap.decode.tls` in
front of the detection of its plaintext. Its usual port (6651) decides nothing, since
plaintext Pulsar runs there too when 6650 is taken.
"""

from __future__ import annotations

import importlib
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass

from ..capture.events import ClientBy, Connection, Direction
from . import kafka07, pulsar, tls
from .api import ConnectionDecoder, DecodeOptions, DecoderFactory, FlipRoles, RowSink

SNIFF_LIMIT = 256 * 1024  # bytes of one direction examined before giving up on content
# What one buffered event costs beside its bytes, counted toward the limits: a capture of
# headers alone (a short snaplen) delivers gaps and never a byte.
EVENT_BYTES = 128
SNIFF_TOTAL = 32 << 20  # what the sniffers of all undecided connections hold together

# (data from the start of a stream or after a gap, sent by the client?, max frame size)
Sniff = Callable[[bytes, bool, int], bool]


def _tls(data: bytes, from_client: bool, max_frame_size: int) -> bool:
    """A ClientHello from the client, or any TLS record header (a capture may start after
    the handshake): a ClientHello is what tells the roles when no SYN did."""
    if tls.looks_like_client_hello(data):
        return from_client
    return tls.looks_like_record(data)


def _pulsar(data: bytes, from_client: bool, max_frame_size: int) -> bool:
    """Both directions share one framing; a capture may start mid-frame."""
    return pulsar.sniff(data, max_frame_size) or pulsar.contains_frame(data, max_frame_size)


def _kafka07(data: bytes, from_client: bool, max_frame_size: int) -> bool:
    """Requests flow client to broker, responses back; a capture may start mid-frame."""
    if from_client:
        found = kafka07.looks_like_request(data, max_frame_size)
        return found or kafka07.find_request_start(data, 0, max_frame_size).confirmed
    found = kafka07.looks_like_response(data, max_frame_size)
    return found or kafka07.find_response_start(data, 0, max_frame_size).confirmed


class _Imported:
    """A decoder class named by its module (relative to this package), imported when its
    first connection starts: a capture of one protocol never pays for loading another's
    decoder at its start."""

    def __init__(self, module: str, name: str) -> None:
        self._module = module
        self._name = name
        self._factory: DecoderFactory | None = None

    def __call__(
        self, conn: Connection, sink: RowSink, options: DecodeOptions, flip_roles: FlipRoles
    ) -> ConnectionDecoder:
        if self._factory is None:
            self._factory = getattr(importlib.import_module(self._module, __package__), self._name)
        return self._factory(conn, sink, options, flip_roles)


@dataclass(frozen=True, slots=True)
class Protocol:
    """One registered protocol; ``factory`` None means recognised, not decoded itself
    (TLS: a transform in front of the detection of its plaintext)."""

    name: str
    ports: frozenset[int]
    factory: DecoderFactory | None
    sniff: Sniff
    directional: bool  # the content test tells client bytes from broker bytes


# Content tests run in this order: the most specific first.
PROTOCOLS: tuple[Protocol, ...] = (
    Protocol("tls", frozenset(), None, _tls, True),
    Protocol(
        "pulsar",
        frozenset({6650}),
        _Imported(".pulsar.decoder", "PulsarDecoder"),
        _pulsar,
        False,
    ),
    Protocol(
        "kafka07",
        frozenset({9092}),
        _Imported(".kafka07.decoder", "Kafka07Decoder"),
        _kafka07,
        True,
    ),
)
BY_NAME = {protocol.name: protocol for protocol in PROTOCOLS}
UNKNOWN = "unknown"


@dataclass(frozen=True, slots=True)
class Decision:
    """What content detection concluded; ``reversed`` when the capture's roles were wrong."""

    protocol: Protocol | None  # None: unknown
    reversed: bool = False


class Registry:
    """The port table of one run: the registered ports plus the user's hints."""

    def __init__(self, hints: Mapping[str, Iterable[int]] | None = None) -> None:
        ports: dict[int, Protocol] = {}
        for protocol in PROTOCOLS:
            ports.update(dict.fromkeys(protocol.ports, protocol))
        for name, hinted in (hints or {}).items():  # a hint overrides a registered port
            ports.update(dict.fromkeys(hinted, BY_NAME[name]))
        self.ports = ports

    @property
    def server_ports(self) -> frozenset[int]:
        """Ports that mark the server side when reassembly saw no handshake."""
        return frozenset(self.ports)

    def by_port(self, conn: Connection) -> Protocol | None:
        protocol = self.ports.get(conn.server_port)
        if protocol is None and conn.client_by != ClientBy.SYN:
            protocol = self.ports.get(conn.client_port)
        return protocol


class Sniffer:
    """Buffers one undecided connection's first events until its content decides.

    What it holds is bounded per direction (:data:`SNIFF_LIMIT`, counting each event's
    :data:`EVENT_BYTES` too) and, through :attr:`held`, by whoever runs many sniffers.
    """

    def __init__(self, conn: Connection, max_frame_size: int, limit: int = SNIFF_LIMIT) -> None:
        self._conn = conn
        self._max_frame = max_frame_size
        self._limit = limit
        self.events: list[tuple] = []  # ("data"|"gap", direction, ts, offset, data|size)
        self.held = 0  # bytes and events buffered, as the limits count them
        self._since_gap: list[list[bytes]] = [[], []]  # contiguous bytes per direction
        self._sizes = [0, 0]  # what each direction holds, as the limit counts it
        self._contiguous = [0, 0]  # bytes in _since_gap, per direction
        self._tested = [0, 0]  # contiguous bytes at the last content test, per direction

    def on_data(self, direction: Direction, ts: int, offset: int, data: bytes) -> Decision | None:
        """Buffer the bytes; a decision once one test accepts them or the limit is passed."""
        self.events.append(("data", direction, ts, offset, data))
        self._since_gap[direction].append(data)
        self._count(direction, len(data) + EVENT_BYTES)
        self._contiguous[direction] += len(data)
        at_limit = self._sizes[direction] >= self._limit
        # Tested again only once the bytes have doubled: a stream fed a byte at a time
        # costs a linear amount of testing, not a test of the whole buffer per byte.
        if self._contiguous[direction] < 2 * self._tested[direction] and not at_limit:
            return None
        decision = self._test_since_gap(direction)
        if decision is None and at_limit:
            return Decision(None)
        return decision

    def on_gap(self, direction: Direction, ts: int, offset: int, size: int) -> Decision | None:
        """Buffer the gap; unknown once the direction's events reach the limit."""
        self.events.append(("gap", direction, ts, offset, size))
        self._since_gap[direction] = []
        self._contiguous[direction] = self._tested[direction] = 0
        self._count(direction, EVENT_BYTES)
        return Decision(None) if self._sizes[direction] >= self._limit else None

    def give_up(self) -> Decision:
        """A decision now, from the bytes buffered so far (memory is short)."""
        for direction in Direction:
            if self._contiguous[direction] > self._tested[direction]:
                decision = self._test_since_gap(direction)
                if decision is not None:
                    return decision
        return Decision(None)

    def _count(self, direction: Direction, cost: int) -> None:
        self._sizes[direction] += cost
        self.held += cost

    def _test_since_gap(self, direction: Direction) -> Decision | None:
        """Test the direction's bytes since its last gap (joined for the test only: the
        events keep the pieces, and a second copy would double what a sniffer holds)."""
        pieces = self._since_gap[direction]
        buffered = b"".join(pieces) if len(pieces) > 1 else pieces[0]
        self._tested[direction] = len(buffered)
        return self._test(buffered, direction)

    def _test(self, data: bytes, direction: Direction) -> Decision | None:
        from_client = direction == Direction.C2B
        for protocol in PROTOCOLS:
            if protocol.sniff(data, from_client, self._max_frame):
                return Decision(protocol)
        if self._conn.client_by == ClientBy.SYN:
            return None
        for protocol in PROTOCOLS:  # without the handshake, the roles may be the wrong way
            if protocol.directional and protocol.sniff(data, not from_client, self._max_frame):
                return Decision(protocol, reversed=True)
        return None
