"""The Parquet dataset: one directory per table, rows streamed out in row groups.

Decoders hand over rows as dicts (:class:`pwcap.decode.api.RowSink`). Appending a dict to
a list is the cheapest thing the hot path can do, so the writer's ``frame`` / ``message`` /
``anomaly`` are plain ``list.append``; the caller calls :meth:`DatasetWriter.flush_full`
once per capture record, and every ``batch_rows`` rows become one Arrow record batch
(converted in C++ against the schema of :mod:`pwcap.decode.schema`). Batches are written
as a row group once ``row_group_rows`` have gathered, so memory holds at most one row
group per table in Arrow form plus one batch of dicts, whatever the capture size.

Everything is written under ``OUT.tmp-XXXX`` beside ``OUT`` and renamed to ``OUT`` only
when complete: an interrupted run leaves no dataset, never a half-written one.
"""

from __future__ import annotations

import os
import shutil
import uuid
from collections import Counter
from pathlib import Path
from types import TracebackType

import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq
from pwcap.decode.api import Row
from pwcap.decode.schema import TABLES, arrow_schema

BATCH_ROWS = 16_384  # dicts held per table before conversion to Arrow
ROW_GROUP_ROWS = 262_144  # rows per Parquet row group
FILE_ROWS = 8 * ROW_GROUP_ROWS  # rows per part file before the next one is started
COMPRESSION = "zstd"
COUNTED = {"frames": "command", "anomalies": "kind"}  # tallied for the run's summary


class DatasetError(Exception):
    """The output directory cannot be written (exists without ``--overwrite``...)."""


class TableWriter:
    """One table: dict rows in, ``part-NNNNN.parquet`` files of whole row groups out."""

    def __init__(self, directory: Path, table: str, row_group_rows: int, file_rows: int) -> None:
        self.directory = directory
        self.schema = arrow_schema(table)
        self._struct = pa.struct(list(self.schema))
        self._row_group_rows = row_group_rows
        self._file_rows = file_rows
        self.rows: list[Row] = []
        self._batches: list[pa.RecordBatch] = []
        self._pending = 0  # rows in self._batches
        self._writer: pq.ParquetWriter | None = None
        self._file_count = 0  # rows in the current part file
        self._parts = 0
        self.written = 0  # rows handed to Parquet so far
        self._counted_column = COUNTED.get(table)
        self.counted: Counter[str | None] = Counter()  # rows per value of that column
        directory.mkdir(parents=True)

    @property
    def count(self) -> int:
        """Rows received: written, converted and waiting, or still dicts."""
        return self.written + self._pending + len(self.rows)

    def convert(self) -> None:
        """Turn the buffered dicts into one Arrow batch (a dict's missing key is null)."""
        if not self.rows:
            return
        array = pa.array(self.rows, type=self._struct)
        self.rows.clear()  # in place: the writer's bound ``append`` keeps pointing at it
        if self._counted_column is not None:
            tally = pc.value_counts(array.field(self._counted_column))
            self.counted.update({item["values"]: item["counts"] for item in tally.to_pylist()})
        self._batches.append(pa.RecordBatch.from_struct_array(array))
        self._pending += len(array)
        if self._pending >= self._row_group_rows:
            self._write_row_group()

    def _write_row_group(self) -> None:
        table = pa.Table.from_batches(self._batches, schema=self.schema)
        self._batches = []
        self._pending = 0
        if self._writer is None or self._file_count >= self._file_rows:
            self._open_part()
        assert self._writer is not None
        self._writer.write_table(table, row_group_size=len(table))
        self._file_count += len(table)
        self.written += len(table)

    def _open_part(self) -> None:
        if self._writer is not None:
            self._writer.close()
        path = self.directory / f"part-{self._parts:05d}.parquet"
        self._writer = pq.ParquetWriter(path, self.schema, compression=COMPRESSION)
        self._parts += 1
        self._file_count = 0

    def close(self) -> None:
        """Write what is left; a table without rows still gets a file carrying its schema."""
        self.convert()
        if self._batches:
            self._write_row_group()
        if self._writer is None:
            self._open_part()
        assert self._writer is not None
        self._writer.close()
        self._writer = None

    def abort(self) -> None:
        if self._writer is not None:
            self._writer.close()
            self._writer = None


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
        self.tmp = self.out.with_name(f"{self.out.name}.tmp-{uuid.uuid4().hex[:8]}")
        self.tmp.mkdir(parents=True)
        try:
            self.tables = {
                name: TableWriter(self.tmp / name, name, row_group_rows, file_rows)
                for name in TABLES
            }
        except BaseException:
            shutil.rmtree(self.tmp, ignore_errors=True)
            raise
        self._batch_rows = batch_rows
        self._frames = self.tables["frames"]
        self._messages = self.tables["messages"]
        self._anomalies = self.tables["anomalies"]
        self._connections = self.tables["connections"]
        self.frame = self._frames.rows.append
        self.message = self._messages.rows.append
        self.anomaly = self._anomalies.rows.append
        self.connection = self._connections.rows.append

    def flush_full(self) -> None:
        """Convert every table whose buffer reached the batch size (cheap when none has)."""
        limit = self._batch_rows
        if len(self._frames.rows) >= limit:
            self._frames.convert()
        if len(self._messages.rows) >= limit:
            self._messages.convert()
        if len(self._anomalies.rows) >= limit:
            self._anomalies.convert()
        if len(self._connections.rows) >= limit:
            self._connections.convert()

    def row_counts(self) -> dict[str, int]:
        """Rows received so far per table (written or still buffered)."""
        return {name: table.count for name, table in self.tables.items()}

    def commit(self) -> None:
        """Close every table and move the finished dataset to ``out``."""
        for table in self.tables.values():
            table.close()
        check_output(self.out, self.overwrite)
        old = None
        if self.out.exists():
            old = self.out.with_name(f"{self.out.name}.old-{uuid.uuid4().hex[:8]}")
            os.rename(self.out, old)
        os.rename(self.tmp, self.out)
        if old is not None:
            shutil.rmtree(old, ignore_errors=True)

    def abort(self) -> None:
        for table in self.tables.values():
            table.abort()
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


def check_output(out: Path, overwrite: bool) -> None:
    """Refuse an existing ``out`` unless overwriting, and never overwrite a non-dataset.

    ``--overwrite`` replaces an earlier pwcap dataset (or an empty directory); anything
    else at that path is the user's and is left alone.
    """
    if not out.exists() and not out.is_symlink():
        if not out.parent.is_dir():
            raise DatasetError(f"{out.parent}: no such directory")
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
