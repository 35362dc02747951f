"""The long mutation campaign: many mutants decoded by worker processes under watch.

    python -m fuzz.campaign --inputs 100000 --seed 1 --jobs 2

Each worker decodes batches of mutants in-process (:mod:`fuzz.batch`) and answers with
what failed. The supervisor gives each batch a deadline: a worker that overruns it is
killed and its batch retried one mutant at a time, so a hang is pinned to its input; a
worker that dies (out of memory, a crash in C) is handled the same way. Every failing
mutant is written to ``--found`` with a line in ``failures.jsonl`` that says how to
make it again (seed, index, mutations) and what failed.
"""

from __future__ import annotations

import argparse
import json
import multiprocessing
import resource
import sys
import time
from collections import Counter, deque
from dataclasses import dataclass, field
from multiprocessing.connection import Connection, wait
from pathlib import Path
from tempfile import TemporaryDirectory

from fuzz.batch import PROMISED, Failure, Limits, decode_batch
from fuzz.mutate import mutant

BATCH = 100
HANG_SECONDS = 30.0  # beyond a batch's time budget, before its worker is called hung


@dataclass
class Report:
    """A campaign's figures: what was decoded, what failed, the largest process seen."""

    inputs: int = 0
    decoded: int = 0
    refused: int = 0
    peak_mb: float = 0.0
    cpu_seconds: float = 0.0  # the workers' own, user+sys
    failures: list[tuple[int, Failure]] = field(default_factory=list)  # (index, failure)

    def kinds(self) -> Counter[str]:
        return Counter(failure.kind for _, failure in self.failures)


def serve(conn: Connection, seed: int, folder: Path, limits: Limits) -> None:
    """A worker: decode the batches of indexes it is sent until it is sent None."""
    while (indexes := conn.recv()) is not None:
        started = time.process_time()
        outcome = decode_batch([mutant(seed, i) for i in indexes], folder, limits)
        outcome.cpu_seconds = time.process_time() - started
        conn.send(outcome)


class Worker:
    """One worker process and the batch it is on."""

    def __init__(self, seed: int, folder: Path, limits: Limits) -> None:
        self.seed, self.folder, self.limits = seed, folder, limits
        # Started fresh, not forked: a worker's peak memory is then its own decoding's,
        # never what the process that started it held (a test runner's, hundreds of MB).
        context = multiprocessing.get_context("forkserver")
        self.conn, child = context.Pipe()
        self.process = context.Process(
            target=serve, args=(child, seed, folder, limits), daemon=True
        )
        self.process.start()
        child.close()
        self.batch: list[int] = []
        self.deadline = 0.0

    def give(self, batch: list[int]) -> None:
        self.batch = batch
        budget = sum(self.limits.seconds(len(mutant(self.seed, i).data)) for i in batch)
        self.deadline = time.monotonic() + HANG_SECONDS + 3 * budget
        self.conn.send(batch)

    def stop(self) -> None:
        if self.process.is_alive():
            self.process.kill()
        self.process.join()
        self.conn.close()


