"""What a Spark task runs: one capture (or a flow-hash share of one) decoded through the
one decode driver, its rows handed back as Arrow batches, each batch packed as one row
(Arrow's IPC format) so the JVM never handles a frame row."""

from __future__ import annotations

import json
import queue
import struct
import threading
from collections.abc import Callable, Iterator
from functools import partial
from pathlib import Path

import pyarrow as pa
from pyarrow import fs as pafs
from pyspark.sql import DataFrame, SparkSession

from ...capture import CaptureStats
from ...capture.shares import FlowShare
from ...tables.columns import ColumnBuffer, RowSink
from ...tables.dataset import (
    BATCH_BYTES,
    BATCH_ROWS,
)
from ...tables.schema import TABLES, Row, arrow_schema
from ..api import DecodeOptions
from ..driver import CaptureResult, decode_capture
from .listing import Listed

SPLIT_ABOVE = 1 << 30  # bytes of a capture above which its connections are shared by tasks
QUEUED_BATCHES = 8  # batches a task's decoder may run ahead of Spark (bounded memory)


class _RemoteCapture:
    """A listed capture as the decode driver takes one: a name and streams to read."""

    def __init__(self, listed: Listed) -> None:
        self.name = listed.name
        self.size = listed.size
        self.shown = listed.name
        filesystem, _ = pafs.FileSystem.from_uri(listed.filesystem)
        # streamed, never read whole
        self._streams = [_Named(filesystem.open_input_stream(path), path) for path in listed.paths]

    def source(self) -> list[_Named]:
        return self._streams

    def close(self) -> None:
        for stream in self._streams:
            stream.close()


class _Named:
    """A filesystem's stream under its path, which the reader's messages name (as they
    name a local file), where a pyarrow stream has no name of its own."""

    def __init__(self, stream: pa.NativeFile, name: str) -> None:
        self._stream = stream
        self.name = name

    def read(self, size: int = -1) -> bytes:
        return self._stream.read(size if size >= 0 else None)

    def close(self) -> None:
        self._stream.close()


# What the decoding tasks hand Spark: one row per batch of a table, the batch in Arrow's
# IPC format. Spark moves these few large rows (not one row per frame) to the tasks that
# write the tables; a share's capture result travels the same way, as JSON.
PACKED = pa.schema([("table", pa.string()), ("data", pa.binary())])
PACKED_DDL = "table string, data binary"
SHARE = "_share"  # the table name of a share's capture result
# LZ4: a batch of small frames packs to a small part of its size, for little CPU beside
# what its decoding took.
PACKED_COMPRESSION = "lz4"


class PackedRows:
    """The sink of a task: rows gathered per table, each full batch (:data:`BATCH_ROWS`
    rows, fewer when their text reaches :data:`BATCH_BYTES`) handed on packed as one row
    of the :data:`PACKED` frame."""

    def __init__(self, emit: Callable[[pa.RecordBatch], None]) -> None:
        self._emit = emit
        self._packing = pa.ipc.IpcWriteOptions(compression=PACKED_COMPRESSION)
        self._buffers = {
            table: ColumnBuffer(
                arrow_schema(table), BATCH_ROWS, BATCH_BYTES, partial(self._send, table)
            )
            for table in TABLES
        }
        self.rows = RowSink(
            self._buffers["frames"], self._buffers["messages"], self._buffers["anomalies"]
        )

    def connection(self, row: Row) -> None:
        self._buffers["connections"].add(row)

    def flush_all(self) -> None:
        for table in TABLES:
            self._send(table)

    def _send(self, table: str) -> None:
        batch = self._buffers[table].take_batch()
        if batch is not None:
            sink = pa.BufferOutputStream()
            with pa.ipc.new_stream(sink, batch.schema, options=self._packing) as stream:
                stream.write_batch(batch)
            self._emit(packed_batch(table, sink.getvalue()))


