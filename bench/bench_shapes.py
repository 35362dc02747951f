"""Every shape of Pulsar traffic of issue 37: ``pwcap decode`` against its peers, one run.

Each shape is a capture kept under ``--data`` (made the first time), most of them copies of
one real-client recording one after another, each copy a connection of its own
(``replica.py``; ``--copies``, 40 by default, as the issue measured):

- ``lz4``, ``zlib``, ``zstd``, ``snappy``: a batching producer and its consumer, 2,000
  messages of 300 bytes in batches of 100 (``bench/samples/pulsar_batch_*``);
- ``entry-metadata``: batches delivered with broker entry metadata
  (``sample_pcaps/pulsar_entry_metadata``);
- ``chunked``: messages of up to 20 kB chunked at 6 KiB (``pulsar_chunked``);
- ``large``: messages of 100 kB, neither batched nor chunked (``bench/samples/pulsar_large``);
- ``plain``: one message per frame, with keys and properties (``pulsar_plain``);
- ``small``: ``bench_decode.py``'s small frames (1 GB by default, ``--small-size``);
- ``real-clients``: every real-client sample, copies overlapping (``bench_real_clients.py``'s
  capture, about 50 MB);
- ``start``: one recording as it is (``pulsar_batching_compression``, 24 kB, every codec):
  what a decode costs before and around its first packets.

On each, the contenders take turns (``scoreboard.py``): ``pwcap decode`` (Parquet written,
``--jobs 1``), tshark with the Pulsar plugin, tshark with the Pulsar ports as ``data``, and
``cat`` (``contenders.py``). pwcap's frames and message rows must equal the recordings'
counts (truth files, broker journals). ``jobs`` times ``pwcap decode --jobs 2`` against
``--jobs 1`` on about 200 MB of real-client traffic (``--jobs-size``), wall time. A summary
table (Markdown) and issue 37's targets end the run.

    python bench/bench_shapes.py [--runs 3] [--copies 40] [--shape lz4 ... jobs]
        [--small-size 1G] [--jobs-size 200M] [--data DIR] [--allow-interpreted]
"""

from __future__ import annotations

import argparse
import os
import sys
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from bench_decode import SERVER_PORT, cached_capture
from contenders import (
    CAT,
    FLOOR,
    ONE_PROCESS,
    PLUGIN,
    TSHARK_DATA,
    Contender,
    decoded_rows,
    engine_checked,
    parquet_floor,
    peers,
    pwcap_decode,
)
from measure import measure
from options import DATA, add_engine_option, parse_size
from parquet_floor import keep_as_arrow
from replica import (
    BENCH_SAMPLES,
    SAMPLES,
    Replica,
    load_sample,
    plan,
    real_client_samples,
    write_replica,
)
from scoreboard import Result, contest, print_table

# Issue 37's targets.
PLUGIN_RATIO = 3.0  # pwcap this many times faster than the plugin (CPU), small frames aside
LZ4_MESSAGES = 1_000_000  # per CPU-second
SMALL_FRAMES = 600_000  # per CPU-second
START_CPU = 0.15  # seconds
JOBS_SPEEDUP = 1.8  # --jobs 2 over --jobs 1, wall time
MEMORY_MB = 400


@dataclass(frozen=True)
class Shape:
    """One capture to measure, and what a full decode of it holds."""

    name: str
    capture: Path
    frames: int
    messages: int | None  # None: not known apart from pwcap, so not checked
    ports: list[int]
    batched: bool


def _cached_replica(data: Path, name: str, replica: Replica) -> Path:
    capture = data / f"{name}_{replica.copies}x.pcap"
    if not capture.exists():  # written whole under another name first: never half a file
        partial = capture.with_suffix(".part")
        write_replica(partial, replica)
        partial.rename(capture)
    return capture


