"""What every analytics job shares: its Spark session, reading the decoded dataset,
common column expressions and writing result tables atomically.

Kept free of any question-specific logic so ``latency``, ``permits`` and ``redelivery``
read as the answer to one question each, and ``pwcap analyze`` can run them all in one
session.
"""

from __future__ import annotations

import argparse
import atexit
import contextlib
import glob
import logging
import os
import signal
import subprocess
import sys
import threading
from collections.abc import Callable, Iterator, Mapping, Sequence
from functools import partial
from pathlib import Path
from typing import Any, Protocol, TypeVar

import pyarrow as pa
from pyspark import InheritableThread, SparkConf, SparkContext
from pyspark.java_gateway import launch_gateway
from pyspark.sql import Column, DataFrame, SparkSession
from pyspark.sql import functions as F
from pyspark.sql import types as T

from ..tables.analytics import ANALYTICS
from ..tables.interrupts import (
    exit_status,
    interrupts_deferred,
    signals_as_interrupt,
)
from ..tables.printable import printable
from ..tables.schema import arrow_schema
from .args import add_arguments
from .class_archive import ClassArchive
from .launch import JVM_OPTIONS, driver_memory, java_command, java_problem
from .staging import Staging, dataset_fingerprints

# A table, or how to compute one from the tables written before it: read back from
# Parquet, they cost a scan of a few columns rather than a cache or computing them twice.
Table = DataFrame | Callable[[Mapping[str, DataFrame]], DataFrame]
Tables = dict[str, Table]
Result = TypeVar("Result")
CANCEL_POLL_SECONDS = 0.1  # how often at_once looks for an error to cancel the jobs for
LOG4J = Path(__file__).with_name("log4j2.properties")  # Spark's logging when pwcap starts it
JVM_NOTICES = (b"WARNING: Using incubator modules:",)  # lines of the JVM's start not passed on
PARQUET_EXPANSION = "20"  # how much larger an analytics table is in memory than in Parquet
SCAN_SIZE_FACTOR = "spark.sql.sources.fileCompressionFactor"


