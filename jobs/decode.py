"""Decode captures on a Spark cluster into the dataset ``pwcap decode`` writes.

    spark-submit jobs/decode.py 's3a://caps/broker-1/*.pcap*' hdfs:///caps/day1 -o s3a://out/d1
    python jobs/decode.py sample_pcaps -o out.parquet          # embedded local[*] Spark

The driver only lists: captures are named and recognised (first 4 KiB) as ``pwcap decode``
names them, so rows carry the same ``capture`` and ``conn_id``. Each Spark task opens its
capture through the filesystem (pyarrow's: local, HDFS, S3), streams it through the one
decode driver and hands its rows back as Arrow batches (``mapInArrow``); nothing of a
capture reaches the driver. A capture above ``SPLIT_ABOVE`` is decoded by several tasks,
each keeping a flow-hash share of its connections, as ``pwcap decode --jobs`` does; the
shares' small results come back to the driver for the rows about the whole capture.
A task packs each batch of rows as one row (Arrow's IPC format); the writing tasks
unpack them into the Parquet files ``pwcap decode`` writes, and the driver keeps the files
of the task attempts that succeeded.
"""

from __future__ import annotations

import argparse
import fnmatch
import glob
import json
import os
import queue
import struct
import sys
import threading
import uuid
from collections import Counter
from collections.abc import Callable, Iterator
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, replace
from functools import partial
from pathlib import Path, PurePosixPath
from urllib.parse import urlsplit

import pyarrow as pa
from pwcap.capture import CaptureStats
from pwcap.capture.shares import FlowShare
from pwcap.decode.api import DecodeOptions
from pwcap.decode.driver import CaptureResult, capture_rows, decode_capture, merge_shares
from pwcap.decode.inputs import InputError, distinct_names, expand_inputs, head_not_a_capture
from pwcap.decode.series import head_timestamp, in_time_order, rotated_groups, series_name
from pwcap.jobs.common import no_java, session
from pwcap.tables.columns import ColumnBuffer, RowSink
from pwcap.tables.dataset import (
    BATCH_BYTES,
    BATCH_ROWS,
    FILE_ROWS,
    ROW_GROUP_ROWS,
    DatasetError,
    TableWriter,
    check_output,
)
from pwcap.tables.schema import TABLES, Row, arrow_schema
from py4j.java_gateway import JavaObject
from pyarrow import fs as pafs
from pyspark import TaskContext
from pyspark.sql import DataFrame, SparkSession

from pwcap.cli_decode import add_decode_options, decode_options

SNIFF_BYTES = 4096
SPLIT_ABOVE = 1 << 30  # bytes of a capture above which its connections are shared by tasks
QUEUED_BATCHES = 8  # batches a task's decoder may run ahead of Spark (bounded memory)
_SCHEMES = {"s3a": "s3", "s3n": "s3"}  # Hadoop's names for what pyarrow calls s3


@dataclass(frozen=True, slots=True)
class Listed:
    """One capture to decode: its dataset name, the filesystem (a URI pyarrow opens) and
    the paths in it where a task reads it (several: a rotated series, read in turn),
    and its size."""

    name: str
    filesystem: str
    paths: list[str]
    size: int


# -- listing, on the driver -------------------------------------------------------------------


