"""Where a cluster decode's rows land: the writing tasks unpack them into the Parquet
files ``pwcap decode`` writes, the driver keeps the files of the attempts that
succeeded, and the dataset is put in place whole or not at all."""

from __future__ import annotations

import uuid
from collections.abc import Callable, Iterator
from concurrent.futures import ThreadPoolExecutor

import pyarrow as pa
import pyarrow.parquet as pq
from py4j.java_gateway import JavaObject
from pyarrow import fs as pafs
from pyspark import TaskContext
from pyspark.sql import SparkSession

from ...tables.dataset import (
    FILE_ROWS,
    ROW_GROUP_ROWS,
    DatasetError,
    TableWriter,
)
from ...tables.schema import TABLES, Row
from ..api import DecodeOptions
from ..driver import CaptureResult, capture_rows, merge_shares
from .listing import SCHEMES, Listed
from .tasks import SHARE, SPLIT_ABOVE, decoded, share_result, unpacked

WRITTEN_DDL = "files array<string>, rows array<bigint>, shares array<string>"
LISTED_MISSING = 5  # part files a failed commit names


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
    row. (Spark's own Parquet writer would turn them into JVM rows and encode those, a
    large share of the job's CPU.) Spark's Python data sources do the same
    but plan and commit in Python processes the driver starts with the executors'
    interpreter, which a cluster's ``--archives`` environment does not have on the
    driver."""
    written = decoded(spark, captures, options, split_above).mapInArrow(
        write_parts(folder), WRITTEN_DDL
    )
    commit(folder, [(row["files"], row["rows"], row["shares"]) for row in written.collect()])


def write_parts(folder: str) -> Callable[[Iterator[pa.RecordBatch]], Iterator[pa.RecordBatch]]:
    """The function each writing task runs over its packed rows: it writes them into part
    files of its own in ``folder`` and yields one row, the files, the rows each holds as
    the task reads it back, and its shares' capture results (JSON)."""

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
        rows = [_rows_in(tables.filesystem, file) for file in tables.files]
        yield pa.RecordBatch.from_pylist([{"files": tables.files, "rows": rows, "shares": shares}])

    return write


def commit(folder: str, written: list[tuple[list[str], list[int], list[str]]]) -> None:
    """On the driver, once every task succeeded (``written``: what each told, as files,
    their rows and share results): check that the driver finds every file with the rows
    its task wrote, drop what failed attempts left, then write the rows about whole
    captures decoded in shares and a file for each table still without one."""
    reported = {file: n for files, rows, _ in written for file, n in zip(files, rows, strict=True)}
    kept = set(reported)
    with _DatasetFolder(folder, "part-driver") as tables:
        _check_parts(tables.filesystem, tables.base, reported)
        for table in TABLES:
            selector = pafs.FileSelector(f"{tables.base}/{table}", allow_not_found=True)
            found = {f.path for f in tables.filesystem.get_file_info(selector) if f.is_file}
            for stray in found - kept:
                tables.filesystem.delete_file(stray)
            if not found & kept:
                tables.writer(table)  # closed without rows: a file with the schema
        for row in shared_capture_rows([text for _, _, shares in written for text in shares]):
            tables.writer("anomalies").append(row)


def _rows_in(filesystem: pafs.FileSystem, path: str) -> int | None:
    """The rows of a Parquet file as its footer says, None when it cannot be read."""
    try:
        with filesystem.open_input_file(path) as file:
            return pq.ParquetFile(file).metadata.num_rows
    except (OSError, pa.ArrowException):
        return None


def _check_parts(filesystem: pafs.FileSystem, base: str, reported: dict[str, int]) -> None:
    """Raise :class:`DatasetError` naming the part files the tasks wrote that the driver
    does not find in the dataset folder ``base`` with their rows: written where it cannot
    see (a node's local disk, not storage every node shares), the dataset would be short
    of them without a word."""
    lost = sorted(path for path, rows in reported.items() if _rows_in(filesystem, path) != rows)
    if lost:
        names = ", ".join(path.removeprefix(f"{base}/") for path in lost[:LISTED_MISSING])
        more = f" and {len(lost) - LISTED_MISSING} more" if len(lost) > LISTED_MISSING else ""
        raise DatasetError(
            f"{len(lost)} of the {len(reported)} part files the tasks wrote are missing where"
            f" the driver reads the output ({names}{more}): the output must be on storage"
            " every node sees (HDFS, S3, a shared mount); no dataset was written"
        )


class _DatasetFolder:
    """The table writers of one task (or of the driver's commit) in a dataset folder,
    each opened at its table's first rows. As a context manager: the files are finished
    on leaving it (:attr:`files` then names them), or abandoned if an error leaves it."""

    def __init__(self, folder: str, part_name: str) -> None:
        self.filesystem, self.base = pafs.FileSystem.from_uri(pyarrow_uri(folder))
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


def pyarrow_uri(folder: str) -> str:
    """A Hadoop path or URI (``file:/x``, ``s3a://b/x``, ``hdfs://nn/x``) as pyarrow names it."""
    scheme, found, rest = folder.partition("://")
    if found and scheme in SCHEMES:
        return f"{SCHEMES[scheme]}://{rest}"
    return folder if "://" in folder or folder.startswith("file:") else f"file://{folder}"


def shared_capture_rows(results: list[str]) -> list[Row]:
    """The capture-wide ``anomalies`` rows of the captures decoded in shares, from the
    shares' results: written once, with the capture's end."""
    by_capture: dict[str, list[CaptureResult]] = {}
    for text in results:
        capture, result = share_result(text)
        by_capture.setdefault(capture, []).append(result)
    rows: list[Row] = []
    for capture, found in sorted(by_capture.items()):
        rows += capture_rows(capture, merge_shares(found))
    return rows


# -- the dataset, written whole -------------------------------------------------------------------


def refuse_existing(
    shown: str, overwrite: bool, is_folder: bool, held: Callable[[], set[str]]
) -> None:
    """Raise :class:`DatasetError` unless an existing output may be replaced: only with
    ``--overwrite``, and only an earlier dataset (a folder that ``held`` names only
    tables in); anything else there is the user's."""
    if not overwrite:
        raise DatasetError(f"{shown} already exists (use --overwrite to replace it)")
    if not is_folder:
        raise DatasetError(f"{shown} exists and is not a dataset directory; not replacing it")
    unexpected = held() - set(TABLES)
    if unexpected:
        raise DatasetError(
            f"{shown} does not look like a pwcap dataset (it holds"
            f" {sorted(unexpected)[0]!r}); not replacing it"
        )


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
        self._temporary: JavaObject | None = None

    def discard(self) -> None:
        """Remove the temporary folder of an interrupted write again, once Spark has
        stopped: a task killed by the interruption may still have written into it after
        :meth:`write` removed it."""
        if self._temporary is not None:
            self._fs.delete(self._temporary, True)

    def check(self) -> None:
        """Raise :class:`DatasetError` when the folder may not be written."""
        if self._fs.exists(self.path):
            refuse_existing(
                self.path.toString(),
                self._overwrite,
                self._fs.getFileStatus(self.path).isDirectory(),
                lambda: {status.getPath().getName() for status in self._fs.listStatus(self.path)},
            )

    def write(self, write: Callable[[str], None]) -> dict[str, str]:
        """Have ``write`` write the dataset into a temporary folder (named by the string it
        is given), then put it in place; return where each table is."""
        self.check()  # first: decoding starts with the writing
        temporary = self._temporary = self._beside("tmp")
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
