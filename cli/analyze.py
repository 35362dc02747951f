"""``pwcap analyze DATASET... -o OUT``: the latency, permit and redelivery jobs in one local
Spark session, then the findings over what they wrote; a short summary of what stands out,
where the tables are, and the top findings last."""

from __future__ import annotations

import argparse
import sys
from functools import partial
from pathlib import Path
from typing import Any

from ..jobs.args import add_arguments as _add_job_arguments
from ..jobs.launch import driver_memory, java_problem
from ..tables.analytics import ANALYTICS
from ..tables.printable import TEXT_LIMIT, printable
from .paths import PathError, check_dataset, check_new_output, check_writable

TOP = 5
TOP_FINDINGS = 10  # the findings printed last


def add_arguments(parser: argparse.ArgumentParser) -> None:
    _add_job_arguments(parser)
    parser.add_argument(
        "--driver-memory",
        metavar="SIZE",
        help="memory of the local Spark that runs the jobs, as Spark writes it (4g, 1500m);"
        " default: half the memory available now",
    )
    parser.add_argument(
        "--conf",
        action="append",
        default=[],
        type=_spark_setting,
        metavar="KEY=VALUE",
        help="a Spark setting, as spark-submit's --conf (repeatable)",
    )


def _spark_setting(text: str) -> tuple[str, str]:
    key, equals, value = text.partition("=")
    if not equals or not key.strip():
        raise argparse.ArgumentTypeError(f"not KEY=VALUE: {text!r}")
    return key.strip(), value


def run(args: argparse.Namespace) -> int:
    from ..jobs.common import interrupted
    from ..tables.interrupts import signals_as_interrupt

    written: dict[str, str] = {}
    try:
        with signals_as_interrupt():
            return _analyze(args, written)
    except KeyboardInterrupt as interrupt:
        return interrupted("pwcap analyze", args.output, interrupt, bool(written))


def _analyze(args: argparse.Namespace, written: dict[str, str]) -> int:
    """The run; ``written`` gets the tables once they are all in place."""
    # Imported here: pyspark is only needed by this sub-command, and slow to import.
    from ..jobs.common import at_once, missing_datasets, session
    from ..tables.interrupts import signals_as_interrupt

    try:
        for dataset in missing_datasets(args.datasets):
            check_dataset(Path(dataset))  # says why, in one line
        if "://" not in args.output:
            check_new_output(Path(args.output), args.overwrite)
            check_writable(Path(args.output))
    except PathError as error:
        return _error(str(error))
    problem = java_problem()
    if problem is not None:
        return _error(problem)
    launch = {"spark.driver.memory": args.driver_memory or driver_memory(), **dict(args.conf)}
    spark = session("pwcap-analyze", args.verbose, launch)
    with signals_as_interrupt():  # not PySpark's handler: the main thread waits, for a signal
        return at_once([partial(_run_jobs, spark, args, written)])[0]


def _run_jobs(spark: Any, args: argparse.Namespace, written: dict[str, str]) -> int:
    """The jobs, their tables and the summary, once Spark runs."""
    from ..jobs import findings, latency, permits, redelivery
    from ..jobs.common import output_refusal, read_back, read_table, write_concurrently
    from .analyze_progress import AnalyzeProgress

    problem = output_refusal(args.output, args.overwrite, spark)  # a remote one, now Spark runs
    if problem is not None:
        return _error(problem)
    conf = spark.sparkContext.getConf()
    print(
        f"pwcap analyze: Spark {conf.get('spark.master')}, driver memory"
        f" {conf.get('spark.driver.memory', '1g')} (--driver-memory to change)",
        file=sys.stderr,
    )
    # Not cached: each job reads a few columns, which a Parquet scan gives long before a
    # cache of every column would be built.
    frames, messages, connections = (
        read_table(spark, args.datasets, name) for name in ("frames", "messages", "connections")
    )
    # One group per job, each built and written in a thread of its own (a job's eager
    # checks run then too): the longest first, so it is never left to run alone at the end.
    groups = [
        partial(latency.tables, frames, messages, connections, args.window),
        partial(redelivery.tables, frames, messages, args.window),
        partial(permits.tables, frames),
    ]

    # The findings read what the jobs wrote, so they come after them.
    found = partial(findings.tables, frames, messages, connections)
    if sys.stderr.isatty():
        with AnalyzeProgress(spark.sparkContext, len(ANALYTICS), sys.stderr) as progress:
            written.update(
                write_concurrently(groups, args.output, progress, args.datasets, then=found)
            )
    else:
        written.update(write_concurrently(groups, args.output, datasets=args.datasets, then=found))
    results = read_back(spark, written)
    print(summary(results))
    print(f"\nTables under {printable(args.output, None)}:")
    for name, path in written.items():
        print(f"  {name:22} {printable(path, None)}")
    print()
    print(top_findings(results["findings"]))
    return 0