def list_captures(arguments: list[str], series: bool = False) -> tuple[list[Listed], list[str]]:
    """The captures the arguments name (files, folders, globs; on any filesystem pyarrow
    reaches), largest first, and the files of folders that are not captures. Rotated
    files (or all of them: ``series``) are one capture each series, as for ``pwcap
    decode``; names are made unique, so connection ids are too."""
    local = [a for a in arguments if "://" not in a]
    remote = [a for a in arguments if "://" in a]
    if series and local and remote:
        raise InputError("--series: the files of one series must be on one filesystem")
    listed: list[tuple[Listed, PurePosixPath]] = []
    skipped: list[str] = []
    if local:
        expanded = expand_inputs(local, series)
        for capture in expanded.captures:
            if capture.path is None:
                raise InputError("standard input cannot be shared with a cluster")
            paths = [str(part.resolve()) for part in capture.parts or (capture.path,)]
            where = PurePosixPath(paths[0]).parent / PurePosixPath(capture.name).name
            listed.append((Listed(capture.name, f"file://{paths[0]}", paths, capture.size), where))
        skipped += [str(path) for path, _ in expanded.skipped]
    if remote:
        found: dict[PurePosixPath, _Found] = {}
        for argument in remote:
            files, not_captures = _list_remote(argument)
            for file in files:
                found.setdefault(file.where, file)  # a file named twice is decoded once
            skipped += not_captures
        listed += _remote_captures(found, series)
    return sorted(_unique_names(listed), key=lambda c: -c.size), skipped


@dataclass(frozen=True, slots=True)
class _Found:
    """A capture file a URI argument names."""

    uri: str  # of its filesystem, for pyarrow
    path: str  # in that filesystem
    where: PurePosixPath  # where it is among every filesystem's files (:func:`_where`)
    name: PurePosixPath  # below the argument
    size: int


def _list_remote(argument: str) -> tuple[list[_Found], list[str]]:
    """A file, folder, or glob in its last part (``s3a://b/caps/*.pcap``) named by URI;
    names are paths below the folder, as for local arguments."""
    scheme, rest = argument.split("://", 1)
    uri = f"{_SCHEMES.get(scheme, scheme)}://{rest.rstrip('/')}"
    pattern = None
    if glob.has_magic(rest):
        uri, pattern = uri.rsplit("/", 1)
    try:
        filesystem, path = pafs.FileSystem.from_uri(uri)
        info = filesystem.get_file_info(path)
    except (OSError, ValueError) as error:
        raise InputError(f"{argument}: {error}") from None
    if info.type == pafs.FileType.NotFound:
        raise InputError(f"{argument}: no such file or folder")

    def found(file: pafs.FileInfo, name: PurePosixPath) -> _Found:
        return _Found(uri, file.path, _where(uri, file.path), name, file.size)

    if info.type != pafs.FileType.Directory:
        return [found(info, PurePosixPath(PurePosixPath(path).name))], []
    files = filesystem.get_file_info(pafs.FileSelector(path, recursive=pattern is None))
    base = PurePosixPath(path)
    captures, skipped = [], []
    for file in sorted((f for f in files if f.is_file), key=lambda f: f.path):
        name = PurePosixPath(file.path).relative_to(base)
        if pattern is not None:
            if fnmatch.fnmatchcase(str(name), pattern):
                captures.append(found(file, name))
            continue
        with filesystem.open_input_stream(file.path) as stream:
            reason = head_not_a_capture(stream.read(SNIFF_BYTES), str(name))
        if reason is None:
            captures.append(found(file, name))
        else:
            skipped.append(f"{argument.rstrip('/')}/{name}")
    if not captures:
        raise InputError(f"{argument}: no capture files there")
    return captures, skipped


def _where(uri: str, path: str) -> PurePosixPath:
    """One absolute path for a file of any filesystem: ``/a/b`` on the local one,
    ``/s3:/bucket/a/b``, ``/hdfs:/namenode:8020/a/b`` elsewhere (pyarrow's S3 paths start
    with their bucket, its HDFS paths with ``/``, below the URI's host)."""
    parts = urlsplit(uri)
    if parts.scheme == "file":
        return PurePosixPath(path)
    host = [parts.netloc] if path.startswith("/") else []
    return PurePosixPath("/", f"{parts.scheme}:", *host, path.lstrip("/"))