def session(
    app_name: str, verbose: bool = False, launch: Mapping[str, str] | None = None
) -> SparkSession:
    """The active session (a test's, ``pwcap analyze``'s) as it is; else one on
    spark-submit's ``--master``, or a local one on every core, with timestamps in UTC.

    ``launch`` holds settings for a JVM this process starts itself (``pwcap analyze``:
    its driver memory and ``--conf``; else half the memory available); under
    spark-submit, its own flags decide.
    """
    active = SparkSession.getActiveSession()
    if active is not None:
        return active
    _local_on_loopback()
    launching = "PYSPARK_GATEWAY_PORT" not in os.environ  # not under spark-submit
    launch = dict(launch or {})
    starts_jvm = launching and SparkContext._gateway is None
    archive = ClassArchive.for_java(java_command()) if starts_jvm else None
    if launching:  # PYSPARK_SUBMIT_ARGS's --driver-memory, if any, comes later and wins
        launch.setdefault("spark.driver.memory", driver_memory())
        options = [JVM_OPTIONS, archive.java_options() if archive else ""]
        options.append(launch.get("spark.driver.extraJavaOptions", ""))  # theirs win
        if not verbose:  # quiet from the JVM's first line on
            options.append(f"-Dlog4j2.configurationFile={LOG4J}")
        launch["spark.driver.extraJavaOptions"] = " ".join(filter(None, options))
    # Join spark-submit's JVM (or start one) first, so the conf carries its --master / --conf.
    launch_conf = SparkConf().setAll(list(launch.items()))
    gateway = _launch_quietly(launch_conf) if starts_jvm and not verbose else None
    SparkContext._ensure_initialized(gateway=gateway, conf=launch_conf)
    if archive is not None and archive.writes_on_exit:  # this JVM writes it as it exits
        atexit.register(archive.settle, SparkContext._gateway.proc)
    conf = SparkConf().setIfMissing("spark.master", "local[*]")
    if conf.get("spark.app.name", "").endswith(".py"):  # spark-submit's default: the script's
        conf.set("spark.app.name", app_name)  # name; a cluster's UI lists pwcap's instead
    if not verbose:
        conf.set("spark.ui.showConsoleProgress", "false")
        conf.setIfMissing("spark.sql.debug.maxToStringFields", "1000")  # no "truncated plan"
        if not launching:  # spark-submit's logging: WARN from the context's start-up on
            conf.set("spark.log.level", "WARN")
    conf.setIfMissing("spark.sql.adaptive.enabled", "true")  # a cluster's may have it off
    if launching:  # a JVM of our own, for one run in a terminal that shows its progress
        # Spark's web UI slows every start; --conf spark.ui.enabled=true in
        # PYSPARK_SUBMIT_ARGS brings it back.
        conf.setIfMissing("spark.ui.enabled", "false")
    if conf.get("spark.master").startswith("local"):
        # Spark's 200 shuffle partitions are made for clusters: on a laptop, per-task
        # overhead would dominate a capture-sized dataset.
        conf.setIfMissing("spark.sql.shuffle.partitions", str(4 * (os.cpu_count() or 1)))
        # Adaptive execution merges small shuffle partitions up to this size (64 MB by
        # default, or a core's share of the shuffle if less): a large shuffle of the
        # latency job became a few unequal tasks, the last of which ran alone.
        conf.setIfMissing("spark.sql.adaptive.advisoryPartitionSizeInBytes", "16m")
        # A cache lives in the driver's heap, sized to the machine: compressing a pass's
        # columns costs more CPU than the pass itself.
        conf.setIfMissing("spark.sql.inMemoryColumnarStorage.compressed", "false")
        # Its Python workers (the findings' key hash) run this interpreter, which has
        # pwcap's dependencies; Spark's default, the PATH's python3, may have none.
        os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
        # They start as `python -m pyspark.daemon` in this process's folder, which Python
        # would put first on their path: run in a checkout, its pwcap/ (the top package
        # alone) would hide the installed pwcap and its pwcap.jobs.
        conf.setIfMissing("spark.executorEnv.PYTHONSAFEPATH", "1")
    spark = (
        SparkSession.builder.appName(app_name)
        .config(conf=conf)
        .config("spark.sql.session.timeZone", "UTC")
        .getOrCreate()
    )
    if verbose:
        spark.sparkContext.setLogLevel("INFO")
    else:
        logging.getLogger("py4j").setLevel(logging.WARNING)
    return spark


def _launch_quietly(conf: SparkConf) -> Any:
    """Start Spark's JVM with its standard error passed on line by line, less the notice
    the JVM prints at every start about the incubating module Spark loads (nothing a user
    can act on, and it came before pwcap's own first line)."""
    gateway = launch_gateway(conf, popen_kwargs={"stderr": subprocess.PIPE})
    thread = threading.Thread(
        target=_pass_on, args=(gateway.proc.stderr,), name="pwcap-jvm-stderr", daemon=True
    )
    thread.start()
    return gateway


def _pass_on(stream: Any) -> None:
    """The JVM's standard error to ours, but for its start-up notices. Written to the file
    descriptor: a daemon thread holding the lock of Python's ``sys.stderr`` when the
    interpreter exits would abort it."""
    for line in iter(stream.readline, b""):
        if not line.startswith(JVM_NOTICES):
            with contextlib.suppress(OSError):
                os.write(2, line)


def _local_on_loopback() -> None:
    """A JVM we start ourselves runs Spark locally: bind it to loopback, which keeps it off
    the network and spares the user the warning about the host name resolving to it."""
    launched_by_spark_submit = "PYSPARK_GATEWAY_PORT" in os.environ
    master_given = "--master" in os.environ.get("PYSPARK_SUBMIT_ARGS", "")
    if not launched_by_spark_submit and not master_given:
        os.environ.setdefault("SPARK_LOCAL_IP", "127.0.0.1")