def _copies(name: str, path: Path, batched: bool) -> Callable[[argparse.Namespace], Shape]:
    """The shape ``name``: ``--copies`` copies of one recording, one after another."""

    def make(args: argparse.Namespace) -> Shape:
        sample = load_sample(path)
        replica = Replica(args.copies, [sample], one_after_another=True)
        capture = _cached_replica(args.data, name, replica)
        return Shape(name, capture, replica.frames, replica.messages, replica.ports, batched)

    return make


def _real_clients(size: int, data: Path) -> Shape:
    replica = plan(real_client_samples(), size)
    capture = _cached_replica(data, "real_clients", replica)
    return Shape("real-clients", capture, replica.frames, replica.messages, replica.ports, False)


def _small(args: argparse.Namespace) -> Shape:
    capture, frames = cached_capture(args.data, "small", args.small_size)
    return Shape("small", capture, frames, None, [SERVER_PORT], False)


def _start(_: argparse.Namespace) -> Shape:
    sample = load_sample(SAMPLES / "pulsar_batching_compression.pcap")
    capture = SAMPLES / sample.name
    return Shape("start", capture, sample.frames, sample.messages, [sample.server_port], False)


# The shapes made of copies of one recording: the recording, and whether it is batched.
RECORDINGS = {
    **{
        codec: (BENCH_SAMPLES / f"pulsar_batch_{codec}.pcap", True)
        for codec in ("lz4", "zlib", "zstd", "snappy")
    },
    "entry-metadata": (SAMPLES / "pulsar_entry_metadata.pcap", True),
    "chunked": (SAMPLES / "pulsar_chunked.pcap", False),
    "large": (BENCH_SAMPLES / "pulsar_large.pcap", False),
    "plain": (SAMPLES / "pulsar_plain.pcap", False),
}
SHAPES: dict[str, Callable[[argparse.Namespace], Shape]] = {
    **{name: _copies(name, *recording) for name, recording in RECORDINGS.items()},
    "small": _small,
    "real-clients": lambda args: _real_clients(parse_size("50M"), args.data),
    "start": _start,
}


@dataclass(frozen=True)
class Measured:
    """A shape and its contenders' results, pwcap's first."""

    shape: Shape
    results: list[Result]
    megabytes: float

    def of(self, name: str) -> Result | None:
        """The result of the contender ``name``, if it ran (a peer may be missing)."""
        return next((r for r in self.results if r.contender.name == name), None)

    @property
    def pwcap(self) -> Result:
        return self.results[0]


def _checked(out: Path, shape: Shape) -> None:
    """Exit unless pwcap's dataset holds what the capture does: else its time is not a
    decode's."""
    counts = [("frames", shape.frames), ("messages", shape.messages)]
    for table, expected in counts:
        decoded = decoded_rows(out, table)
        if expected is not None and decoded != expected:
            sys.exit(
                f"{shape.name}: pwcap wrote {decoded:,} {table} rows of {expected:,}:"
                " figures not comparable"
            )


def measure_shape(shape: Shape, args: argparse.Namespace) -> Measured:
    megabytes = shape.capture.stat().st_size / 1e6
    out = args.data / f"out_shape_{shape.name}"
    others, notes = peers(shape.capture, shape.ports)
    messages = "" if shape.messages is None else f", {shape.messages:,} messages"
    print(
        f"\n{shape.name}: {shape.capture} ({megabytes:,.2f} MB, {shape.frames:,} frames{messages})"
    )
    for note in notes:
        print(f"  {note}")
    decode = pwcap_decode(shape.capture, out, *ONE_PROCESS)
    floor = _floor(decode, out, args.data / f"floor_{shape.name}")
    results = contest([decode, floor, *others], args.runs)
    _checked(out, shape)
    print_table(results, shape.frames, megabytes)
    return Measured(shape, results, megabytes)


