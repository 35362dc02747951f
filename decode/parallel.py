"""``pwcap decode --jobs N``: one run over N worker processes, one dataset out.

Work is split two ways. A capture larger than a worker's fair part of the input is read
by every worker, each keeping its flow-hash share of the connections
(:class:`pwcap.capture.shares.FlowShare`), so one big capture scales like many small
ones; smaller captures go whole to the least loaded worker. A connection is decoded by
exactly one worker under its capture's own name, so its rows and ``conn_id`` are those of
``--jobs 1``.

Each worker writes a dataset of its own inside ``OUT.tmp-XXXX``; the parent adds the
capture-wide rows of the shared captures (they need every share's end), moves the part
files of all of them into one set of tables and renames the whole to ``OUT`` only when
every worker succeeded. Ctrl-C or SIGTERM stops every worker and deletes ``OUT.tmp-XXXX``.

The workers start as fresh interpreters (multiprocessing's "spawn"), never as forks of
this process: a fork copies every lock that another thread holds at that moment (the C
allocator's under AddressSanitizer, any library's) into a child where no thread will
ever release it, and a worker that then needs it waits forever. The process running a
decode may well have other threads: pyarrow's, or a Spark session's gateway. A worker
runs the main script of the process before its task, so a script that decodes with
workers keeps its work under ``if __name__ == "__main__":`` (as with any spawn).
"""

from __future__ import annotations

import os
import shutil
import signal
import time
from collections import Counter
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING

from ..capture.shares import FlowShare
from ..tables.dataset import DatasetWriter, check_output, make_temporary, put_in_place
from ..tables.interrupts import Interrupted, interrupts_deferred, terminate_as_interrupt
from ..tables.schema import TABLES
from .api import DecodeOptions
from .driver import (
    CaptureResult,
    Progress,
    Summary,
    capture_rows,
    decode_capture,
    decode_captures,
    load_keylog,
    merge_shares,
)
from .inputs import CaptureInput, expand_inputs

if TYPE_CHECKING:
    import multiprocessing
    from multiprocessing.connection import Connection

MIN_WORKER_BYTES = 16 << 20  # input bytes below which another worker does not pay off
POLL_SECONDS = 0.25  # how often the parent redraws progress and looks for finished workers


