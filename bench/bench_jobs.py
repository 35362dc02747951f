"""Time each analytics job (latency, permits, redelivery) and ``pwcap analyze`` on a large
decoded dataset, beside DuckDB answering each question's core query on the same Parquet.

The dataset is one of:

- ``--small SIZE``: the benchmark's small-frame capture (``bench_decode.py``'s ``small``
  shape; 640M holds about ten million frames) decoded by ``pwcap decode --jobs 1``, both
  kept under ``--data`` for the next run;
- ``--dataset DIR``: a decoded dataset;
- ``--seed DIR`` (by default the sample captures decoded) replicated with Spark until it
  holds ``--frames`` frame rows: every copy gets its own capture name, connection ids and
  later time range, so copies never match each other.

Each job runs as a user runs it, ``python jobs/<job>.py DATASET -o OUT --overwrite`` in a
process of its own (Spark's start included, with its default memory), then ``pwcap
analyze`` runs all three in one session. They take turns, ``--runs`` times, so a machine
that slows down slows them all; the table gives the median wall time and its spread
(fastest to slowest), and the median CPU time of the whole process tree, sampled from
``/proc`` (Spark's JVM outlives the wait for its Python parent). This machine is shared:
the load average is printed before and after.

    python bench/bench_jobs.py [--small 640M | --dataset DIR | --seed DIR] [--runs 3]
"""

from __future__ import annotations

import argparse
import math
import os
import shutil
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from statistics import median

import pyarrow.dataset as ds
from measure import measure
from options import DATA, parse_size

ROOT = Path(__file__).resolve().parent.parent
SAMPLES = ROOT / "sample_pcaps"
JOB_SCRIPTS = ROOT / "jobs"
DATASET_TABLES = ("frames", "messages", "connections", "anomalies")
JOBS = ("latency", "permits", "redelivery")

# Each question's core query in DuckDB, over the same Parquet: what one machine allows.
DUCKDB_CORE = {
    # answered requests' latency percentiles per kind, topic and minute; sends to deliveries
    "latency": """
        SELECT answers, topic, time_bucket(INTERVAL 1 minute, request_ts) AS minute, count(*),
               quantile_cont(epoch_us(ts) - epoch_us(request_ts), [0.5, 0.9, 0.99, 0.999])
        FROM frames WHERE answers IS NOT NULL AND request_ts IS NOT NULL GROUP BY ALL;
        SELECT count(*), quantile_cont(epoch_us(d.ts) - epoch_us(s.ts), 0.99)
        FROM (SELECT capture, topic, producer_name, sequence_id, min(ts) AS ts FROM messages
              WHERE command = 'SEND' GROUP BY ALL) s
        JOIN (SELECT capture, topic, producer_name, sequence_id, subscription, min(ts) AS ts
              FROM messages WHERE command = 'MESSAGE' GROUP BY ALL) d
        USING (capture, topic, producer_name, sequence_id)""",
    # each consumer's running permit balance, and how often it reached zero
    "permits": """
        SELECT capture, conn_id, consumer_id, count(*) FILTER (WHERE balance <= 0) FROM (
          SELECT capture, conn_id, consumer_id, sum(CASE WHEN command = 'FLOW' THEN permits
                 ELSE -coalesce(num_messages, 1) END)
                 OVER (PARTITION BY capture, conn_id, consumer_id ORDER BY ts, stream_offset)
                 AS balance
          FROM frames WHERE command IN ('FLOW', 'MESSAGE')) GROUP BY ALL""",
    # messages delivered more than once per subscription
    "redelivery": """
        SELECT count(*) FROM (SELECT capture, topic, subscription, ledger_id, entry_id,
               partition, batch_index FROM messages WHERE command = 'MESSAGE'
               GROUP BY ALL HAVING count(*) > 1)""",
}


def _count(text: str) -> int:
    scale = {"k": 10**3, "m": 10**6, "M": 10**6}
    return int(float(text[:-1]) * scale[text[-1]]) if text[-1] in scale else int(text)


