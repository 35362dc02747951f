"""The Parquet dataset: one directory per table, rows streamed out in row groups.

Decoders build their rows in the writer's :attr:`DatasetWriter.rows` (a
:class:`pwcap.tables.columns.ColumnBuffer` per table), and every ``batch_rows`` rows (or
fewer, once their string and binary values reach :data:`BATCH_BYTES`) become one Arrow
record batch against the schema of :mod:`pwcap.tables.schema`, at the row that fills the
buffer: one capture record may yield any number of rows. Batches are written as a row group once
``row_group_rows`` have gathered, so memory holds at most one row group per table in
Arrow form plus one buffer of rows, whatever the capture size.

Everything is written under ``OUT.tmp-XXXX`` beside ``OUT`` and renamed to ``OUT`` only
when complete: an interrupted run leaves no dataset, never a half-written one.
"""

from __future__ import annotations

import contextlib
import os
import shutil
import uuid
from collections import Counter
from concurrent.futures import Future, ThreadPoolExecutor
from pathlib import Path
from types import TracebackType

import pyarrow as pa
import pyarrow.parquet as pq
from pyarrow import fs as pafs

from .columns import ColumnBuffer, RowSink
from .interrupts import Interrupted, interrupts_deferred
from .schema import TABLES, Row, arrow_schema, position

BATCH_ROWS = 16_384  # rows held per table before conversion to Arrow
# Tables of few rows (a connection's, an anomaly's) hold fewer: a batch's storage is made
# at the start, every column's for every row, and 16,384 rows of these were faulted in
# and zeroed in every run for a handful of rows.
FEW_ROWS_TABLES = frozenset({"connections", "anomalies"})
FEW_ROWS_BATCH = 1_024
# Rows per Parquet row group, at most. A row group's batches wait in memory until it is
# written: twice as many rows and the decode's peak holds more pages, each faulted in
# once, for no gain.
ROW_GROUP_ROWS = 65_536
ROW_GROUP_BYTES = 32 << 20  # Arrow bytes per row group, at most (payloads can be large)
BATCH_BYTES = 32 << 20  # string and binary bytes (payloads...) held before a conversion
FILE_ROWS = 1 << 20  # rows per part file before the next one is started
COMPRESSION = "zstd"
# Written without a Parquet dictionary: a stream's byte offsets, a real capture's capture
# times and the payloads' digests are nearly all distinct, so the dictionary only adds an
# index per value and the hashing of each (the files are smaller and written quicker
# without it).
UNDICTIONARIED = frozenset({"stream_offset", "ts", "ts_first", "request_ts", "payload_sha256"})
# Capture times, close to each other and nearly ordered, are written as deltas: their
# columns come out smaller and are encoded quicker.
DELTA_ENCODED = frozenset({"ts", "ts_first", "request_ts"})
# A row group's minimum and maximum are written for every column but the text and byte ones,
# `capture` excepted. A row group's strings are mixed (commands, topics, names), so their
# bounds rarely let a reader skip it, and comparing every value with them is a large share
# of writing a capture of small frames; a capture's bounds let a query of one capture skip
# the others' row groups.
TEXT_WITH_STATISTICS = frozenset({"capture"})
COUNTED = {"frames": "command", "anomalies": "kind"}  # tallied for the run's summary


class DatasetError(Exception):
    """The output directory cannot be written (exists without ``--overwrite``...)."""