def run_job(
    name: str,
    build: Callable[[SparkSession, list[str], str], Tables],
    argv: list[str] | None = None,
) -> int:
    """The ``main`` of a job script: parse arguments, build the tables, write them."""
    parser = argparse.ArgumentParser(prog=f"{name}.py", description=build.__doc__)
    add_arguments(parser)
    args = parser.parse_args(argv)
    missing = missing_datasets(args.datasets)
    if missing:
        parser.exit(2, f"{name}: not a decoded dataset (no frames/): {', '.join(missing)}\n")
    written: dict[str, str] = {}
    try:
        with signals_as_interrupt():
            spark = start(name, args.output, args.overwrite, args.verbose)

            def work() -> dict[str, str]:
                tables = build(spark, args.datasets, args.window)
                return write_tables(tables, args.output, datasets=args.datasets)

            with signals_as_interrupt():  # PySpark's Ctrl-C handler set aside
                written.update(at_once([work])[0])
            for table, path in written.items():
                print(f"{table}: {printable(path, None)}")
    except KeyboardInterrupt as interrupt:
        return interrupted(name, args.output, interrupt, bool(written))
    finally:
        # Run first at exit (last registered): Spark's shutdown and the class archive's
        # wait for the JVM, after the outcome is said, are not for a signal to cut.
        atexit.register(deaf_to_signals)
    return 0


def interrupted(program: str, output: str, interrupt: KeyboardInterrupt, written: bool) -> int:
    """Ctrl-C or SIGTERM stopped a run: one line saying whether its tables were written
    (all of them, or none: :class:`Staging`), and the shell's exit status (130 for Ctrl-C)."""
    written = written or getattr(interrupt, "written", False)
    outcome = "its tables were written" if written else "no table was written, it is as it was"
    print(f"{program}: error: interrupted; {printable(output, None)}: {outcome}", file=sys.stderr)
    return exit_status(interrupt)


def deaf_to_signals() -> None:
    """Once a run's outcome is said: Ctrl-C and SIGTERM ignored while the interpreter and
    Spark wind down (a signal then would turn that outcome's exit status into its own)."""
    for signum in (signal.SIGINT, signal.SIGTERM):
        signal.signal(signum, signal.SIG_IGN)


def start(name: str, output: str, overwrite: bool, verbose: bool) -> SparkSession:
    """The session of a job script, once nothing stands in its way: Java to start Spark
    with, and an output that is new or may be overwritten. Otherwise one line and exit 1,
    never a launcher error and a traceback, nor a silently replaced output."""
    refusal = output_refusal(output, overwrite) or no_java()
    if refusal is not None:
        raise SystemExit(f"{name}: error: {refusal}")
    spark = session(f"pwcap-{name}", verbose)
    refusal = output_refusal(output, overwrite, spark)
    if refusal is not None:
        raise SystemExit(f"{name}: error: {refusal}")
    return spark


def no_java() -> str | None:
    """Why Spark cannot start its JVM here, in one line, or None (always None under
    spark-submit, whose JVM already runs)."""
    return None if "PYSPARK_GATEWAY_PORT" in os.environ else java_problem()


def output_refusal(output: str, overwrite: bool, spark: SparkSession | None = None) -> str | None:
    """Why ``output`` may not be written, or None: it exists and ``--overwrite`` was not
    given. A local path is checked at once; a remote URI (``s3a://...``) through Spark's
    filesystem once ``spark`` runs."""
    if overwrite:
        return None
    if "://" not in output:
        exists = os.path.lexists(output)
    elif spark is None:
        return None
    else:
        path = spark.sparkContext._jvm.org.apache.hadoop.fs.Path(output)
        exists = path.getFileSystem(spark.sparkContext._jsc.hadoopConfiguration()).exists(path)
    return f"{output} already exists (use --overwrite to replace it)" if exists else None


def missing_datasets(datasets: list[str]) -> list[str]:
    """Local inputs holding no ``frames`` table: a typo, or not a decoded dataset."""
    return [d for d in datasets if "://" not in d and not table_paths([d], "frames")]


# -- reading -------------------------------------------------------------------------------