def _floor(decode: Contender, out: Path, work: Path) -> Contender:
    """The shape's Parquet floor (``parquet_floor.py``): its tables, from one decode made
    now (not timed), written again."""
    made = measure(decode.argv)
    if made.returncode != 0:
        sys.exit(f"{decode.name} exited {made.returncode}: {made.error or '(nothing said)'}")
    keep_as_arrow(out, work / "arrow")
    return parquet_floor(work / "arrow", work / "written")


def compare_jobs(args: argparse.Namespace) -> tuple[float, Result, Result]:
    """``--jobs 2`` against ``--jobs 1`` on real-client traffic: the wall-time speedup."""
    shape = _real_clients(args.jobs_size, args.data)
    megabytes = shape.capture.stat().st_size / 1e6
    print(f"\njobs: {shape.capture} ({megabytes:,.0f} MB, {shape.frames:,} frames)")
    outs = {jobs: args.data / f"out_shape_jobs{jobs}" for jobs in ("2", "1")}
    runs = [pwcap_decode(shape.capture, out, "--jobs", jobs) for jobs, out in outs.items()]
    results = contest(runs, args.runs)
    for out in outs.values():
        _checked(out, shape)
    print_table(results, shape.frames, megabytes)
    return results[1].wall / results[0].wall, results[1], results[0]


def _seconds(result: Result | None, wall: bool = True) -> str:
    if result is None:
        return "-"
    return f"{result.cpu:.2f} ({result.wall:.2f})" if wall else f"{result.cpu:.2f}"


def print_summary(measured: list[Measured]) -> None:
    """One Markdown table: every shape's CPU seconds (wall in brackets), medians."""
    start = next((m.pwcap.cpu for m in measured if m.shape.name == "start"), None)
    print(
        "\n| shape | capture | pwcap CPU s (wall) | Parquet floor CPU s | plugin CPU s (wall)"
        " | tshark data CPU s | cat CPU s | pwcap vs plugin (CPU) | messages per CPU-s"
        " | beyond the start | pwcap peak MB |"
    )
    print("|---|---|---|---|---|---|---|---|---|---|---|")
    for m in measured:
        shape, pwcap, plugin = m.shape, m.pwcap, m.of(PLUGIN)
        ratio = "-" if plugin is None else f"{plugin.cpu / pwcap.cpu:.2f}x"
        rates = ["-", "-"]
        if shape.batched and shape.messages is not None:
            rates[0] = f"{shape.messages / pwcap.cpu:,.0f}"
            if start is not None and shape.name != "start" and pwcap.cpu > start:
                rates[1] = f"{shape.messages / (pwcap.cpu - start):,.0f}"
        messages = "" if shape.messages is None else f", {shape.messages:,} msgs"
        print(
            f"| {shape.name} | {m.megabytes:,.1f} MB, {shape.frames:,} frames{messages}"
            f" | {_seconds(pwcap)} | {_seconds(m.of(FLOOR), False)} | {_seconds(plugin)}"
            f" | {_seconds(m.of(TSHARK_DATA), False)}"
            f" | {_seconds(m.of(CAT), False)} | {ratio} | {rates[0]} | {rates[1]}"
            f" | {pwcap.peak_mb:.0f} |"
        )
    print(
        f"\n({measured[0].pwcap.runs} run(s) each, medians; pwcap vs plugin: the plugin's CPU"
        " time over pwcap's, above 1 pwcap is faster; beyond the start: messages over pwcap's"
        " CPU time less the start shape's; Parquet floor: the decode's tables written again"
        " with nothing decoded, parquet_floor.py)"
    )


def _verdict(met: bool) -> str:
    return "met" if met else "NOT met"


def _room(budget: float, floor: Result | None) -> str:
    """What a target's CPU budget leaves beside the Parquet floor (the output alone)."""
    if floor is None:
        return ""
    left = "out of reach while these tables are written" if floor.cpu >= budget else "room left"
    return f" (budget {budget:.3f} s, Parquet floor {floor.cpu:.3f} s: {left})"