class TableWriter:
    """One table: rows built in its :attr:`buffer` (or whole, :meth:`append`) or Arrow
    batches (:meth:`add_batch`) in, ``part-NNNNN.parquet`` files of whole row groups out,
    on the local filesystem or another of pyarrow's (a Spark task writes to the cluster's;
    ``part_name`` keeps the tasks' files apart).

    Parquet encoding and compression release the GIL, so row groups are written by one
    background thread (shared by the tables, in order) while decoding goes on; at most
    one row group per table waits for it.
    """

    def __init__(
        self,
        directory: Path | str,
        table: str,
        row_group_rows: int,
        file_rows: int,
        background: ThreadPoolExecutor,
        batch_rows: int = BATCH_ROWS,
        filesystem: pafs.FileSystem | None = None,
        part_name: str = "part",
    ) -> None:
        self.directory = str(directory)
        self._filesystem = filesystem or pafs.LocalFileSystem()
        self._part_name = part_name
        self.files: list[str] = []  # paths of the part files written, in that filesystem
        self.schema = arrow_schema(table)
        self.buffer = ColumnBuffer(self.schema, batch_rows, BATCH_BYTES, self.convert)
        self._row_group_rows = row_group_rows
        self._file_rows = file_rows
        self._background = background
        self._in_flight: Future[None] | None = None
        self._batches: list[pa.RecordBatch] = []
        self._pending = 0  # rows in self._batches
        self._pending_bytes = 0  # Arrow bytes of self._batches
        self._writer: pq.ParquetWriter | None = None
        self._file_count = 0  # rows in the current part file
        self._parts = 0
        self.written = 0  # rows handed to Parquet so far
        self._settings = parquet_settings(self.schema)
        self._counted_column = COUNTED.get(table)
        if self._counted_column is not None:  # counted as rows end (C counters, so that no
            # run's start pays for importing pyarrow.compute)
            self.buffer.tally(position(table, self._counted_column))
        self._added: Counter[str | None] = Counter()  # of the batches given whole
        self._filesystem.create_dir(self.directory)  # another writer's parts may be there

    @property
    def count(self) -> int:
        """Rows received: written, converted and waiting, or still buffered."""
        return self.written + self._pending + len(self.buffer)

    @property
    def counted(self) -> Counter[str | None]:
        """Rows per value of the table's counted column (None: null), all of them."""
        return self._added + Counter(self.buffer.tallied())

    def append(self, row: Row) -> None:
        """One whole row (a rare one: a connection's, a capture's anomaly)."""
        self.buffer.add(row)

    def convert(self) -> None:
        """Turn the buffered rows into one Arrow batch (a row's missing column is null)."""
        batch = self.buffer.take_batch()
        if batch is not None:
            self._add(batch)

    def add_batch(self, batch: pa.RecordBatch) -> None:
        """A batch of rows already in Arrow form (this table's schema)."""
        if self._counted_column is not None:
            import pyarrow.compute as pc  # only for batches given whole (a Spark task's)

            tally = pc.value_counts(batch.column(self._counted_column))
            self._added.update({item["values"]: item["counts"] for item in tally.to_pylist()})
        self._add(batch)

    def _add(self, batch: pa.RecordBatch) -> None:
        self._batches.append(batch)
        self._pending += len(batch)
        self._pending_bytes += batch.nbytes
        if self._pending >= self._row_group_rows or self._pending_bytes >= ROW_GROUP_BYTES:
            self._write_row_group()

    def _write_row_group(self) -> None:
        table = pa.Table.from_batches(self._batches, schema=self.schema)
        self._batches = []
        self._pending = self._pending_bytes = 0
        self.written += len(table)
        self._wait()
        self._in_flight = self._background.submit(self._write, table)

    def _write(self, table: pa.Table) -> None:
        """In the background thread: one row group, in a new part file when one is full."""
        if self._writer is None or self._file_count >= self._file_rows:
            self._open_part()
        assert self._writer is not None
        self._writer.write_table(table, row_group_size=len(table))
        self._file_count += len(table)

    def _wait(self) -> None:
        """Let the previous row group finish (re-raising its error): memory stays bounded.
        It stays in flight until it has finished: an interruption of the wait leaves it
        for :meth:`abort` to wait for."""
        if self._in_flight is not None:
            self._in_flight.result()
            self._in_flight = None

    def _open_part(self) -> None:
        if self._writer is not None:
            self._writer.close()
        path = f"{self.directory}/{self._part_name}-{self._parts:05d}.parquet"
        self._writer = pq.ParquetWriter(
            path, self.schema, filesystem=self._filesystem, **self._settings
        )
        self.files.append(path)
        self._parts += 1
        self._file_count = 0

    def close(self) -> None:
        """Write what is left; a table without rows still gets a file carrying its schema."""
        self.convert()
        if self._batches:
            self._write_row_group()
        self._wait()
        if self._writer is None:
            self._open_part()
        assert self._writer is not None
        self._writer.close()
        self._writer = None

    def abort(self) -> None:
        """Close the part file; the background thread must be done with it (see
        :meth:`DatasetWriter.abort`)."""
        if self._in_flight is not None:
            self._in_flight.cancel()
            with contextlib.suppress(Exception):
                self._in_flight.result()
            self._in_flight = None
        if self._writer is not None:
            self._writer.close()
            self._writer = None