# -- the dataset ---------------------------------------------------------------------------


def small_frames_dataset(data: Path, size: int) -> Path:
    """``pwcap decode --jobs 1`` of the benchmark's small-frame capture of ``size`` bytes,
    kept under ``data`` (decoding ten million frames takes minutes)."""
    from bench_decode import cached_capture

    capture, frames = cached_capture(data, "small", size)
    dataset = data / f"jobs_{capture.stem}"
    if dataset.is_dir() and not current_schema(dataset):
        print(f"{dataset} was decoded by an older pwcap: decoding it again", flush=True)
        if dataset.is_symlink():
            dataset.unlink()
        else:
            shutil.rmtree(dataset)
    if not dataset.is_dir():
        print(f"decoding {capture} ({frames:,} frames) into {dataset}", flush=True)
        pwcap = [sys.executable, "-m", "pwcap.cli", "decode", str(capture), "--jobs", "1", "-q"]
        subprocess.run([*pwcap, "-o", str(dataset)], check=True)
    return dataset


def current_schema(dataset: Path) -> bool:
    """Whether a kept dataset has the columns pwcap writes now (a table gains a column
    now and then: the jobs of this pwcap would fail, or time a different question)."""
    from pwcap.tables.schema import arrow_schema

    return all(
        ds.dataset(dataset / table).schema.names == arrow_schema(table).names
        for table in DATASET_TABLES
    )


def decode_samples(out: Path) -> Path:
    from pwcap.decode.driver import decode_captures

    captures = sorted(str(p) for p in SAMPLES.iterdir() if p.suffix in (".pcap", ".pcapng"))
    decode_captures(captures, out)
    return out


def replicate(spark, seed: Path, frames: int, out: Path) -> int:
    """Write ``seed`` copied until it has ``frames`` frame rows; return the rows written."""
    from pyspark.sql import functions as F

    from pwcap.jobs.common import read_table

    tables = {name: read_table(spark, [str(seed)], name) for name in DATASET_TABLES}
    seed_frames = tables["frames"].count()
    copies = math.ceil(frames / seed_frames)
    bounds = tables["frames"].agg(F.min("ts").alias("first"), F.max("ts").alias("last")).first()
    time_stride = int((bounds.last - bounds.first).total_seconds()) + 1
    copy = spark.range(copies).withColumnRenamed("id", "copy")
    for name, table in tables.items():
        shifted = table.crossJoin(copy)
        # conn_ids are hashes spread over 63 bits: a copy's are re-hashed with its number
        shifted = shifted.withColumn("conn_id", F.xxhash64("conn_id", "copy"))
        shifted = shifted.withColumn(
            "capture", F.concat("capture", F.lit("#"), F.col("copy").cast("string"))
        )
        for column, kind in table.dtypes:
            if kind == "timestamp":
                delay = F.make_interval(secs=F.col("copy") * time_stride)
                shifted = shifted.withColumn(column, F.col(column) + delay)
        shifted.drop("copy").write.mode("overwrite").parquet(str(out / name))
    return copies * seed_frames


def synthesized_dataset(args: argparse.Namespace, work: Path) -> Path:
    from pwcap.jobs.common import session

    spark = session("pwcap-bench-jobs")
    seed = args.seed or decode_samples(work / "seed")
    started = time.perf_counter()
    rows = replicate(spark, seed, args.frames, work / "dataset")
    print(f"synthesized {rows:,} frame rows in {time.perf_counter() - started:.1f} s")
    spark.stop()
    return work / "dataset"


# -- measuring -----------------------------------------------------------------------------


def run_process(argv: list[str]) -> tuple[float, float]:
    """Wall seconds of a whole process, Spark's start included, as a user waits for it,
    and the CPU seconds of its process tree (:func:`measure.measure`)."""
    run = measure(argv)
    if run.returncode:
        sys.exit(f"{' '.join(argv)} failed:\n{run.error}")
    return run.wall, run.cpu


