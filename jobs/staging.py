"""The tables of one analytics run, written into a hidden folder of the output and moved
into place together once every one is written, or removed: an interrupted or failed run
(Ctrl-C, SIGTERM, a failed query) leaves the output folder exactly as it found it, with
no temporary folder behind, and the earlier run's tables intact.

The hidden folder holds each table under its own name: Spark ignores a path whose name
starts with a dot or an underscore, so a table that later tables are computed from
(read back before the move) must not have such a name itself.
"""

from __future__ import annotations

import contextlib
import threading
import time
import uuid
from typing import Any

from pyspark.sql import DataFrame, SparkSession

from ..tables.interrupts import Interrupted, interrupts_deferred
from ..tables.provenance import PART_SUFFIX, RECORD, fingerprint, updated

SETTLE_SECONDS = 30  # at most, for the tasks of cancelled jobs to stop before cleaning up
SETTLE_POLL_SECONDS = 0.1


class Staging:
    """Where one run's tables go first; :meth:`commit` moves them all to ``output``,
    :meth:`discard` deletes them. Several threads may write at once."""

    def __init__(self, spark: SparkSession, output: str, sources: list[str]) -> None:
        """``sources``: the fingerprints of the datasets the tables are computed from,
        recorded with them (:mod:`pwcap.tables.provenance`)."""
        self._spark = spark
        self._output = output
        self._sources = sources
        self._jvm = spark.sparkContext._jvm
        self._path = self._jvm.org.apache.hadoop.fs.Path
        hadoop_conf = spark.sparkContext._jsc.hadoopConfiguration()
        self._fs = self._path(output).getFileSystem(hadoop_conf)
        self._folder = self._path(output, f".pwcap-tables.tmp-{uuid.uuid4().hex}")
        self._lock = threading.Lock()
        self._temporary: dict[str, Any] = {}  # table -> its Hadoop path in the hidden folder

    def write(self, frame: DataFrame, name: str) -> str:
        """``frame`` as Parquet in the hidden folder; its path."""
        temporary = self._path(self._folder, name)
        with self._lock:
            self._temporary[name] = temporary
        # Parquet's own microsecond timestamps, as the decoded dataset has, not legacy INT96.
        self._spark.conf.set("spark.sql.parquet.outputTimestampType", "TIMESTAMP_MICROS")
        frame.write.parquet(temporary.toString())
        return temporary.toString()

    def commit(self, names: list[str]) -> dict[str, str]:
        """Every table written, moved into place (replacing one of the same name), in the
        order of ``names``; table -> its path. A signal meanwhile is answered once all are
        moved (:class:`Interrupted`, ``written``): never half of them."""
        written: dict[str, str] = {}
        with interrupts_deferred() as received:
            for name in names:
                final = self._path(self._output, name)
                if self._fs.exists(final):
                    self._fs.delete(final, True)
                if not self._fs.rename(self._temporary.pop(name), final):
                    raise OSError(f"could not move table {name} into {self._output}")
                written[name] = final.toString()
            self._fs.delete(self._folder, True)
            self._record(names)
        if received:
            raise Interrupted(received[0], written=True)
        return written

    def _record(self, tables: list[str]) -> None:
        """The record of each table's sources, updated for ``tables`` and replaced whole."""
        record = self._path(self._output, RECORD)
        before = None
        if not self._fs.exists(record) and not self._sources:
            return  # nothing known, nothing to forget
        if self._fs.exists(record):
            stream = self._fs.open(record)
            try:
                before = self._jvm.org.apache.commons.io.IOUtils.toString(stream, "UTF-8")
            finally:
                stream.close()
        temporary = self._path(self._output, f".{RECORD}.tmp-{uuid.uuid4().hex}")
        stream = self._fs.create(temporary, True)
        try:
            stream.write(bytearray(updated(before, tables, self._sources).encode()))
        finally:
            stream.close()
        self._fs.delete(record, False)
        if not self._fs.rename(temporary, record):
            raise OSError(f"could not write {record}")

    def discard(self) -> None:
        """Cancel the jobs still running and delete what was written, again once their
        tasks have stopped (a task still running could write its part file after the
        delete); signals wait."""
        with interrupts_deferred():
            self._spark.sparkContext.cancelAllJobs()
            self._delete()
            if self._settle():
                self._delete()

    def _delete(self) -> None:
        with contextlib.suppress(Exception):  # the run is failing already
            self._fs.delete(self._folder, True)

    def _settle(self) -> bool:
        """Wait until no executor runs a task (at most SETTLE_SECONDS); whether any did."""
        tracker = self._spark.sparkContext._jsc.sc().statusTracker()
        deadline = time.monotonic() + SETTLE_SECONDS
        busy = False
        while time.monotonic() < deadline:
            if not any(e.numRunningTasks() for e in tracker.getExecutorInfos()):
                return busy
            busy = True
            time.sleep(SETTLE_POLL_SECONDS)
        return busy


def dataset_fingerprints(spark: SparkSession, frames_folders: list[str]) -> list[str]:
    """The fingerprint of each dataset whose ``frames`` folders (globs, URIs) are given,
    listed through Hadoop's filesystems as Spark reads them."""
    context = spark.sparkContext
    path_of = context._jvm.org.apache.hadoop.fs.Path
    found = []
    for frames in frames_folders:
        path = path_of(frames)
        filesystem = path.getFileSystem(context._jsc.hadoopConfiguration())
        for folder in filesystem.globStatus(path) or []:
            parts = [
                (status.getPath().getName(), status.getLen())
                for status in filesystem.listStatus(folder.getPath())
                if status.isFile() and status.getPath().getName().endswith(PART_SUFFIX)
            ]
            if parts:
                found.append(fingerprint(parts))
    return found