def parquet_settings(schema: pa.Schema) -> dict[str, object]:
    """The ``ParquetWriter`` settings of a table of ``schema``: its compression, and which
    columns get a dictionary, statistics and delta encoding (also what the benchmarks'
    Parquet floor writes with)."""
    leaves = _leaf_columns(schema)
    encodings = {path: "DELTA_BINARY_PACKED" for path, _ in leaves if path in DELTA_ENCODED}
    return {
        "compression": COMPRESSION,
        "use_dictionary": [path for path, _ in leaves if path.split(".")[0] not in UNDICTIONARIED],
        "write_statistics": [
            path for path, bytes_ in leaves if not bytes_ or path in TEXT_WITH_STATISTICS
        ],
        "column_encoding": encodings or None,
    }


def _leaf_columns(schema: pa.Schema) -> list[tuple[str, bool]]:
    """The Parquet column paths of ``schema`` (``message_ids.list.element.entry_id``...),
    as Parquet's writer names them (what its per-column settings are keyed by), each with
    whether it holds text or bytes."""
    sink = pa.BufferOutputStream()
    pq.ParquetWriter(sink, schema).close()  # a file of no rows (an empty table imports pandas)
    written = pq.read_metadata(pa.BufferReader(sink.getvalue())).schema
    columns = (written.column(i) for i in range(len(written)))
    return [(c.path, c.physical_type in ("BYTE_ARRAY", "FIXED_LEN_BYTE_ARRAY")) for c in columns]


class DatasetWriter:
    """The four tables of one run, written atomically to ``out``.

    Use as a context manager: leaving it normally renames the temporary directory to
    ``out``; leaving it by an exception (KeyboardInterrupt included) deletes it.
    """

    def __init__(
        self,
        out: Path,
        overwrite: bool = False,
        batch_rows: int = BATCH_ROWS,
        row_group_rows: int = ROW_GROUP_ROWS,
        file_rows: int = FILE_ROWS,
    ) -> None:
        self.out = Path(out)
        self.overwrite = overwrite
        check_output(self.out, overwrite)
        tmp: Path | None = None
        background: ThreadPoolExecutor | None = None
        try:
            # Created with interruptions held, inside the `try`: no moment leaves it behind.
            with interrupts_deferred() as received:
                tmp, self.removed = make_temporary(self.out)
            if received:
                raise Interrupted(received[0])
            background = ThreadPoolExecutor(1, thread_name_prefix="pwcap-parquet")
            self.tables = {
                name: TableWriter(
                    tmp / name,
                    name,
                    row_group_rows,
                    file_rows,
                    background,
                    min(batch_rows, FEW_ROWS_BATCH) if name in FEW_ROWS_TABLES else batch_rows,
                )
                for name in TABLES
            }
        except BaseException:
            if background is not None:
                background.shutdown()
            if tmp is not None:
                shutil.rmtree(tmp, ignore_errors=True)
            raise
        self.tmp = tmp
        self._background = background
        self.rows = RowSink(
            self.tables["frames"].buffer,
            self.tables["messages"].buffer,
            self.tables["anomalies"].buffer,
        )
        self.connection = self.tables["connections"].append

    def row_counts(self) -> dict[str, int]:
        """Rows received so far per table (written or still buffered)."""
        return {name: table.count for name, table in self.tables.items()}

    def commit(self) -> None:
        """Close every table and move the finished dataset to ``out``."""
        for table in self.tables.values():
            table.close()
        self._background.shutdown()
        put_in_place(self.tmp, self.out, self.overwrite)

    def abort(self) -> None:
        """Stop writing and delete the temporary directory, whatever fails on the way
        (a write still in flight, a second Ctrl-C: the run is stopping already).

        The background thread is stopped first, its row group in progress finished and
        the queued ones dropped: a Parquet writer closed while that thread still writes
        to it frees what the write is using (Ctrl-C during a wait for a row group made
        the process die of SIGSEGV instead of exiting with 130)."""
        with interrupts_deferred():
            try:
                self._background.shutdown(wait=True, cancel_futures=True)
                for table in self.tables.values():
                    with contextlib.suppress(Exception):
                        table.abort()
            finally:
                shutil.rmtree(self.tmp, ignore_errors=True)

    def __enter__(self) -> DatasetWriter:
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        traceback: TracebackType | None,
    ) -> None:
        if exc_type is None:
            try:
                self.commit()
            except BaseException:
                self.abort()
                raise
        else:
            self.abort()


