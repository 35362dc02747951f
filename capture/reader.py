"""Drive parsing and reassembly over a whole capture, or record by record."""

from __future__ import annotations

import os
from collections.abc import Iterable
from typing import BinaryIO

from pwcap.capture.events import StreamSink
from pwcap.capture.packets import PacketParser
from pwcap.capture.reassembly import Reassembler
from pwcap.capture.records import CaptureError, iter_records, open_capture
from pwcap.capture.shares import FlowShare
from pwcap.capture.stats import CaptureStats


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
    ) -> None:
        self.stats = stats if stats is not None else CaptureStats()
        # Per-record counters (parse, damage) go to one share only: every share sees them.
        counted = share is None or share.counts_records
        self.record_stats = self.stats if counted else CaptureStats()
        self._parse = PacketParser(self.record_stats).parse
        self._reassembler = Reassembler(sink, self.stats, server_ports, scope)
        segment = self._reassembler.segment
        self._segment = segment if share is None else share.only_kept(segment)

    def feed(self, ts: int, linktype: int, data: memoryview | bytes, orig_len: int) -> None:
        """One capture record: ``ts`` in microseconds, ``data`` as captured."""
        self.record_stats.records += 1
        self.record_stats.record_bytes += len(data)
        segment = self._parse(linktype, memoryview(data), orig_len)
        if segment is not None:
            self._segment(ts, *segment)

    def feed_records(self, records: Iterable[tuple[int, int, memoryview, int]]) -> None:
        """Many records: the same as :meth:`feed` on each, with less overhead per record."""
        stats = self.record_stats
        parse = self._parse
        segment = self._segment
        count = size = 0
        try:
            for ts, linktype, data, orig_len in records:
                count += 1
                size += len(data)
                parsed = parse(linktype, data, orig_len)
                if parsed is not None:
                    segment(ts, *parsed)
        finally:
            stats.records += count
            stats.record_bytes += size

    def finish(self) -> CaptureStats:
        """The input ended: declare what is still missing and close every connection."""
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
) -> CaptureStats:
    """Feed ``sink`` every TCP stream of a pcap / pcapng capture (gzip or not), or of a
    list of captures one tcpdump run wrote in turn (``-C``/``-G`` rotations), read as one
    timeline: a connection that goes on in the next file is the same connection.

    Raises :class:`CaptureError` with a one-line reason for input that is not a capture;
    for a capture cut off mid-record, only after everything before the cut was delivered
    and every connection closed (``end_of_capture``). Pass ``stats`` to keep the counters
    of a run that ends in an error. ``scope`` (the capture's name in the dataset) makes
    the connection ids unique to this capture. ``share`` keeps only that share's
    connections (one of several workers reading the same capture).
    """
    reader = RecordReader(sink, server_ports, stats, scope, share)
    try:
        for one in source if isinstance(source, list) else [source]:
            stream, name = open_capture(one)
            try:
                reader.feed_records(iter_records(stream, name, reader.record_stats))
            finally:
                if stream is not one:
                    stream.close()
    except CaptureError:
        reader.finish()
        raise
    return reader.finish()