def _remote_captures(
    found: dict[PurePosixPath, _Found], series: bool
) -> list[tuple[Listed, PurePosixPath]]:
    """The URI arguments' files as captures: rotated files one capture each series
    (every file one series with ``series``), read in the order of their first records."""
    opened: dict[str, pafs.FileSystem] = {}

    def first(where: PurePosixPath) -> int:
        file = found[where]
        if file.uri not in opened:
            opened[file.uri] = pafs.FileSystem.from_uri(file.uri)[0]
        with opened[file.uri].open_input_stream(file.path) as stream:
            return head_timestamp(stream.read(SNIFF_BYTES), file.path)

    files = list(found)
    if series and len({_filesystem(found[where].uri) for where in files}) > 1:
        raise InputError("--series: the files of one series must be on one filesystem")
    groups = [in_time_order(files, first)] if series else rotated_groups(files, first)
    captures = []
    for group in groups:
        head = found[group[0]]
        name = str(head.name) if len(group) == 1 else series_name(str(head.name))
        paths = [found[where].path for where in group]
        size = sum(found[where].size for where in group)
        where = group[0].parent / PurePosixPath(name).name
        captures.append((Listed(name, head.uri, paths, size), where))
    return captures


def _filesystem(uri: str) -> str:
    """The filesystem a URI is on: its scheme and host (an S3 bucket, an HDFS namenode)."""
    parts = urlsplit(uri)
    return f"{parts.scheme}://{parts.netloc}"


def _unique_names(listed: list[tuple[Listed, PurePosixPath]]) -> list[Listed]:
    """The captures under names of their own (two arguments' ``trace.pcap`` take leading
    folders until they differ, as :func:`expand_inputs` names local files): a name is a
    capture's scope for connection ids, so two captures must never share one."""
    names = distinct_names([PurePosixPath(c.name) for c, _ in listed], [w for _, w in listed])
    taken = [name for name, count in Counter(names).items() if count > 1]
    if taken:
        raise InputError(f"two captures would both be named {taken[0]}: name them apart")
    return [replace(capture, name=name) for (capture, _), name in zip(listed, names, strict=True)]


# -- decoding, in the tasks ---------------------------------------------------------------------


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
# LZ4: a batch of small frames packs to an eighth of its size, for about a sixtieth of
# the CPU time its decoding took.
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


def _share_result(text: str) -> tuple[str, CaptureResult]:
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


WRITTEN_DDL = "files array<string>, shares array<string>"


def write_dataset(
    spark: SparkSession,
    captures: list[Listed],
    options: DecodeOptions,
    folder: str,
    split_above: int = SPLIT_ABOVE,
) -> None:
    """Decode ``captures`` into the dataset folder ``folder`` (a Hadoop path or URI).

    The task that decoded the packed rows also writes them (:func:`write_parts`): it
    unpacks them into Parquet part files with ``pwcap decode``'s own writer, so the files
    have its schema, row groups and compression, and tells the driver which files it
    wrote; the driver then commits (:func:`commit`). The rows go from the decoding Python
    to the writing Python as a few large binary values: the JVM never handles a frame
    row. (When Spark's own Parquet writer wrote them, turning them into JVM rows and
    encoding those took a third of the job's CPU.) Spark's Python data sources do the same
    but plan and commit in Python processes the driver starts with the executors'
    interpreter, which a cluster's ``--archives`` environment does not have on the
    driver."""
    written = decoded(spark, captures, options, split_above).mapInArrow(
        write_parts(folder), WRITTEN_DDL
    )
    commit(folder, [(row["files"], row["shares"]) for row in written.collect()])


def write_parts(folder: str) -> Callable[[Iterator[pa.RecordBatch]], Iterator[pa.RecordBatch]]:
    """The function each writing task runs over its packed rows: it writes them into part
    files of its own in ``folder`` and yields one row, the files and its shares' capture
    results (JSON)."""

    def write(packed: Iterator[pa.RecordBatch]) -> Iterator[pa.RecordBatch]:
        task = TaskContext.get()  # the attempts of one task write apart: one is kept
        tag = f"{task.partitionId():05d}-{task.attemptNumber()}" if task else uuid.uuid4().hex[:8]
        shares: list[str] = []
        with _DatasetFolder(folder, f"part-{tag}") as tables:
            for batch in packed:
                names = batch.column("table").to_pylist()
                for table, data in zip(names, batch.column("data"), strict=True):
                    if table == SHARE:
                        shares.append(data.as_py().decode())
                        continue
                    for rows in unpacked(data.as_buffer()):
                        tables.writer(table).add_batch(rows)
        yield pa.RecordBatch.from_pylist([{"files": tables.files, "shares": shares}])

    return write