def make_temporary(out: Path) -> tuple[Path, list[Path]]:
    """Create ``OUT.tmp-<pid>-<tag>`` beside ``out``, after deleting what runs that no longer
    exist left there (returned, so the caller can say so)."""
    removed = remove_stale(out)
    tmp = out.with_name(f"{out.name}.tmp-{_tag()}")
    tmp.mkdir(parents=True)
    return tmp, removed


def put_in_place(tmp: Path, out: Path, overwrite: bool) -> None:
    """Rename the finished dataset ``tmp`` to ``out``, replacing an earlier one only when
    overwriting (checked again: another run may have written ``out`` meanwhile).

    An interruption meanwhile waits for the renames and is raised after them saying the
    dataset was written, so no message can deny a dataset that is in place.
    """
    check_output(out, overwrite)
    old = None
    with interrupts_deferred() as received:
        if out.exists():
            old = out.with_name(f"{out.name}.old-{_tag()}")
            os.rename(out, old)
        os.rename(tmp, out)
    if old is not None:
        shutil.rmtree(old, ignore_errors=True)
    if received:
        raise Interrupted(received[0], written=True)


def _tag() -> str:
    """``<pid>-<random>``: the pid tells a live run's temporaries from a dead run's."""
    return f"{os.getpid()}-{uuid.uuid4().hex[:8]}"


def remove_stale(out: Path) -> list[Path]:
    """Delete the ``OUT.tmp-*`` / ``OUT.old-*`` folders of runs that no longer exist (a
    SIGKILL, a power cut) and return them. A folder whose run is alive is left alone."""
    removed: list[Path] = []
    if not out.parent.is_dir():
        return removed
    for entry in out.parent.iterdir():
        if not entry.name.startswith(out.name):
            continue
        kind, _, rest = entry.name[len(out.name) :].partition("-")
        if kind not in (".tmp", ".old"):
            continue
        pid, _, tag = rest.partition("-")
        if pid.isdigit() and tag and _alive(int(pid)):
            continue
        shutil.rmtree(entry, ignore_errors=True)
        removed.append(entry)
    return removed


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:  # another user's process
        return True
    return True


def check_output(out: Path, overwrite: bool) -> None:
    """Refuse an existing ``out`` unless overwriting, never overwrite a non-dataset, and
    create the folders leading to a new one.

    ``--overwrite`` replaces an earlier pwcap dataset (or an empty directory); anything
    else at that path is the user's and is left alone.
    """
    if not out.exists() and not out.is_symlink():
        try:
            out.parent.mkdir(parents=True, exist_ok=True)  # like `-o out/run1` on a fresh clone
        except OSError as error:
            raise DatasetError(f"{out.parent}: cannot create it ({error.strerror})") from None
        return
    if not overwrite:
        raise DatasetError(f"{out} already exists (use --overwrite to replace it)")
    if not out.is_dir() or out.is_symlink():
        raise DatasetError(f"{out} exists and is not a dataset directory; not replacing it")
    unexpected = {entry.name for entry in out.iterdir()} - set(TABLES)
    if unexpected:
        raise DatasetError(
            f"{out} does not look like a pwcap dataset (it holds {sorted(unexpected)[0]!r});"
            " not replacing it"
        )
