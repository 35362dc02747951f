"""What each side's TCP segments show of the transport itself, measured where the
capture was taken: round-trip times, advertised windows (zero windows: a receiver that
stopped reading its socket) and retransmissions.

Reassembly keeps a :class:`TcpSide` per direction of a connection and tells it of each
segment; the ``connections`` row carries the result (:func:`tcp_columns`). Everything is a
handful of C fields per side, whatever the connection's length: no per-segment memory.

Round trips are those of the path from the capture point to a side's peer and back:
a side's data segment (or SYN) to the first segment of the peer that acknowledges it.
One segment is timed at a time (as TCP itself times them, RFC 6298), and a sample whose
bytes were sent again is dropped (Karn's rule): which copy the ACK answers is unknown.
"""

from __future__ import annotations

import cython

BURST_US = cython.declare(cython.longlong, 1_000_000)  # retransmissions counted per second
NONE = cython.declare(cython.longlong, -1)


@cython.cclass
class TcpSide:
    """One direction of a connection, as its sender's segments show it. Its fields' C
    types are in ``tcpflow.pxd``; -1 stands for "not seen"."""

    def __init__(self) -> None:
        self.peer: TcpSide | None = None
        self.syn_ts = NONE  # this side's SYN (or SYN-ACK), until the peer answers it
        self.handshake_us = NONE  # that SYN to the peer's answer
        self.scale = NONE  # the window scale option of this side's SYN
        self.min_window = NONE  # the smallest window this side advertised, in bytes
        self.zero_windows = 0  # spans of zero window this side advertised
        self.zero_since = NONE  # start of the span under way
        self.zero_us = 0  # their total length
        self.longest_zero_us = NONE
        self.longest_zero_ts = NONE
        self.last_ts = NONE
        self.highest = NONE  # stream offset just past the highest byte this side sent
        self.timed_end = NONE  # the timed segment's end offset (NONE: none timed)
        self.timed_ts = 0
        self.rtt_samples = 0
        self.rtt_min_us = NONE
        self.rtt_max_us = NONE
        self.rtt_sum_us = 0
        self.retransmitted = 0  # segments carrying bytes the capture had seen already
        self.retransmitted_bytes = 0
        self.burst_ts = NONE  # start of the second of retransmissions under way
        self.burst = 0  # retransmissions in it
        self.worst_burst = 0  # the most in any second
        self.worst_burst_ts = NONE

    @cython.ccall
    @cython.returns(cython.void)
    @cython.locals(ts=cython.longlong, window=cython.longlong, syn=cython.bint, rst=cython.bint)
    @cython.locals(acks=cython.bint, scale=cython.long, scaled=cython.longlong)
    def segment(self, ts: int, window: int, syn: bool, rst: bool, acks: bool, scale: int) -> None:
        """A segment this side sent: its window, and whether it answers the peer's SYN."""
        self.last_ts = ts
        if acks and self.peer.syn_ts != NONE and self.peer.handshake_us == NONE:
            self.peer.handshake_us = ts - self.peer.syn_ts
        if syn:
            if self.handshake_us == NONE:
                self.syn_ts = ts  # a SYN sent again: the copy answered is the later one
            self.scale = scale
            return  # a SYN's window is never scaled, and a SYN is no zero-window report
        if rst:
            return
        scaled = window
        if self.scale > 0 and self.peer.scale >= 0:  # scaling holds when both SYNs offer it
            scaled = window << self.scale
        if self.min_window == NONE or scaled < self.min_window:
            self.min_window = scaled
        if window == 0:
            if self.zero_since == NONE:
                self.zero_since = ts
                self.zero_windows += 1
        elif self.zero_since != NONE:
            self._end_zero(ts)

    @cython.cfunc
    @cython.returns(cython.void)
    @cython.locals(ts=cython.longlong, span=cython.longlong)
    def _end_zero(self, ts: int) -> None:
        span = ts - self.zero_since
        self.zero_us += span
        if span > self.longest_zero_us:
            self.longest_zero_us = span
            self.longest_zero_ts = self.zero_since
        self.zero_since = NONE

    @cython.ccall
    @cython.returns(cython.void)
    @cython.locals(ts=cython.longlong, at=cython.longlong, end=cython.longlong)
    def data(self, ts: int, at: int, end: int) -> None:
        """Bytes ``at``..``end`` of this side's stream, as sent (new or not)."""
        if end > self.highest:
            if self.timed_end == NONE and at >= self.highest:
                self.timed_end = end  # new bytes, none timed: time these
                self.timed_ts = ts
            self.highest = end

    @cython.ccall
    @cython.returns(cython.void)
    @cython.locals(ts=cython.longlong, at=cython.longlong, size=cython.longlong)
    def resent(self, ts: int, at: int, size: int) -> None:
        """``size`` bytes at ``at`` the capture had already seen were sent again."""
        self.retransmitted += 1
        self.retransmitted_bytes += size
        if self.timed_end != NONE and at < self.timed_end:
            self.timed_end = NONE  # Karn: the ACK may answer either copy
        if self.burst_ts == NONE or ts - self.burst_ts >= BURST_US:
            self.burst_ts = ts
            self.burst = 0
        self.burst += 1
        if self.burst > self.worst_burst:
            self.worst_burst = self.burst
            self.worst_burst_ts = self.burst_ts

    @cython.ccall
    @cython.returns(cython.void)
    @cython.locals(ts=cython.longlong, upto=cython.longlong, rtt=cython.longlong)
    def acked(self, ts: int, upto: int) -> None:
        """The peer acknowledged every byte of this side before offset ``upto``."""
        if self.timed_end != NONE and upto >= self.timed_end:
            rtt = ts - self.timed_ts
            self.timed_end = NONE
            if rtt < 0:
                return  # a clock that ran backwards
            self.rtt_samples += 1
            self.rtt_sum_us += rtt
            if self.rtt_min_us == NONE or rtt < self.rtt_min_us:
                self.rtt_min_us = rtt
            if rtt > self.rtt_max_us:
                self.rtt_max_us = rtt

    def finish(self) -> None:
        """The connection ended: a zero window still open ends with its last segment."""
        if self.zero_since != NONE:
            self._end_zero(max(self.last_ts, self.zero_since))