def spark_type(arrow: pa.DataType) -> T.DataType:
    """The Spark type Parquet gives an Arrow column of the dataset schema."""
    if pa.types.is_timestamp(arrow):
        return T.TimestampType()
    if pa.types.is_list(arrow):
        return T.ArrayType(spark_type(arrow.value_type))
    if pa.types.is_struct(arrow):
        return T.StructType([T.StructField(f.name, spark_type(f.type)) for f in arrow])
    if pa.types.is_map(arrow):
        return T.MapType(spark_type(arrow.key_type), spark_type(arrow.item_type))
    simple = {
        pa.string(): T.StringType(),
        pa.int64(): T.LongType(),
        pa.int32(): T.IntegerType(),
        pa.float64(): T.DoubleType(),
        pa.bool_(): T.BooleanType(),
        pa.binary(): T.BinaryType(),
    }
    return simple[arrow]


def spark_schema(table: str) -> T.StructType:
    return T.StructType([T.StructField(f.name, spark_type(f.type)) for f in arrow_schema(table)])


def table_paths(datasets: list[str], table: str) -> list[str]:
    """Where ``table`` lives in each dataset; local globs are expanded, missing folders
    skipped (a capture without anomalies may have no ``anomalies`` folder). Remote URIs
    (``s3a://...``) pass through for Spark to expand."""
    paths: list[str] = []
    for dataset in datasets:
        if "://" in dataset:
            paths.append(f"{dataset.rstrip('/')}/{table}")
            continue
        for folder in sorted(glob.glob(dataset)) or [dataset]:
            path = os.path.join(folder, table)
            if os.path.isdir(path):
                paths.append(path)
    return paths


def read_table(spark: SparkSession, datasets: list[str], table: str) -> DataFrame:
    """One dataset table over all inputs, with the documented schema even when absent.

    The schema is given, not inferred: columns an older dataset lacks read as null, and an
    empty input is an empty table rather than an error.
    """
    schema = spark_schema(table)
    paths = table_paths(datasets, table)
    if not paths:
        return spark.createDataFrame([], schema)
    return spark.read.schema(schema).parquet(*paths)


# -- shared column expressions ---------------------------------------------------------------


def micros(ts: str | Column) -> Column:
    """Microseconds since the epoch of a timestamp column."""
    return F.unix_micros(F.col(ts) if isinstance(ts, str) else ts)


def window_start(ts: str, window: str) -> Column:
    return F.window(F.col(ts), window).start


def broker_addresses(connections: DataFrame) -> DataFrame:
    """(``capture``, ``conn_id``) -> ``broker`` (``ip:port``; IPv6 in brackets)."""
    ip = F.when(F.col("server_ip").contains(":"), F.format_string("[%s]", "server_ip")).otherwise(
        F.col("server_ip")
    )
    return connections.select(
        "capture",
        "conn_id",
        F.concat_ws(":", ip, F.col("server_port").cast("string")).alias("broker"),
    ).dropDuplicates(["capture", "conn_id"])


def connection_ends(frames: DataFrame) -> DataFrame:
    """The last frame time of each connection (``capture_end``), a row per connection,
    kept once computed. The permit and redelivery jobs both need it; Spark finds a kept
    result by its plan, so in one session (``pwcap analyze``) the frames are aggregated
    for it once, not once per query that uses it."""
    return frames.groupBy("capture", "conn_id").agg(F.max("ts").alias("capture_end")).cache()


def kept(frame: DataFrame) -> DataFrame:
    """``frame``, computed once for the several queries that read it.

    In a local session its rows are kept as rows (a lazy local checkpoint, stored when the
    first query computes them): a cache first converts them to columns, which costs about
    as much CPU as computing them, and rows kept as rows cost less. On a cluster,
    a cache: Spark recomputes a cached partition an executor lost with it, where a local
    checkpoint's would be gone."""
    if SparkSession.active().sparkContext.master.startswith("local"):
        return frame.localCheckpoint(eager=False)
    return frame.cache()