def _error(message: str) -> int:
    print(f"pwcap analyze: error: {printable(message, None)}", file=sys.stderr)
    return 1


def summary(results: dict[str, Any]) -> str:
    """The human part: worst latencies, most-starved consumers, most-redelivered
    subscriptions, computed from the written tables."""
    from pyspark.sql import functions as F

    from ..jobs.latency import DELIVERY_ACK

    lines = ["Worst latencies (p99 by kind, microseconds):"]
    kinds = latency_by_kind(results["latency_pairs"])
    for row in sorted(kinds, key=_p99_first)[:TOP]:
        p50, p99 = row.q or (None, None)
        lines.append(
            f"  {printable(row.kind):22} n={row.n:<8} p50={_num(p50):>10} p99={_num(p99):>10}"
            f" max={_num(row.max):>10} unanswered={row.unanswered}"
        )
    never = sorted(
        (row for row in kinds if row.unanswered and row.kind != DELIVERY_ACK),
        key=lambda row: (-row.unanswered, row.kind),
    )
    if never:
        listed = ", ".join(f"{printable(row.kind)} {row.unanswered}" for row in never)
        lines.append(f"  requests never answered: {listed}")
    lines.append("Most-starved consumers:")
    starved = (
        results["permit_summary"]
        .where(F.col("starved_us") > 0)
        .orderBy(F.desc("starved_us"))
        .limit(TOP)
        .collect()
    )
    for row in starved:
        lines.append(
            f"  conn {row.conn_id} consumer {row.consumer_id} ({printable(row.subscription)}):"
            f" {row.starvation_spans} spans, {row.starved_us / 1e6:.3f} s starved"
            f" ({row.starved_fraction:.0%} of its life), queue {row.receiver_queue_size}"
        )
    if not starved:
        lines.append("  none")
    lines.append("Most-redelivered subscriptions:")
    redelivered = (
        results["redelivery_summary"]
        .groupBy("topic", "subscription")
        .agg(F.sum("redeliveries").alias("redeliveries"), F.sum("deliveries").alias("deliveries"))
        .where(F.col("redeliveries") > 0)
        .orderBy(F.desc("redeliveries"))
        .limit(TOP)
        .collect()
    )
    for row in redelivered:
        lines.append(
            f"  {printable(row.topic)} / {printable(row.subscription)}:"
            f" {row.redeliveries} redeliveries"
            f" of {row.deliveries} deliveries"
        )
    if not redelivered:
        lines.append("  none")
    return "\n".join(lines)


def top_findings(table: Any) -> str:
    """The last lines of the run: the most severe findings, or that there are none."""
    total = table.count()
    if not total:
        return "Findings: none: no problem found in the capture."
    rows = table.orderBy("rank").limit(TOP_FINDINGS).collect()
    shown = f"the top {len(rows)} of {total}" if total > len(rows) else str(total)
    lines = [f"Findings ({shown}; all in the findings table):"]
    for row in rows:
        cause = f" ({row.cause})" if row.cause else ""
        # A sentence with names from the wire in it, each up to 10,000 characters: cut.
        line = f"{row.rank}. [{row.severity}] {row.kind}{cause}: {row.explanation}"
        lines.append(f"  {printable(line, TEXT_LIMIT)}")
    return "\n".join(lines)


def latency_by_kind(pairs: Any) -> list[Any]:
    """Per kind of pair: answered pairs ``n``, ``unanswered`` ones, the exact median and
    99th percentile ``q`` and the ``max`` latency; one pass over the pairs. Counted per
    distinct latency first (whole microseconds repeat), as ``latency_summary`` does, so the
    percentile sees each value once with its count, rather than sorting every latency."""
    from pyspark.sql import functions as F

    per_value = pairs.groupBy("kind", "latency_us").agg(
        F.count("*").alias("pairs"),
        F.count(F.when(F.col("outcome") == "unanswered", 1)).alias("unanswered"),
    )
    latency = F.col("latency_us")
    answered = F.when(latency.isNotNull(), F.col("pairs")).otherwise(0)
    quantiles = F.percentile(latency, F.array(F.lit(0.5), F.lit(0.99)), F.col("pairs"))
    return (
        per_value.groupBy("kind")
        .agg(
            F.sum(answered).alias("n"),
            F.sum("unanswered").alias("unanswered"),
            quantiles.alias("q"),
            F.max(latency).alias("max"),
        )
        .collect()
    )


def _p99_first(row: Any) -> tuple[bool, float, str]:
    """Sort key: the highest 99th percentile first, kinds without one last, ties by name."""
    p99 = row.q[1] if row.q else None
    return (p99 is None, -(p99 or 0), row.kind)


def _num(value: float | None) -> str:
    return "-" if value is None else f"{value:,.0f}"
