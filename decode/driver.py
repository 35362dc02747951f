"""The one decode driver: a capture through reassembly and the connection dispatcher into
a :class:`TableSink`, with the same end-of-capture rules for every caller.

:func:`decode_capture` is what ``pwcap decode`` (in this process or in ``--jobs``
workers), ``pwcap show`` and the Spark job's tasks each run per capture (or per flow-hash
share of one); :func:`decode_captures` runs it over many captures into one Parquet
dataset and returns a :class:`Summary`.
"""

from __future__ import annotations

import time
from collections import Counter
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import BinaryIO, Protocol

from ..capture import CaptureError, CaptureStats, read_streams
from ..capture.shares import FlowShare
from ..tables.dataset import DatasetWriter
from .api import DecodeOptions, FrameBudget, Row, RowSink
from .capture_anomalies import capture_anomalies
from .dispatch import Dispatcher
from .inputs import InputError, expand_inputs
from .registry import Registry
from .tls.keylog import KeyLog, KeyLogError, load
from .tls.keys import Secrets


class TableSink(Protocol):
    """Where a capture's rows go: the decoders' rows and the ``connections`` rows."""

    rows: RowSink

    def connection(self, row: Row) -> None: ...


class Capture(Protocol):
    """A capture to decode (:class:`pwcap.decode.inputs.CaptureInput` or a remote one)."""

    name: str  # the `capture` column
    size: int  # bytes, 0 when unknown

    @property
    def shown(self) -> str: ...

    def source(self) -> str | BinaryIO | list: ...


@dataclass
class CaptureResult:
    path: Path
    size: int
    seconds: float
    cut_off: str | None = None  # the reader's message when the capture ends mid-record
    stats: CaptureStats = field(default_factory=CaptureStats)  # what reassembly saw
    last_ts: int | None = None  # when its last connection ended
    connections: Counter[str] = field(default_factory=Counter)  # by protocol
    tls: Counter[str] = field(default_factory=Counter)  # TLS connections, by outcome


@dataclass
class Summary:
    """What one run decoded, for the closing report."""

    out: Path
    captures: list[CaptureResult]
    rows: dict[str, int]
    connections: Counter[str]  # by protocol
    commands: Counter[str | None]  # frames by command (None: unknown type)
    anomalies: Counter[str]  # by kind
    seconds: float
    skipped: list[tuple[Path, str]] = field(default_factory=list)  # not captures, and why
    removed: list[Path] = field(default_factory=list)  # left by interrupted runs, deleted
    keylog: KeyLog | None = None  # the key logs read (for their line counts)

    @property
    def tls(self) -> Counter[str]:
        """TLS connections by outcome: ``decrypted``, or why not."""
        total: Counter[str] = Counter()
        for capture in self.captures:
            total.update(capture.tls)
        return total

    @property
    def input_bytes(self) -> int:
        return sum(capture.size for capture in self.captures)

    def capture_totals(self) -> CaptureStats:
        """The reassembly counters of every capture, added up."""
        total = CaptureStats()
        for capture in self.captures:
            total.add(capture.stats)
        return total

    @property
    def cut_off(self) -> list[CaptureResult]:
        return [capture for capture in self.captures if capture.cut_off]


class Progress:
    """Where a run reports its progress; the default reports nothing."""

    def start(self, total_bytes: int) -> None: ...

    def capture(self, path: Path, done_bytes: int, position: Callable[[], int]) -> None:
        """A new capture begins; ``position()`` tells roughly how far into it the run is."""

    def tick(self) -> None: ...

    def finish(self) -> None: ...


def decode_captures(
    inputs: Iterable[str | Path],
    out: str | Path,
    options: DecodeOptions | None = None,
    overwrite: bool = False,
    progress: Progress | None = None,
) -> Summary:
    """Decode every capture into the dataset ``out``; raise :class:`InputError` early.

    A file that is not a capture stops the run before anything is written. A capture cut
    off mid-record keeps everything before the cut and is listed in ``Summary.cut_off``.
    """
    options = options or DecodeOptions()
    progress = progress or Progress()
    expanded = expand_inputs((str(p) for p in inputs), options.series)
    captures = expanded.captures
    keylog = load_keylog(options)
    started = time.perf_counter()
    results: list[CaptureResult] = []
    connections: Counter[str] = Counter()
    progress.start(sum(capture.size for capture in captures))
    with DatasetWriter(Path(out), overwrite=overwrite) as writer:
        done = 0
        for capture in captures:
            result = decode_capture(capture, writer, options, progress, done)
            results.append(result)
            connections.update(result.connections)
            done += capture.size
        progress.finish()
        rows = writer.row_counts()
        tables = writer.tables
        removed = writer.removed
    return Summary(
        out=Path(out),
        captures=results,
        rows=rows,
        connections=connections,
        commands=tables["frames"].counted,
        anomalies=tables["anomalies"].counted,
        seconds=time.perf_counter() - started,
        skipped=expanded.skipped,
        removed=removed,
        keylog=keylog,
    )


