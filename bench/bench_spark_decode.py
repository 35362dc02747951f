"""``jobs/decode.py`` on 16 captures, ``local[2]`` against ``local[1]``: issue 11's target.

The captures are links to one synthetic capture of ``bench_decode.py``'s ``small`` shape
(30 MB each by default) under 16 names, so each is decoded as a capture of its own. Both
runs are measured from outside (wall, CPU of the whole process tree, peak memory), then
their output is compared with ``pwcap decode`` of the same folder: rows per table, frames
per command and the digests of the messages.

    python bench/bench_spark_decode.py [--size 30M] [--count 16] [--runs 1] [--data DIR]
"""

from __future__ import annotations

import argparse
import os
import shutil
import subprocess
import sys
from collections import Counter
from pathlib import Path

import pyarrow.dataset as ds
from bench_decode import cached_capture
from contenders import Contender, engine_checked
from options import add_options
from scoreboard import contest, print_table

ROOT = Path(__file__).resolve().parent.parent
SPEEDUP = 1.6  # issue 11: local[2] against local[1]


def captures(data: Path, size: int, count: int) -> tuple[Path, int]:
    """A folder of ``count`` captures and the frames in all of them."""
    capture, frames = cached_capture(data, "small", size)
    folder = data / f"spark_decode_{count}x{size / 1e6:g}M"
    if not folder.is_dir():
        folder.mkdir()
        for index in range(count):
            os.link(capture, folder / f"broker{index:02d}.pcap")
    return folder, frames * count


def spark_decode(folder: Path, out: Path, master: str) -> Contender:
    """The job as ``python jobs/decode.py`` runs it: the local Spark it starts itself
    (driver memory sized to the machine, pwcap's JVM options), on ``master``."""
    job = [str(ROOT / "jobs" / "decode.py"), str(folder), "-o", str(out), "--overwrite"]
    submit = f"PYSPARK_SUBMIT_ARGS=--master {master} pyspark-shell"
    return Contender(f"jobs/decode.py {master}", ["env", submit, sys.executable, *job])


def contents(dataset: Path) -> dict[str, object]:
    """What both decodes must agree on: rows per table, frames per command, digests."""
    tables = {t: ds.dataset(dataset / t) for t in ("frames", "messages", "connections")}
    return {
        "rows": {name: table.count_rows() for name, table in tables.items()},
        "commands": Counter(tables["frames"].to_table(["command"])[0].to_pylist()),
        "digests": Counter(tables["messages"].to_table(["payload_sha256"])[0].to_pylist()),
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    add_options(parser, size="30M", runs=1)
    parser.add_argument("--count", type=int, default=16, help="captures in the folder")
    args = parser.parse_args()
    print(engine_checked(args.allow_interpreted))
    args.data.mkdir(parents=True, exist_ok=True)
    folder, frames = captures(args.data, args.size, args.count)
    outs = {master: args.data / f"out_spark_{master[6]}" for master in ("local[2]", "local[1]")}
    runs = [spark_decode(folder, out, master) for master, out in outs.items()]
    results = contest(runs, args.runs)
    megabytes = sum(p.stat().st_size for p in folder.iterdir()) / 1e6
    print(f"jobs/decode.py on {args.count} captures ({megabytes:,.0f} MB) in {folder}")
    print_table(results, frames, megabytes)
    speedup = results[1].wall / results[0].wall
    print(
        f"  issue 11 target: local[2] at least {SPEEDUP}x local[1] (wall): {speedup:.2f}x:"
        f" {'met' if speedup >= SPEEDUP else 'NOT met'}"
    )
    expected = args.data / "out_spark_pwcap"
    shutil.rmtree(expected, ignore_errors=True)
    pwcap = [sys.executable, "-m", "pwcap.cli", "decode", str(folder), "-o", str(expected), "-q"]
    subprocess.run(pwcap, check=True)
    same = all(contents(out) == contents(expected) for out in outs.values())
    print(f"  output equals pwcap decode (rows, commands, digests): {'yes' if same else 'NO'}")


if __name__ == "__main__":
    main()
