"""Time each analytics job (latency, permits, redelivery) on a large decoded dataset.

The dataset is either given (``--dataset``, e.g. ``pwcap decode`` of a capture written by
``bench/bench_decode.py --keep``) or synthesized: a seed dataset (``--seed``, by default
the sample captures decoded) replicated with Spark until it holds ``--frames`` frame rows.
Every copy gets its own capture name, connection ids and a later time range, so copies
never match each other and each job does the work of a real capture of that size.

    python bench/bench_jobs.py [--dataset DIR | --seed DIR] [--frames 10M] [--keep DIR]

Each job runs as a user runs it, ``python jobs/<job>.py`` in a process of its own (Spark's
start included), then ``pwcap analyze`` runs all three in one session; Spark is local on
every core with ``--driver-memory`` (default 6g). Beside each job, DuckDB answers the
question's core query on the same Parquet: what this hardware allows.
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
from pathlib import Path

SAMPLES = Path(__file__).resolve().parent.parent / "sample_pcaps"
DATASET_TABLES = ("frames", "messages", "connections", "anomalies")


def _count(text: str) -> int:
    scale = {"k": 10**3, "m": 10**6, "M": 10**6}
    return int(float(text[:-1]) * scale[text[-1]]) if text[-1] in scale else int(text)


def decode_samples(out: Path) -> Path:
    from pwcap.decode.driver import decode_captures

    captures = sorted(str(p) for p in SAMPLES.iterdir() if p.suffix in (".pcap", ".pcapng"))
    decode_captures(captures, out)
    return out


def replicate(spark, seed: Path, frames: int, out: Path) -> int:
    """Write ``seed`` copied until it has ``frames`` frame rows; return the rows written."""
    from pwcap.jobs.common import read_table
    from pyspark.sql import functions as F

    tables = {name: read_table(spark, [str(seed)], name) for name in DATASET_TABLES}
    seed_frames = tables["frames"].count()
    copies = math.ceil(frames / seed_frames)
    bounds = (
        tables["frames"]
        .agg(
            F.min("ts").alias("first"),
            F.max("ts").alias("last"),
        )
        .first()
    )
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


JOBS = ("latency", "permits", "redelivery")
JOB_SCRIPTS = Path(__file__).resolve().parent.parent / "jobs"

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


def time_process(command: list[str]) -> float:
    """Wall seconds of a whole process, Spark's start included, as a user waits for it."""
    started = time.perf_counter()
    subprocess.run(command, check=True, stdout=subprocess.DEVNULL)
    return time.perf_counter() - started


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


def time_jobs(dataset: Path, out: Path) -> list[tuple[str, float, float]]:
    """Each job as its own ``python jobs/<job>.py`` process (its driver memory from
    ``PYSPARK_SUBMIT_ARGS``), beside DuckDB's core query."""
    results = []
    for job in JOBS:
        script = [sys.executable, str(JOB_SCRIPTS / f"{job}.py"), str(dataset)]
        seconds = time_process([*script, "-o", str(out / job)])
        results.append((job, seconds, time_duckdb(dataset, DUCKDB_CORE[job])))
    return results


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    source = parser.add_mutually_exclusive_group()
    source.add_argument("--dataset", type=Path, help="a decoded dataset to run the jobs on")
    source.add_argument("--seed", type=Path, help="dataset to replicate (default: the samples)")
    parser.add_argument("--frames", type=_count, default=_count("10M"), help="e.g. 10M")
    parser.add_argument("--driver-memory", default="6g")
    parser.add_argument("--keep", type=Path, help="keep the dataset and outputs here")
    args = parser.parse_args()
    os.environ.setdefault(
        "PYSPARK_SUBMIT_ARGS", f"--driver-memory {args.driver_memory} pyspark-shell"
    )
    from pwcap.jobs.common import session

    work = args.keep or Path(tempfile.mkdtemp(prefix="pwcap-bench-jobs-"))
    try:
        spark = session("pwcap-bench-jobs")
        dataset = args.dataset
        if dataset is None:
            seed = args.seed or decode_samples(work / "seed")
            started = time.perf_counter()
            rows = replicate(spark, seed, args.frames, work / "dataset")
            print(f"synthesized {rows:,} frame rows in {time.perf_counter() - started:.1f} s")
            dataset = work / "dataset"
        frames = spark.read.parquet(str(dataset / "frames")).count()
        spark.stop()
        print(f"dataset {dataset}: {frames:,} frame rows, {os.cpu_count()} cores\n")
        print(f"{'job':12} {'seconds':>8} {'frames/s':>12} {'duckdb s':>9}")
        for name, seconds, duck in time_jobs(dataset, work / "analytics"):
            print(f"{name:12} {seconds:8.1f} {frames / seconds:12,.0f} {duck:9.1f}")
        analyze = [sys.executable, "-m", "pwcap.cli", "analyze", str(dataset), "--overwrite"]
        memory = ["--driver-memory", args.driver_memory]
        seconds = time_process([*analyze, *memory, "-o", str(work / "analyze")])
        print(f"{'analyze':12} {seconds:8.1f} {frames / seconds:12,.0f}  (all three, one session)")
    finally:
        if args.keep is None:
            shutil.rmtree(work, ignore_errors=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