def run(
    seed: int,
    start: int,
    count: int,
    jobs: int,
    found: Path,
    batch: int = BATCH,
    limits: Limits = PROMISED,
) -> Report:
    """Decode mutants ``start`` to ``start + count`` of ``seed`` and report."""
    found.mkdir(parents=True, exist_ok=True)
    report = Report(inputs=count)
    work = deque(
        list(range(i, min(start + count, i + batch))) for i in range(start, start + count, batch)
    )
    with TemporaryDirectory(prefix="pwcap-fuzz-") as tmp:
        workers = [Worker(seed, Path(tmp) / str(n), limits) for n in range(jobs)]
        idle = list(workers)
        busy: list[Worker] = []
        done = 0
        started = time.monotonic()
        while work or busy:
            while work and idle:
                worker = idle.pop()
                worker.give(work.popleft())
                busy.append(worker)
            ready = wait([w.conn for w in busy], timeout=1.0)
            for worker in list(busy):
                outcome = None
                if worker.conn in ready:
                    try:
                        outcome = worker.conn.recv()
                    except (EOFError, OSError):
                        outcome = None
                elif time.monotonic() < worker.deadline and worker.process.is_alive():
                    continue
                busy.remove(worker)
                if outcome is None:  # hung or dead: pin it on one mutant
                    why = "hang" if worker.process.is_alive() else "died"
                    code = worker.process.exitcode
                    worker.stop()
                    if len(worker.batch) > 1:
                        work.extendleft([i] for i in reversed(worker.batch))
                    else:
                        detail = "no answer by its deadline" if why == "hang" else f"exit {code}"
                        name = mutant(seed, worker.batch[0]).name
                        _record(report, found, seed, worker.batch[0], Failure(name, why, detail))
                    worker = Worker(seed, worker.folder, limits)
                    idle.append(worker)
                    workers = [w for w in workers if w.process.is_alive()] + [worker]
                    continue
                idle.append(worker)
                done += len(worker.batch)
                report.decoded += outcome.decoded
                report.refused += outcome.refused
                report.peak_mb = max(report.peak_mb, outcome.peak_mb)
                report.cpu_seconds += outcome.cpu_seconds
                for failure in outcome.failures:
                    index = int(failure.name.split("-", 1)[0])
                    _record(report, found, seed, index, failure)
                if done % (batch * 50) < len(worker.batch):
                    _progress(report, done, started)
        for worker in workers:
            if worker.process.is_alive():
                worker.conn.send(None)
            worker.stop()
    return report


def _record(report: Report, found: Path, seed: int, index: int, failure: Failure) -> None:
    one = mutant(seed, index)
    report.failures.append((index, failure))
    (found / f"{failure.kind}-{one.name}").write_bytes(one.data)
    with open(found / "failures.jsonl", "a") as log:
        entry = {"seed": seed, "index": index, "name": one.name, "kind": failure.kind}
        entry |= {"mutations": one.mutations, "detail": failure.detail}
        log.write(json.dumps(entry) + "\n")


def _progress(report: Report, done: int, started: float) -> None:
    rate = done / max(time.monotonic() - started, 1e-9)
    kinds = dict(report.kinds()) or "none"
    print(
        f"{done:,} mutants, {rate:.0f}/s, failures {kinds}, peak {report.peak_mb:.0f} MB",
        file=sys.stderr,
        flush=True,
    )


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m fuzz.campaign", description=__doc__)
    parser.add_argument("--inputs", type=int, default=10_000, help="mutants to decode")
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument("--start", type=int, default=0, help="index of the first mutant")
    parser.add_argument("--jobs", type=int, default=1, help="worker processes")
    parser.add_argument("--found", type=Path, default=Path("fuzz/found"), help="failing inputs")
    parser.add_argument(
        "--memory-mb",
        type=float,
        default=PROMISED.memory_mb,
        help="peak RSS a decode may reach (default: pwcap's promise; a sanitized build needs more)",
    )
    parser.add_argument(
        "--time-factor",
        type=float,
        default=PROMISED.time_factor,
        help="times the time budget of a capture (a sanitized build runs slower)",
    )
    args = parser.parse_args(argv)
    started = time.monotonic()
    limits = Limits(args.memory_mb, args.time_factor)
    report = run(args.seed, args.start, args.inputs, args.jobs, args.found, limits=limits)
    wall = time.monotonic() - started
    own = resource.getrusage(resource.RUSAGE_SELF)
    cpu = own.ru_utime + own.ru_stime + report.cpu_seconds
    print(
        f"mutants {report.inputs:,} (seed {args.seed}, from {args.start}): decoded"
        f" {report.decoded:,}, refused as not captures {report.refused:,}\n"
        f"failures {dict(report.kinds()) or 'none'}\n"
        f"peak RSS of a worker {report.peak_mb:.0f} MB\n"
        f"wall {wall:.0f} s, CPU {cpu:.0f} s (user+sys, workers included)"
    )
    for index, failure in report.failures:
        last = failure.detail.strip().splitlines()[-1] if failure.detail.strip() else ""
        print(f"  {failure.kind} #{index}: {last}")
    return 1 if report.failures else 0


if __name__ == "__main__":
    sys.exit(main())