def default_jobs(total_bytes: int) -> int:
    """Every core this process may run on, but no worker for less than
    :data:`MIN_WORKER_BYTES` of input: starting one would cost more than it saves."""
    cores = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count()
    return max(1, min(cores or 1, total_bytes // MIN_WORKER_BYTES))


@dataclass(frozen=True, slots=True)
class Unit:
    """One worker's part of one capture: all of it (``share`` None) or one share."""

    capture: int  # index in the run's list of captures
    share: int | None = None
    shares: int = 1

    def flow_share(self) -> FlowShare | None:
        return None if self.share is None else FlowShare(self.share, self.shares)


def plan(captures: list[CaptureInput], jobs: int) -> list[list[Unit]]:
    """Each worker's units: captures above a worker's fair part of the bytes split in
    ``jobs`` shares (one per worker), the others whole, largest first, to the least
    loaded worker. Standard input can be read once only: it stays whole."""
    total = sum(capture.size for capture in captures)
    units: list[list[Unit]] = [[] for _ in range(jobs)]
    load = [0.0] * jobs
    whole = []
    for index, capture in enumerate(captures):
        if capture.path is not None and jobs > 1 and capture.size * jobs > total:
            for share in range(jobs):
                units[share].append(Unit(index, share, jobs))
                load[share] += capture.size / jobs
        else:
            whole.append(index)
    for index in sorted(whole, key=lambda i: -captures[i].size):
        least = load.index(min(load))
        units[least].append(Unit(index))
        load[least] += captures[index].size
    return [worker for worker in units if worker]


@dataclass
class WorkerResult:
    """What one worker sends back: per unit its capture result, and its dataset's tallies."""

    units: list[tuple[Unit, CaptureResult]] = field(default_factory=list)
    rows: Counter[str] = field(default_factory=Counter)
    commands: Counter[str | None] = field(default_factory=Counter)
    anomalies: Counter[str] = field(default_factory=Counter)


def decode_parallel(
    inputs: Iterable[str | Path],
    out: str | Path,
    jobs: int | None = None,
    options: DecodeOptions | None = None,
    overwrite: bool = False,
    progress: Progress | None = None,
) -> Summary:
    """Decode the captures into the dataset ``out`` with ``jobs`` worker processes (None:
    :func:`default_jobs`); the same dataset and summary as
    :func:`pwcap.decode.driver.decode_captures`, which one worker runs in this process."""
    options = options or DecodeOptions()
    inputs = list(inputs)  # read twice when one worker is enough
    expanded = expand_inputs((str(p) for p in inputs), options.series)
    captures = expanded.captures
    if jobs is None:
        jobs = default_jobs(sum(capture.size for capture in captures))
    workers = plan(captures, jobs)
    # Standard input can be read once, by this process: a run that reads it has no workers.
    if len(workers) <= 1 or any(capture.path is None for capture in captures):
        return decode_captures(inputs, out, options, overwrite, progress)
    keylog = load_keylog(options)  # an unreadable one fails before any worker starts
    out = Path(out)
    progress = progress or Progress()
    check_output(out, overwrite)
    started = time.perf_counter()
    tmp: Path | None = None
    try:
        # Created with interruptions held, inside the `try`: no moment leaves it behind.
        with interrupts_deferred() as received:
            tmp, removed = make_temporary(out)
        if received:
            raise Interrupted(received[0])
        with terminate_as_interrupt():
            results = _run_workers(captures, workers, tmp, options, progress)
        summary = _gather(captures, results, tmp, out, options)
        _merge(tmp, len(workers) + 1)
        put_in_place(tmp, out, overwrite)
    except BaseException:
        if tmp is not None:
            shutil.rmtree(tmp, ignore_errors=True)
        raise
    summary.seconds = time.perf_counter() - started
    summary.skipped = expanded.skipped
    summary.removed = removed
    summary.keylog = keylog
    return summary


# -- the workers -------------------------------------------------------------------------------


def _run_workers(
    captures: list[CaptureInput],
    workers: list[list[Unit]],
    tmp: Path,
    options: DecodeOptions,
    progress: Progress,
) -> list[WorkerResult]:
    """Start one process per worker, show their joint progress, gather their results;
    the first error (or an interruption) stops them all."""
    # Imported here: a run with one worker (a decode's usual case) never loads them, and
    # they were a measurable part of every decode's start (docs/performance.md).
    import multiprocessing.connection
    import multiprocessing.resource_tracker

    context = multiprocessing.get_context("spawn")
    done = context.Array("d", len(workers), lock=False)  # bytes each worker got through
    # One pipe per worker, not a Queue: a Queue's feeder thread can hang a worker's exit.
    pipes = [context.Pipe(duplex=False) for _ in workers]
    processes = [
        context.Process(
            target=_worker,
            args=(
                _Task(index, captures, units, tmp / f"w{index}", options),
                done,
                pipes[index][1],
            ),
            name=f"pwcap-decode-{index}",
        )
        for index, units in enumerate(workers)
    ]
    progress.start(sum(capture.size for capture in captures))
    progress.capture(Path(f"{len(workers)} workers"), 0, lambda: int(sum(done)))
    results: dict[int, WorkerResult] = {}
    try:
        # Signals are only recorded while the workers start, then raised: an interruption
        # inside a start (Python runs handlers in the main thread, whichever thread took
        # the signal) could come after the child exists and before the process knows it,
        # which would then run on, unseen, into a folder already deleted. They are also
        # blocked, a mask a child keeps through its exec: it holds one sent early (Ctrl-C
        # reaches the whole process group) until its own handlers are in place.
        # (Launching multiprocessing's resource tracker, which the first start does,
        # unblocks them after: it is launched before.)
        with interrupts_deferred() as received:
            multiprocessing.resource_tracker.ensure_running()
            blocked = signal.pthread_sigmask(signal.SIG_BLOCK, _STOPPING)
            try:
                for process in processes:
                    process.start()
            finally:
                signal.pthread_sigmask(signal.SIG_SETMASK, blocked)
        if received:
            raise Interrupted(received[0])
        for _, sender in pipes:
            sender.close()  # the workers' ends: a worker's exit then reads as end of file
        waiting = {receiver: index for index, (receiver, _) in enumerate(pipes)}
        while len(results) < len(processes):
            ready = multiprocessing.connection.wait(list(waiting), timeout=POLL_SECONDS)
            if not ready:
                progress.tick()
                _check_alive(processes, results)
                continue
            for receiver in ready:
                index = waiting.pop(receiver)
                try:
                    answer = receiver.recv()
                except EOFError:  # it died without answering
                    processes[index].join()
                    raise WorkerDied.of(index, processes[index].exitcode) from None
                if isinstance(answer, BaseException):
                    raise answer
                results[index] = answer
        progress.finish()
    finally:
        # After an error, or an interruption, which may come between two starts (another
        # thread of this process may take the signal, and Python runs its handler here).
        started = [process for process in processes if process.pid is not None]
        for process in started:  # a worker that answered is ending
            if process.is_alive() and len(results) < len(processes):
                process.terminate()
        for process in started:
            process.join()
    return [results[index] for index in range(len(processes))]


_STOPPING = {signal.SIGINT, signal.SIGTERM}


class WorkerDied(Exception):
    """A worker process ended without an answer (killed, out of memory)."""

    @classmethod
    def of(cls, index: int, exitcode: int | None) -> WorkerDied:
        """The error for worker ``index`` ended with ``exitcode`` (negative: a signal's)."""
        if exitcode is not None and exitcode < 0:
            name = signal.Signals(-exitcode).name if -exitcode in _SIGNAL_NUMBERS else -exitcode
            why = " (as the out-of-memory killer does)" if exitcode == -signal.SIGKILL else ""
            return cls(f"decode worker {index} was killed by {name}{why}; nothing was written")
        return cls(f"decode worker {index} died (exit status {exitcode}); nothing was written")


_SIGNAL_NUMBERS = {int(member) for member in signal.Signals}


def _check_alive(processes: list[multiprocessing.Process], results: dict[int, object]) -> None:
    """A worker that died without an answer fails the run."""
    for index, process in enumerate(processes):
        if index not in results and process.exitcode is not None and process.exitcode != 0:
            raise WorkerDied.of(index, process.exitcode)


@dataclass(frozen=True, slots=True)
class _Task:
    """What one worker process is given."""

    index: int
    captures: list[CaptureInput]
    units: list[Unit]
    out: Path  # its own dataset
    options: DecodeOptions


def _worker(task: _Task, done: list[float], answer: Connection) -> None:
    """One worker process: its units into its own dataset. Ctrl-C is the parent's to
    handle: it stops the workers itself."""
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    signal.signal(signal.SIGTERM, signal.SIG_DFL)  # the parent's stop, even if it ignores it
    signal.pthread_sigmask(signal.SIG_UNBLOCK, _STOPPING)  # blocked by the parent to start
    try:
        answer.send(_decode_units(task, done))
    except Interrupted as interrupted:  # held back by the writer while it made its folder
        signal.signal(interrupted.signum, signal.SIG_DFL)
        os.kill(os.getpid(), interrupted.signum)  # ended as the signal ends a worker: quietly
    except Exception as error:  # sent to the parent, which reports it once
        answer.send(error)


def _decode_units(task: _Task, done: list[float]) -> WorkerResult:
    options = task.options
    result = WorkerResult()
    progress = _SharedProgress(done, task.index)
    with DatasetWriter(task.out) as writer:
        for unit in task.units:
            capture = task.captures[unit.capture]
            decoded = decode_capture(capture, writer, options, progress, 0, unit.flow_share())
            result.units.append((unit, decoded))
            progress.unit_done(capture.size / unit.shares)
        result.rows.update(writer.row_counts())
        tables = writer.tables
    result.commands.update(tables["frames"].counted)
    result.anomalies.update(tables["anomalies"].counted)
    return result


class _SharedProgress(Progress):
    """A worker's progress, written to its slot of an array the parent reads: the bytes
    of the units it finished (a share counting its part) plus the current one's."""

    def __init__(self, slots: list[float], index: int) -> None:
        self._slots = slots
        self._index = index
        self._position: Callable[[], int] = lambda: 0
        self._next = 0.0
        self._finished = 0.0

    def capture(self, path: Path, done_bytes: int, position: Callable[[], int]) -> None:
        self._position = position
        self._slots[self._index] = self._finished

    def tick(self) -> None:
        now = time.monotonic()
        if now >= self._next:  # position() walks the open connections: not every tick
            self._next = now + POLL_SECONDS
            self._slots[self._index] = self._finished + self._position()

    def unit_done(self, size: float) -> None:
        """A unit is decoded: its ``size`` counts whole from now on."""
        self._finished += size
        self._position = lambda: 0
        self._slots[self._index] = self._finished


# -- one dataset ---------------------------------------------------------------------------------


def _gather(
    captures: list[CaptureInput],
    results: list[WorkerResult],
    tmp: Path,
    out: Path,
    options: DecodeOptions,
) -> Summary:
    """The run's summary from the workers', and the capture-wide rows of the shared
    captures written as one more dataset (``tmp/w<N>``) beside the workers'."""
    parts: dict[int, list[CaptureResult]] = {}
    connections: Counter[str] = Counter()
    rows: Counter[str] = Counter()
    commands: Counter[str | None] = Counter()
    anomalies: Counter[str] = Counter()
    shared = set()
    for result in results:
        for unit, decoded in result.units:
            parts.setdefault(unit.capture, []).append(decoded)
            connections.update(decoded.connections)
            if unit.share is not None:
                shared.add(unit.capture)
        rows.update(result.rows)
        commands.update(result.commands)
        anomalies.update(result.anomalies)
    merged = {index: merge_shares(found) for index, found in parts.items()}
    with DatasetWriter(tmp / f"w{len(results)}") as writer:
        for index in sorted(shared):
            for row in capture_rows(captures[index].name, merged[index]):
                writer.rows.anomalies.add(row)
                anomalies[row["kind"]] += 1
                rows["anomalies"] += 1
    return Summary(
        out=out,
        captures=[merged[index] for index in range(len(captures))],
        rows={table: rows[table] for table in TABLES},
        connections=connections,
        commands=commands,
        anomalies=anomalies,
        seconds=0.0,
    )


def _merge(tmp: Path, datasets: int) -> None:
    """Move the part files of ``tmp/w0`` ... into ``tmp/<table>``, named by dataset."""
    for table in TABLES:
        (tmp / table).mkdir()
        for index in range(datasets):
            for part in sorted((tmp / f"w{index}" / table).iterdir()):
                part.rename(tmp / table / f"part-w{index}-{part.name.removeprefix('part-')}")
    for index in range(datasets):
        shutil.rmtree(tmp / f"w{index}")