def message_ids(frames: DataFrame) -> DataFrame:
    """One row per message id a frame names: the ``message_ids`` list when the decoder
    wrote it, else the frame's scalar id columns. Adds ``ledger_id``, ``entry_id``,
    ``partition`` and ``batch_index`` replacing the frame's own."""
    scalar = F.array(
        F.struct(
            F.col("ledger_id").alias("ledger_id"),
            F.col("entry_id").alias("entry_id"),
            F.col("partition").alias("partition"),
            F.col("batch_index").alias("batch_index"),
        )
    )
    listed = F.when(F.size("message_ids") > 0, F.col("message_ids")).otherwise(scalar)
    ids = F.explode(listed).alias("_id")
    others = [c for c in frames.columns if c not in _ID_COLUMNS]
    return (
        frames.select(*others, ids)
        .select(*others, *(F.col(f"_id.{c}").alias(c) for c in _ID_COLUMNS[:-1]))
        .where(F.col("ledger_id").isNotNull())
    )


_ID_COLUMNS = ("ledger_id", "entry_id", "partition", "batch_index", "message_ids")


def conform(frame: DataFrame, table: str) -> DataFrame:
    """``frame`` as the analytics contract (``tables/analytics.py``) has ``table``: its
    columns in their order and types; the frame's other columns are left out."""
    return frame.select(
        *(F.col(c.name).cast(spark_type(c.type)).alias(c.name) for c in ANALYTICS[table])
    )


# -- writing -------------------------------------------------------------------------------


class TableProgress(Protocol):
    """Hears when each table's writing starts and ends (``pwcap analyze``'s progress line)."""

    def started(self, name: str) -> None: ...

    def written(self, name: str) -> None: ...


def write_tables(
    tables: Mapping[str, Table],
    output: str,
    progress: TableProgress | None = None,
    datasets: Sequence[str] = (),
) -> dict[str, str]:
    """Write each table to ``output/<name>``, in order, all moved into place together once
    every one is written (:class:`Staging`): an interrupted or failed run leaves ``output``
    as it was. A table given as a callable sees the tables written before it. The
    ``datasets`` they are computed from are recorded with them."""
    with _times_without_dictionary():
        return _staged(output, datasets, partial(_write_in_order, tables, progress=progress))


def _staged(
    output: str, datasets: Sequence[str], write: Callable[[Staging], dict[str, str]]
) -> dict[str, str]:
    spark = SparkSession.active()
    sources = dataset_fingerprints(spark, table_paths(list(datasets), "frames"))
    staging = Staging(spark, output, sources)
    try:
        staged = write(staging)
    except BaseException:
        staging.discard()
        raise
    return staging.commit(list(staged))


def _write_in_order(
    tables: Mapping[str, Table], staging: Staging, progress: TableProgress | None
) -> dict[str, str]:
    spark = SparkSession.active()
    written: dict[str, str] = {}
    for name, table in tables.items():
        if progress is not None:
            progress.started(name)
        frame = table if isinstance(table, DataFrame) else table(read_back(spark, written))
        written[name] = staging.write(frame, name)
        if progress is not None:
            progress.written(name)
    return written


def write_concurrently(
    groups: Sequence[Callable[[], Mapping[str, Table]]],
    output: str,
    progress: TableProgress | None = None,
    datasets: Sequence[str] = (),
    then: Callable[[dict[str, DataFrame]], Mapping[str, Table]] | None = None,
) -> dict[str, str]:
    """Build each group of tables and write it as :func:`write_tables` does, every group
    :func:`at_once`, so that Spark runs one group's tasks while another's stage has fewer
    tasks than cores or its driver plans the next query (cores sat idle for much of
    ``pwcap analyze`` when it ran one job after the other). The groups must not depend on
    each other; ``then`` builds tables from all of theirs, once they are written. Every
    table is moved into place together."""

    def write(staging: Staging) -> dict[str, str]:
        writes = [partial(_build_and_write, group, staging, progress) for group in groups]
        staged = {name: path for written in at_once(writes) for name, path in written.items()}
        if then is not None:
            after = then(read_back(SparkSession.active(), staged))
            staged.update(_write_in_order(after, staging, progress))
        return staged

    with _times_without_dictionary():
        return _staged(output, datasets, write)


def _build_and_write(
    group: Callable[[], Mapping[str, Table]], staging: Staging, progress: TableProgress | None
) -> dict[str, str]:
    return _write_in_order(group(), staging, progress)


