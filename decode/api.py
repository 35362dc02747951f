"""The contract between per-connection protocol decoders and the tables they fill.

A decoder is created for one TCP connection once its protocol is known, is fed that
connection's reassembled byte stream (exactly the :class:`pwcap.capture.events.StreamSink`
calls, minus the connection argument) and builds rows in a :class:`RowSink`. It never
opens files or sockets, so tests, the CLI and a Spark task drive it the same way.

A row is built in its table's :class:`~pwcap.tables.columns.ColumnBuffer`, column by
column (a column is named by its position in :mod:`pwcap.tables.schema`); a column left
unset is null. Timestamps are integer microseconds since the epoch.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from typing import Protocol

from ..capture.events import Connection, Direction
from ..tables.columns import RowSink  # where decoders build rows: kept with the tables
from ..tables.schema import Row
from . import MAX_FRAME_SIZE

# The columns of its frame that every `messages` row repeats, whatever the protocol.
FRAME_OF_MESSAGE = ("ts", "capture", "conn_id", "direction", "protocol", "stream_offset", "command")

MAX_PENDING_TOTAL = 64 << 20  # bytes of incomplete frames all connections hold together


class FrameHolder(Protocol):
    def give_up(self) -> None:
        """Drop the incomplete frame held (reported as lost) and skip the rest of it."""


class FrameBudget:
    """The bytes of incomplete frames that the frame streams of one capture hold together.

    A frame may be as long as the frame limit and thousands of connections may each be in
    the middle of one: past :attr:`limit`, the streams holding most give their frames up,
    until a quarter of the budget is free again (so the next relief is that far away).
    """

    __slots__ = ("_holders", "limit", "total")

    def __init__(self, limit: int = MAX_PENDING_TOTAL) -> None:
        self.limit = limit
        self.total = 0
        self._holders: dict[FrameHolder, int] = {}

    def hold(self, stream: FrameHolder, size: int) -> None:
        """``stream`` now holds ``size`` bytes of an incomplete frame."""
        self.total += size - self._holders.pop(stream, 0)
        if size:
            self._holders[stream] = size
        if self.total > self.limit:
            holders = self._holders
            for largest in sorted(holders, key=holders.__getitem__, reverse=True):
                if self.total <= self.limit * 3 // 4:
                    break
                largest.give_up()


@dataclass(frozen=True, slots=True)
class DecodeOptions:
    """What one run decides, from the command line down to every decoder; the driver sets
    ``capture`` for each capture it decodes and gives each its own ``frames`` budget (the
    one its connections' frame streams share)."""

    capture: str = ""  # the capture file's name, copied onto every row
    max_frame_size: int = MAX_FRAME_SIZE
    payloads: bool = False  # write application payload bytes into `messages.payload`
    max_decompressed_size: int = 64 * 1024 * 1024  # decompression-bomb guard, per entry
    frames: FrameBudget = field(default_factory=FrameBudget, compare=False)
    hints: Mapping[str, Iterable[int]] = field(default_factory=dict)  # protocol -> ports
    vxlan_ports: tuple[int, ...] = ()  # UDP ports that carry VXLAN besides 4789 and 8472
    series: bool = False  # every input file is a part of one rotated series
    tls_keylogs: tuple[str, ...] = ()  # NSS key log files: TLS sessions' secrets


# What a decoder calls, once, when the content proves the connection's roles the other way
# round from reassembly's choice (possible only without the handshake): from the next
# delivery on, directions follow the corrected roles.
FlipRoles = Callable[[], None]


class ConnectionDecoder(Protocol):
    """One connection's protocol state machine."""

    protocol: str  # the `protocol` column value: "pulsar" or "kafka07"

    def on_data(self, direction: Direction, ts: int, offset: int, data: bytes) -> None: ...

    def on_gap(self, direction: Direction, ts: int, offset: int, size: int) -> None: ...

    def on_close(self, ts: int) -> None:
        """End of stream: report frames left incomplete as anomalies."""

    def connection_fields(self) -> Row:
        """Columns of the `connections` row this decoder learned (versions, auth method...)."""


class DecoderFactory(Protocol):
    def __call__(
        self, conn: Connection, sink: RowSink, options: DecodeOptions, flip_roles: FlipRoles
    ) -> ConnectionDecoder: ...