def time_duckdb(dataset: Path, queries: str) -> float:
    import duckdb

    con = duckdb.connect()
    for table in ("frames", "messages"):
        con.execute(
            f"CREATE VIEW {table} AS SELECT * FROM read_parquet('{dataset / table}/**/*.parquet')"
        )
    started = time.perf_counter()
    for query in queries.split(";"):
        con.execute(query).fetchall()
    return time.perf_counter() - started


def commands(dataset: Path, out: Path) -> dict[str, Callable[[], tuple[float, float]]]:
    """Each job as ``python jobs/<job>.py``, then ``pwcap analyze``: one run each."""
    runs: dict[str, Callable[[], tuple[float, float]]] = {}
    for job in JOBS:
        script = [sys.executable, str(JOB_SCRIPTS / f"{job}.py"), str(dataset), "--overwrite"]
        runs[job] = lambda script=script, job=job: run_process([*script, "-o", str(out / job)])
    analyze = [sys.executable, "-m", "pwcap.cli", "analyze", str(dataset), "--overwrite"]
    runs["analyze"] = lambda: run_process([*analyze, "-o", str(out / "analyze")])
    return runs


def _spread(values: list[float]) -> str:
    return f"{median(values):6.1f} ({min(values):.1f}-{max(values):.1f})"


def load() -> str:
    return " ".join(Path("/proc/loadavg").read_text().split()[:3])


def main() -> int:
    parser = argparse.ArgumentParser(description=" ".join(__doc__.split("\n\n")[0].split()))
    source = parser.add_mutually_exclusive_group()
    source.add_argument("--small", type=parse_size, help="small-frame capture size, e.g. 640M")
    source.add_argument("--dataset", type=Path, help="a decoded dataset to run the jobs on")
    source.add_argument("--seed", type=Path, help="dataset to replicate (default: the samples)")
    parser.add_argument(
        "--frames",
        type=_count,
        default=_count("10M"),
        help="rows to synthesize from --seed, e.g. 10M",
    )
    parser.add_argument("--runs", type=int, default=3, help="runs of each contender")
    parser.add_argument("--data", type=Path, default=DATA, help="where --small keeps its files")
    parser.add_argument("--keep", type=Path, help="keep a synthesized dataset and outputs here")
    args = parser.parse_args()
    work = args.keep or Path(tempfile.mkdtemp(prefix="pwcap-bench-jobs-"))
    try:
        if args.small:
            args.data.mkdir(parents=True, exist_ok=True)
            dataset = small_frames_dataset(args.data, args.small)
        else:
            dataset = args.dataset or synthesized_dataset(args, work)
        frames = ds.dataset(dataset / "frames").count_rows()
        print(f"dataset {dataset}: {frames:,} frame rows, {os.cpu_count()} cores")
        print(f"load average before: {load()}\n", flush=True)
        runs = commands(dataset, work / "analytics")
        walls: dict[str, list[float]] = {name: [] for name in runs}
        cpus: dict[str, list[float]] = {name: [] for name in runs}
        duck: dict[str, list[float]] = {job: [] for job in JOBS}
        for _ in range(args.runs):
            for name, run in runs.items():
                wall, cpu = run()
                walls[name].append(wall)
                cpus[name].append(cpu)
                if name in DUCKDB_CORE:
                    duck[name].append(time_duckdb(dataset, DUCKDB_CORE[name]))
        print(f"{'':11} {'wall s, median (range)':>24} {'CPU s':>7} {'frames/s':>10}", end=" ")
        print(f"{'DuckDB s, median (range)':>26}")
        for name in runs:
            beside = _spread(duck[name]) if name in duck else "(all three, one session)"
            rate = frames / median(walls[name])
            cpu = median(cpus[name])
            print(f"{name:11} {_spread(walls[name]):>24} {cpu:7.1f} {rate:10,.0f} {beside:>26}")
        print(f"\nload average after: {load()}")
    finally:
        if args.keep is None:
            shutil.rmtree(work, ignore_errors=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