@contextlib.contextmanager
def _times_without_dictionary() -> Iterator[None]:
    """While tables are written: no Parquet dictionary for the analytics tables' timestamp
    columns. Microsecond times are nearly all distinct, so the dictionary Parquet starts for
    each column chunk fills up and is thrown away: writing is quicker without it, and
    the file only a little larger.

    Set on the session's Hadoop configuration, which every write copies, and restored
    after. Given as options of each write instead (`parquet.enable.dictionary#<column>`),
    one task of a write now and then did not have them: a part file with a dictionary for
    its times in 7 of 38 runs of `pwcap analyze` on the samples (writes running at once;
    the cause, somewhere between Spark's write options and Parquet's reading of them, not
    found); set here, in none of 36."""
    hadoop = SparkSession.active().sparkContext._jsc.hadoopConfiguration()
    keys = sorted(
        f"parquet.enable.dictionary#{column.name}"
        for columns in ANALYTICS.values()
        for column in columns
        if pa.types.is_timestamp(column.type)
    )
    before = {key: hadoop.get(key) for key in keys}
    for key in keys:
        hadoop.set(key, "false")
    try:
        yield
    finally:
        for key, value in before.items():
            if value is None:
                hadoop.unset(key)
            else:
                hadoop.set(key, value)


def at_once(calls: Sequence[Callable[[], Result]]) -> list[Result]:
    """Each call's result, the calls run in threads of their own: their Spark jobs run side
    by side. After the first error (or Ctrl-C), every Spark job is cancelled, those the
    other threads start later too, until all the threads have stopped; then it is raised.
    The calling thread only waits, never inside a call to the JVM: a signal finds it
    where it can be answered."""
    results: list[Any] = [None] * len(calls)
    errors: list[BaseException] = []
    # Whether each call is done, told by the call's thread itself: a Thread.join that a
    # signal interrupts can leave the thread's is_alive() false while it still runs
    # (Python 3.11), and a wait that believed it would let the run end under the jobs.
    done = [threading.Event() for _ in calls]

    def run(index: int) -> None:
        try:
            results[index] = calls[index]()
        except BaseException as error:  # handed to the caller's thread, which raises it
            errors.append(error)
        finally:
            done[index].set()

    for index in range(len(calls)):
        InheritableThread(target=run, args=(index,)).start()
    try:
        _wait(done, lambda: bool(errors))
    except BaseException as error:  # Ctrl-C, SIGTERM: stop the jobs, let the threads end
        with interrupts_deferred():
            if isinstance(error, KeyboardInterrupt):  # the user knows: Spark's words on
                with contextlib.suppress(Exception):  # each task it kills are noise
                    SparkSession.active().sparkContext.setLogLevel("OFF")
            _wait(done, lambda: True)
        raise
    if errors:
        raise errors[0]
    return results


def _wait(done: list[threading.Event], stopping: Callable[[], bool]) -> None:
    """Wait until every call is ``done``; while ``stopping()``, cancel every Spark job,
    again and again: a thread may start its next job after a cancel."""
    spark_context = SparkSession.active().sparkContext
    for event in done:
        while not event.wait(CANCEL_POLL_SECONDS):
            if stopping():
                spark_context.cancelAllJobs()


def read_back(spark: SparkSession, written: Mapping[str, str]) -> dict[str, DataFrame]:
    """The tables :func:`write_tables` wrote, read from their Parquet, for the queries
    that follow (the findings, a summary).

    Spark sizes a Parquet scan by its files and broadcasts what looks small. The analytics
    tables of repeated names and ids compress many times over: a table of millions of
    rows (the redeliveries of a storm) looked small enough to broadcast and became a
    gigabyte in the heap. From here on, scans are sized for what they hold in memory
    (unless the session was given a factor of its own).
    """
    if not spark.sparkContext.getConf().contains(SCAN_SIZE_FACTOR):
        spark.conf.set(SCAN_SIZE_FACTOR, PARQUET_EXPANSION)
    return {name: spark.read.parquet(path) for name, path in written.items()}