def load_keylog(options: DecodeOptions) -> KeyLog | None:
    """The run's key logs, read once per process; :class:`InputError` for one that
    cannot be read (before anything is written)."""
    if not options.tls_keylogs:
        return None
    try:
        return load(options.tls_keylogs)
    except KeyLogError as error:
        raise InputError(f"key log {error}") from None


def decode_capture(
    capture: Capture,
    sink: TableSink,
    options: DecodeOptions,
    progress: Progress | None = None,
    done: int = 0,
    share: FlowShare | None = None,
) -> CaptureResult:
    """One capture into ``sink``; :class:`InputError` when it is no capture at all.

    With a ``share``, only that share's connections, and no capture-wide rows: whoever
    gathers the shares writes those (:func:`capture_rows` of :func:`merge_shares`)."""
    progress = progress or Progress()
    registry = Registry(options.hints)
    # Its rows carry its name; its connections' incomplete frames share a budget of their own.
    options = replace(options, capture=capture.name, frames=FrameBudget(options.frames.limit))
    secrets = Secrets(load_keylog(options))  # with the capture's own, if it embeds some
    dispatcher = Dispatcher(sink.rows, sink.connection, registry, options, progress.tick, secrets)
    path = Path(capture.shown)
    progress.capture(path, done, dispatcher.stream_bytes)
    started = time.perf_counter()
    cut_off = None
    stats = CaptureStats()
    try:
        read_streams(
            capture.source(),
            dispatcher,
            server_ports=registry.server_ports,
            stats=stats,
            scope=capture.name,
            share=share,
            vxlan_ports=options.vxlan_ports,
            secrets=secrets.add_block,
        )
    except CaptureError as error:
        if dispatcher.events == 0 and dispatcher.open_connections() == 0 and not _is_cut(error):
            raise InputError(str(error)) from None  # the reader names the file
        cut_off = str(error)
    dispatcher.close_all("end_of_capture")
    result = CaptureResult(
        path,
        capture.size or stats.record_bytes,
        time.perf_counter() - started,
        cut_off,
        stats,
        dispatcher.last_ts or None,
        dispatcher.connections,
        dispatcher.tls,
    )
    if share is None:
        for row in capture_rows(capture.name, result):
            sink.rows.anomalies.add(row)
    return result


def capture_rows(name: str, result: CaptureResult) -> list[Row]:
    """The ``anomalies`` rows of a whole capture (damage the reader stepped over, a cut)."""
    rows = capture_anomalies(result.stats, name, result.last_ts)
    if result.cut_off is not None:
        rows.append(
            {
                "ts": result.last_ts,
                "capture": name,
                "kind": "truncated_capture",
                "detail": result.cut_off,
            }
        )
    return rows


def merge_shares(shares: list[CaptureResult]) -> CaptureResult:
    """One capture's result from its shares: counters added up (the per-record ones
    were counted by one share only), its end the latest of theirs."""
    first = shares[0]
    stats = CaptureStats()
    connections: Counter[str] = Counter()
    tls: Counter[str] = Counter()
    for result in shares:
        stats.add(result.stats)
        connections.update(result.connections)
        tls.update(result.tls)
    ends = [result.last_ts for result in shares if result.last_ts is not None]
    return CaptureResult(
        path=first.path,
        size=max(result.size for result in shares),
        seconds=max(result.seconds for result in shares),
        cut_off=first.cut_off,
        stats=stats,
        last_ts=max(ends) if ends else None,
        connections=connections,
        tls=tls,
    )


def _is_cut(error: CaptureError) -> bool:
    """Whether the reader says the file is a capture that ends early (not a non-capture)."""
    return bool(getattr(error, "truncated", False))