# The ``connections`` columns each side fills, by the role of the side whose segments are
# measured: its peer's round trip, the windows it advertised, what it sent again.
SIDES = ("client", "broker")


# The column names, made once: a row is built at every connection's close.
_RTT_NAMES = tuple(
    tuple(
        f"tcp_rtt_{peer}_{what}"
        for what in ("handshake_us", "samples", "min_us", "mean_us", "max_us")
    )
    for peer in ("broker", "client")
)
_SIDE_NAMES = tuple(
    tuple(
        f"tcp_{what}_{name}"
        for what in (
            "window_scale",
            "min_window",
            "zero_windows",
            "zero_window_us",
            "longest_zero_window_us",
            "longest_zero_window_ts",
            "retransmissions",
            "retransmitted_bytes",
            "retransmission_burst",
            "retransmission_burst_ts",
        )
    )
    for name in SIDES
)


@cython.cfunc
@cython.inline
@cython.locals(number=cython.longlong)
def _value(number: int) -> object:
    return None if number == NONE else number


@cython.locals(side=TcpSide, names=tuple)
def tcp_columns(client: TcpSide, broker: TcpSide) -> dict[str, int | None]:
    """The TCP columns of a ``connections`` row (``tables/schema.py`` documents them)."""
    row: dict[str, int | None] = {}
    for side, names in ((client, _RTT_NAMES[0]), (broker, _RTT_NAMES[1])):
        side.finish()
        # The round trip a side's segments time is its peer's: the client's data, the broker.
        row[names[0]] = _value(side.handshake_us)
        row[names[1]] = side.rtt_samples
        row[names[2]] = _value(side.rtt_min_us)
        row[names[3]] = side.rtt_sum_us // side.rtt_samples if side.rtt_samples else None
        row[names[4]] = _value(side.rtt_max_us)
    for side, names in ((client, _SIDE_NAMES[0]), (broker, _SIDE_NAMES[1])):
        row[names[0]] = _value(side.scale)
        row[names[1]] = _value(side.min_window)
        row[names[2]] = side.zero_windows
        row[names[3]] = side.zero_us
        row[names[4]] = _value(side.longest_zero_us)
        row[names[5]] = _value(side.longest_zero_ts)
        row[names[6]] = side.retransmitted
        row[names[7]] = side.retransmitted_bytes
        row[names[8]] = side.worst_burst
        row[names[9]] = _value(side.worst_burst_ts)
    return row