def commit(folder: str, written: list[tuple[list[str], list[str]]]) -> None:
    """On the driver, once every task succeeded (``written``: what each told, as files and
    share results): drop what failed attempts left, then write the rows about whole
    captures decoded in shares and a file for each table still without one."""
    kept = {file for files, _ in written for file in files}
    with _DatasetFolder(folder, "part-driver") as tables:
        for table in TABLES:
            selector = pafs.FileSelector(f"{tables.base}/{table}", allow_not_found=True)
            found = {f.path for f in tables.filesystem.get_file_info(selector) if f.is_file}
            for stray in found - kept:
                tables.filesystem.delete_file(stray)
            if not found & kept:
                tables.writer(table)  # closed without rows: a file with the schema
        for row in shared_capture_rows([text for _, shares in written for text in shares]):
            tables.writer("anomalies").append(row)


class _DatasetFolder:
    """The table writers of one task (or of the driver's commit) in a dataset folder,
    each opened at its table's first rows. As a context manager: the files are finished
    on leaving it (:attr:`files` then names them), or abandoned if an error leaves it."""

    def __init__(self, folder: str, part_name: str) -> None:
        self.filesystem, self.base = pafs.FileSystem.from_uri(_pyarrow_uri(folder))
        self._part_name = part_name
        self._background = ThreadPoolExecutor(1, thread_name_prefix="pwcap-parquet")
        self._writers: dict[str, TableWriter] = {}
        self.files: list[str] = []

    def writer(self, table: str) -> TableWriter:
        if table not in self._writers:
            self._writers[table] = TableWriter(
                f"{self.base}/{table}",
                table,
                ROW_GROUP_ROWS,
                FILE_ROWS,
                self._background,
                filesystem=self.filesystem,
                part_name=self._part_name,
            )
        return self._writers[table]

    def __enter__(self) -> _DatasetFolder:
        return self

    def __exit__(self, exc_type: type[BaseException] | None, *_: object) -> None:
        try:
            for writer in self._writers.values():
                if exc_type is None:
                    writer.close()
                else:
                    writer.abort()
        finally:
            self._background.shutdown()
        self.files = [file for writer in self._writers.values() for file in writer.files]


def _pyarrow_uri(folder: str) -> str:
    """A Hadoop path or URI (``file:/x``, ``s3a://b/x``, ``hdfs://nn/x``) as pyarrow names it."""
    scheme, found, rest = folder.partition("://")
    if found and scheme in _SCHEMES:
        return f"{_SCHEMES[scheme]}://{rest}"
    return folder if "://" in folder or folder.startswith("file:") else f"file://{folder}"


def shared_capture_rows(results: list[str]) -> list[Row]:
    """The capture-wide ``anomalies`` rows of the captures decoded in shares, from the
    shares' results: written once, with the capture's end."""
    by_capture: dict[str, list[CaptureResult]] = {}
    for text in results:
        capture, result = _share_result(text)
        by_capture.setdefault(capture, []).append(result)
    rows: list[Row] = []
    for capture, found in sorted(by_capture.items()):
        rows += capture_rows(capture, merge_shares(found))
    return rows


# -- the dataset, written whole -------------------------------------------------------------------


