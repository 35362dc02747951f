"""Time each analytics job (latency, permits, redelivery) on a large decoded dataset.

The dataset is either given (``--dataset``, e.g. ``pwcap decode`` of a capture written by
``bench/bench_decode.py --keep``) or synthesized: a seed dataset (``--seed``, by default
the sample captures decoded) replicated with Spark until it holds ``--frames`` frame rows.
Every copy gets its own capture name, connection ids and a later time range, so copies
never match each other and each job does the work of a real capture of that size.

    python bench/bench_jobs.py [--dataset DIR | --seed DIR] [--frames 10M] [--keep DIR]

Spark runs locally on every core with ``--driver-memory`` (default 6g); one session serves
all jobs, so the first one also pays for the JVM's warm-up (its time is shown apart).
"""

from __future__ import annotations

import argparse
import math
import os
import shutil
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
    from pwcap.decode.run import decode_captures

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


def time_jobs(spark, dataset: Path, out: Path) -> list[tuple[str, float, dict[str, int]]]:
    from pwcap.jobs import latency, permits, redelivery
    from pwcap.jobs.common import write_tables

    results = []
    for name, job in (("latency", latency), ("permits", permits), ("redelivery", redelivery)):
        started = time.perf_counter()
        written = write_tables(job.build(spark, [str(dataset)], "1 minutes"), str(out / name))
        seconds = time.perf_counter() - started
        rows = {table: spark.read.parquet(path).count() for table, path in written.items()}
        results.append((name, seconds, rows))
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
        print(f"dataset {dataset}: {frames:,} frame rows, {os.cpu_count()} cores\n")
        print(f"{'job':12} {'seconds':>8} {'frames/s':>12}  output rows")
        for name, seconds, rows in time_jobs(spark, dataset, work / "analytics"):
            counts = ", ".join(f"{table} {n:,}" for table, n in rows.items())
            print(f"{name:12} {seconds:8.1f} {frames / seconds:12,.0f}  {counts}")
    finally:
        if args.keep is None:
            shutil.rmtree(work, ignore_errors=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