def print_targets(measured: list[Measured], jobs: tuple[float, Result, Result] | None) -> None:
    print("\nissue 37 targets:")
    for m in measured:
        shape, pwcap, plugin, floor = m.shape, m.pwcap, m.of(PLUGIN), m.of(FLOOR)
        if shape.name == "small":
            rate = shape.frames / pwcap.cpu
            print(
                f"  small: {SMALL_FRAMES:,} frames per CPU-second: {rate:,.0f}:"
                f" {_verdict(rate >= SMALL_FRAMES)}{_room(shape.frames / SMALL_FRAMES, floor)}"
            )
        elif shape.name == "start":
            print(
                f"  start: under {START_CPU} s of CPU: {pwcap.cpu:.3f} s:"
                f" {_verdict(pwcap.cpu < START_CPU)}"
            )
        elif plugin is not None:
            ratio = plugin.cpu / pwcap.cpu
            print(
                f"  {shape.name}: {PLUGIN_RATIO}x the plugin (CPU): {ratio:.3f}x:"
                f" {_verdict(ratio >= PLUGIN_RATIO)}{_room(plugin.cpu / PLUGIN_RATIO, floor)}"
            )
        if shape.name == "lz4" and shape.messages is not None:
            rate = shape.messages / pwcap.cpu
            print(
                f"  lz4: {LZ4_MESSAGES:,} messages per CPU-second: {rate:,.0f}:"
                f" {_verdict(rate >= LZ4_MESSAGES)}{_room(shape.messages / LZ4_MESSAGES, floor)}"
            )
    if jobs is not None:
        speedup, one, two = jobs
        # --jobs 1 already runs on more than one core (the Parquet writer's thread): on
        # this machine's cores, --jobs 2 can be at most cores / (its CPU over its wall)
        # faster, however well the work splits. A busy machine lengthens the wall, so the
        # bound printed is then looser still, never tighter.
        cores = len(os.sched_getaffinity(0))
        ceiling = cores / (one.cpu / one.wall)
        print(
            f"  jobs: --jobs 2 at least {JOBS_SPEEDUP}x --jobs 1 (wall): {speedup:.2f}x"
            f" (--jobs 1 {one.wall:.2f} s, --jobs 2 {two.wall:.2f} s):"
            f" {_verdict(speedup >= JOBS_SPEEDUP)} (--jobs 1 keeps {one.cpu / one.wall:.2f}"
            f" cores busy: {ceiling:.2f}x at most on {cores} cores)"
        )
    if measured:
        peak = max(m.pwcap.peak_mb for m in measured)
        print(
            f"  peak RSS under {MEMORY_MB} MB: {peak:.0f} MB at most: {_verdict(peak < MEMORY_MB)}"
        )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    choices = [*SHAPES, "jobs"]
    parser.add_argument("--shape", nargs="+", choices=choices, default=choices)
    parser.add_argument("--runs", type=int, default=3, help="runs of each contender")
    parser.add_argument("--copies", type=int, default=40, help="copies of each recording")
    parser.add_argument("--small-size", type=parse_size, default=parse_size("1G"))
    parser.add_argument("--jobs-size", type=parse_size, default=parse_size("200M"))
    parser.add_argument(
        "--data", type=Path, default=DATA, help="where captures are kept, and pwcap's output"
    )
    add_engine_option(parser)
    args = parser.parse_args()
    print(engine_checked(args.allow_interpreted))
    args.data.mkdir(parents=True, exist_ok=True)
    print(f"load average before: {', '.join(f'{load:.2f}' for load in os.getloadavg())}")
    measured = [measure_shape(SHAPES[name](args), args) for name in args.shape if name in SHAPES]
    jobs = compare_jobs(args) if "jobs" in args.shape else None
    print(f"\nload average after: {', '.join(f'{load:.2f}' for load in os.getloadavg())}")
    if measured:
        print_summary(measured)
    print_targets(measured, jobs)


if __name__ == "__main__":
    main()