class Output:
    """The dataset folder the job writes, on whichever filesystem Hadoop reaches: refused
    when it exists (unless overwriting an earlier dataset), written under a hidden
    temporary name beside it and renamed when every table is there, so that, as with
    ``pwcap decode``, a failed or interrupted run leaves no dataset behind."""

    def __init__(self, spark: SparkSession, output: str, overwrite: bool) -> None:
        context = spark.sparkContext
        self._hadoop = context._jvm.org.apache.hadoop.fs
        path = self._hadoop.Path(output)
        self._fs = path.getFileSystem(context._jsc.hadoopConfiguration())
        self.path = self._fs.makeQualified(path)
        self._overwrite = overwrite

    def check(self) -> None:
        """Raise :class:`DatasetError` when the folder may not be written."""
        if not self._fs.exists(self.path):
            return
        shown = self.path.toString()
        if not self._overwrite:
            raise DatasetError(f"{shown} already exists (use --overwrite to replace it)")
        if not self._fs.getFileStatus(self.path).isDirectory():
            raise DatasetError(f"{shown} exists and is not a dataset directory; not replacing it")
        held = {status.getPath().getName() for status in self._fs.listStatus(self.path)}
        if held - set(TABLES):
            raise DatasetError(
                f"{shown} does not look like a pwcap dataset (it holds"
                f" {sorted(held - set(TABLES))[0]!r}); not replacing it"
            )

    def write(self, write: Callable[[str], None]) -> dict[str, str]:
        """Have ``write`` write the dataset into a temporary folder (named by the string it
        is given), then put it in place; return where each table is."""
        self.check()  # first: decoding starts with the writing
        temporary = self._beside("tmp")
        old = None
        try:
            write(temporary.toString())
            self.check()  # again: another run may have written it meanwhile
            if self._fs.exists(self.path):
                old = self._beside("old")
                self._rename(self.path, old)
            self._rename(temporary, self.path)
        except BaseException:
            self._fs.delete(temporary, True)
            if old is not None and not self._fs.exists(self.path):
                self._rename(old, self.path)  # the earlier dataset back in place
            raise
        if old is not None:
            self._fs.delete(old, True)
        return {table: self._hadoop.Path(self.path, table).toString() for table in TABLES}

    def _beside(self, kind: str) -> JavaObject:
        name = f".{self.path.getName()}.{kind}-{uuid.uuid4().hex}"
        return self._hadoop.Path(self.path.getParent(), name)

    def _rename(self, source: JavaObject, target: JavaObject) -> None:
        if not self._fs.rename(source, target):
            raise OSError(f"could not rename {source} to {target}")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="decode.py", description=__doc__.splitlines()[0])
    parser.add_argument(
        "inputs",
        nargs="+",
        metavar="IN",
        help="capture files, folders or globs (file://, hdfs://, s3a://)",
    )
    parser.add_argument("-o", "--output", required=True, help="dataset folder to write")
    parser.add_argument(
        "--overwrite", action="store_true", help="replace OUT if it is an earlier pwcap dataset"
    )
    add_decode_options(parser)
    parser.add_argument("--verbose", action="store_true", help="keep Spark's INFO logging")
    args = parser.parse_args(argv)
    options = decode_options(args)
    try:
        captures, skipped = list_captures(args.inputs, options.series)
        if "://" not in args.output:  # known before Spark starts
            check_output(Path(args.output), args.overwrite)
    except (InputError, DatasetError) as error:
        parser.exit(1, f"decode: error: {error}\n")
    java = no_java()
    if java is not None:
        parser.exit(1, f"decode: error: {java}\n")
    if skipped:
        print(f"skipped {len(skipped)} files that are not captures: {', '.join(skipped[:3])}")
    # The tasks run pwcap: local Python workers are this interpreter, which has it (a
    # cluster's are what PYSPARK_PYTHON names: see the README).
    os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
    spark = session("pwcap-decode", args.verbose)
    output = Output(spark, args.output, args.overwrite)
    try:
        written = output.write(partial(write_dataset, spark, captures, options))
    except DatasetError as error:
        parser.exit(1, f"decode: error: {error}\n")
    for table, path in written.items():
        print(f"{table}: {path}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