def packed_batch(table: str, data: pa.Buffer) -> pa.RecordBatch:
    """One row of the packed frame, its ``data`` the buffer itself (not a copy)."""
    ends = pa.py_buffer(struct.pack("=ii", 0, data.size))
    column = pa.Array.from_buffers(pa.binary(), 1, [None, ends, data])
    return pa.RecordBatch.from_arrays([pa.array([table]), column], schema=PACKED)


def unpacked(data: pa.Buffer) -> pa.ipc.RecordBatchStreamReader:
    """The table batches one packed row holds (what :class:`PackedRows` packed)."""
    return pa.ipc.open_stream(data)


def _share_batch(capture: str, result: CaptureResult) -> pa.RecordBatch:
    text = json.dumps(
        {
            "capture": capture,
            "size": result.size,
            "seconds": result.seconds,
            "cut_off": result.cut_off,
            "last_ts": result.last_ts,
            "stats": result.stats.to_json(),
        }
    )
    return packed_batch(SHARE, pa.py_buffer(text.encode()))


def share_result(text: str) -> tuple[str, CaptureResult]:
    found = json.loads(text)
    stats = CaptureStats.from_json(found["stats"])
    result = CaptureResult(
        Path(), found["size"], found["seconds"], found["cut_off"], stats, found["last_ts"]
    )
    return found["capture"], result


def decode_tasks(
    options: DecodeOptions,
) -> Callable[[Iterator[pa.RecordBatch]], Iterator[pa.RecordBatch]]:
    """The function each task runs over its listed captures (rows of ``Listed`` fields
    and the flow-hash ``share`` of ``shares`` to keep)."""

    def decode(listed: Iterator[pa.RecordBatch]) -> Iterator[pa.RecordBatch]:
        for batch in listed:
            for row in batch.to_pylist():
                index, count = row.pop("share"), row.pop("shares")
                share = FlowShare(index, count) if count > 1 else None
                yield from _decode_one(Listed(**row), options, share)

    return decode


def _decode_one(
    listed: Listed, options: DecodeOptions, share: FlowShare | None
) -> Iterator[pa.RecordBatch]:
    """Decode one capture (or share) in a thread, yielding its batches as they come: the
    decoder is push-based, Spark pulls; the bounded queue between them bounds memory. A
    share also yields what the capture-wide rows need (:func:`shared_capture_rows`)."""
    batches: queue.Queue[pa.RecordBatch | BaseException | None] = queue.Queue(QUEUED_BATCHES)

    def run() -> None:
        capture = _RemoteCapture(listed)
        try:
            sink = PackedRows(batches.put)
            result = decode_capture(capture, sink, options, share=share)
            sink.flush_all()
            if share is not None:
                batches.put(_share_batch(listed.name, result))
            batches.put(None)
        except BaseException as error:  # re-raised in the task, where Spark reports it
            batches.put(error)
        finally:
            capture.close()

    thread = threading.Thread(target=run, name=f"pwcap-decode-{listed.name}", daemon=True)
    thread.start()
    while (item := batches.get()) is not None:
        if isinstance(item, BaseException):
            raise item
        yield item
    thread.join()


# -- the job -------------------------------------------------------------------------------------


def decoded(
    spark: SparkSession,
    captures: list[Listed],
    options: DecodeOptions,
    split_above: int = SPLIT_ABOVE,
) -> DataFrame:
    """The packed rows of ``captures`` (:data:`PACKED`): one Spark task per capture, or
    per flow-hash share of a capture larger than ``split_above`` bytes (each share task
    reads the whole capture and keeps its connections)."""
    rows = []
    for c in captures:
        shares = max(1, -(-c.size // split_above))
        rows += [(c.name, c.filesystem, c.paths, c.size, k, shares) for k in range(shares)]
    listed = spark.sparkContext.parallelize(rows, max(1, len(rows))).toDF(
        "name string, filesystem string, paths array<string>, size long, share int, shares int"
    )
    return listed.mapInArrow(decode_tasks(options), PACKED_DDL)
