# cython: annotation_typing=True
"""Drive parsing and reassembly over a whole capture, or record by record.

Compiled by Cython, a capture's records go from the record walk through the packet
parser into reassembly as C calls over the reader's chunk: no object is made for a
record, and none for a segment but its addresses and payload.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Iterable
from typing import BinaryIO

import cython

from .events import StreamSink
from .records import CaptureError, open_capture, walk_records
from .shares import FlowShare
from .stats import CaptureStats

if cython.compiled:  # the C declarations of the walk, the parser and reassembly (.pxd)
    from cython.cimports.pwcap.capture.packets import PacketParser
    from cython.cimports.pwcap.capture.reassembly import Reassembler
    from cython.cimports.pwcap.capture.records import RecordWalk
else:
    from .packets import PacketParser
    from .reassembly import Reassembler
    from .records import RecordWalk


class RecordReader:
    """Capture records in (parsed down to TCP segments), stream events out: what
    :func:`read_streams` feeds, and what callers that get records from elsewhere (a live
    feed) feed themselves."""

    def __init__(
        self,
        sink: StreamSink,
        server_ports: Iterable[int] = (),
        stats: CaptureStats | None = None,
        scope: str = "",
        share: FlowShare | None = None,
        vxlan_ports: Iterable[int] = (),
    ) -> None:
        self.stats = stats if stats is not None else CaptureStats()
        # Per-record counters (parse, damage) go to one share only: every share sees them.
        counted = share is None or share.counts_records
        self.record_stats = self.stats if counted else CaptureStats()
        self._parser = PacketParser(self.record_stats, vxlan_ports)
        self._reassembler = Reassembler(sink, self.stats, server_ports, scope)
        self._share = share

    def feed(self, ts: int, linktype: int, data: memoryview | bytes, orig_len: int) -> None:
        """One capture record: ``ts`` in microseconds, ``data`` as captured."""
        self.feed_records(((ts, linktype, data, orig_len),))

    def feed_records(self, records: Iterable[tuple[int, int, memoryview | bytes, int]]) -> None:
        """Many records: the same as :meth:`feed` on each."""
        count = size = 0
        try:
            for ts, linktype, data, orig_len in records:
                count += 1
                size += len(data)
                record = bytes(data)
                if self._parser.parse(record, 0, len(record), linktype, orig_len, ts):
                    _deliver(self._parser, self._reassembler, self._share, ts)
        finally:
            self.record_stats.records += count
            self.record_stats.record_bytes += size
            self._reassembler.count_segments()
            self._parser.count()

    def walk(self, records: RecordWalk) -> None:
        """Every record of a capture, parsed where the walk keeps it."""
        _walk(records, self._parser, self._reassembler, self._share, self.record_stats)

    def finish(self) -> CaptureStats:
        """The input ended: declare what is still missing and close every connection."""
        self._parser.finish()
        self._reassembler.finish()
        return self.stats


Source = str | os.PathLike[str] | BinaryIO | bytes


def read_streams(
    source: Source | list[Source],
    sink: StreamSink,
    server_ports: Iterable[int] = (),
    stats: CaptureStats | None = None,
    scope: str = "",
    share: FlowShare | None = None,
    vxlan_ports: Iterable[int] = (),
    secrets: Callable[[int, bytes], None] | None = None,
) -> CaptureStats:
    """Feed ``sink`` every TCP stream of a pcap / pcapng capture (gzip or not), or of a
    list of captures one tcpdump run wrote in turn (``-C``/``-G`` rotations), read as one
    timeline: a connection that goes on in the next file is the same connection.

    Raises :class:`CaptureError` with a one-line reason for input that is not a capture;
    for a capture cut off mid-record, only after everything before the cut was delivered
    and every connection closed (``end_of_capture``). Pass ``stats`` to keep the counters
    of a run that ends in an error. ``scope`` (the capture's name in the dataset) makes
    the connection ids unique to this capture. ``share`` keeps only that share's
    connections (one of several workers reading the same capture). ``vxlan_ports`` are
    UDP ports that carry VXLAN besides the usual ones. ``secrets`` is given the type and
    bytes of each pcapng Decryption Secrets Block, as the walk meets it.
    """
    reader = RecordReader(sink, server_ports, stats, scope, share, vxlan_ports)
    try:
        for one in source if isinstance(source, list) else [source]:
            stream, name = open_capture(one)
            try:
                walk = walk_records(stream, name, reader.record_stats)
                walk.on_secrets = secrets
                reader.walk(walk)
            finally:
                if stream is not one:
                    stream.close()
    except CaptureError:
        reader.finish()
        raise
    return reader.finish()


@cython.cfunc
def _walk(
    records: RecordWalk,
    parser: PacketParser,
    reassembler: Reassembler,
    share: FlowShare | None,
    stats: CaptureStats,
) -> cython.void:
    count: cython.longlong = 0
    size: cython.longlong = 0
    try:
        while records.next():
            count += 1
            size += records.stop - records.start
            if parser.parse(
                records.buf,
                records.start,
                records.stop,
                records.linktype,
                records.orig_len,
                records.ts,
            ):
                _deliver(parser, reassembler, share, records.ts)
    finally:
        stats.records += count
        stats.record_bytes += size
        reassembler.count_segments()
        parser.count()


@cython.cfunc
def _deliver(
    parser: PacketParser, reassembler: Reassembler, share: FlowShare | None, ts: cython.longlong
) -> cython.void:
    """The segment the parser found, to reassembly if it is of this reader's share."""
    if share is None or share.keeps(
        parser.src, parser.sport, parser.dst, parser.dport, parser.tunnel
    ):
        reassembler.segment(
            ts,
            parser.src,
            parser.sport,
            parser.dst,
            parser.dport,
            parser.seq,
            parser.ack,
            parser.flags,
            parser.payload,
            parser.cut,
            parser.window,
            parser.wscale,
            parser.tunnel,
        )
