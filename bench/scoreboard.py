"""Run contenders on one capture in turns and print one table: costs, rates and ratios.

The contenders take turns (A B C, A B C, ...) so a machine that slows down mid-run slows
them all; each figure is the median over the runs. Rates are per CPU-second (user+sys of
the process and its children): this machine is shared, wall time only says how busy it
was. The first contender is the one the others are compared with: a ratio is the other's
time over the first's (above 1: the first is faster).
"""

from __future__ import annotations

import sys
from dataclasses import dataclass
from statistics import median

from contenders import Contender
from measure import Measurement, measure


@dataclass(frozen=True)
class Result:
    """A contender's runs summed up: medians of the times, the largest peaks."""

    contender: Contender
    runs: int
    user: float
    sys: float
    cpu: float
    wall: float
    peak_mb: float
    tree_peak_mb: float


def summarize(contender: Contender, runs: list[Measurement]) -> Result:
    def mid(figure: str) -> float:
        return median(getattr(run, figure) for run in runs)

    return Result(
        contender,
        len(runs),
        *map(mid, ("user", "sys", "cpu", "wall")),
        max(run.peak_mb for run in runs),
        max(run.tree_peak_mb for run in runs),
    )


def contest(contenders: list[Contender], runs: int) -> list[Result]:
    measured: list[list[Measurement]] = [[] for _ in contenders]
    for _ in range(runs):
        for contender, done in zip(contenders, measured, strict=True):
            run = measure(contender.argv)
            if run.returncode != 0:
                said = run.error or "(nothing said)"  # its figures would time an error
                sys.exit(f"{contender.name} exited {run.returncode}: {said}")
            done.append(run)
    pairs = zip(contenders, measured, strict=True)
    return [summarize(contender, done) for contender, done in pairs]


def print_table(results: list[Result], frames: int, megabytes: float) -> None:
    first = results[0]
    tick = 1e-3  # cat of a cached file can take less CPU than the clock resolves
    print(
        f"  {'contender':36} {'wall s':>8} {'CPU s':>8} {'user':>7} {'sys':>6}"
        f" {'frames/CPU-s':>13} {'MB/CPU-s':>9} {'peak MB':>8} {'tree MB':>8}"
        f"  {'ratio CPU':>9} {'wall':>6}"
    )
    for result in results:
        ratio = (
            f"{result.cpu / first.cpu:8.2f}x {result.wall / first.wall:5.2f}x"
            if result is not first
            else f"{'-':>9} {'-':>6}"
        )
        print(
            f"  {result.contender.name:36} {result.wall:8.2f} {result.cpu:8.2f}"
            f" {result.user:7.2f} {result.sys:6.2f}"
            f" {frames / max(result.cpu, tick):13,.0f} {megabytes / max(result.cpu, tick):9.1f}"
            f" {result.peak_mb:8.0f} {result.tree_peak_mb:8.0f}  {ratio}"
        )
    print(f"  ({first.runs} run(s) each, medians; ratios: contender / {first.contender.name})")
