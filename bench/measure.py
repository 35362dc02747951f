"""Run one command as a child process and measure it from outside, as the OS accounts it.

CPU time is the child's user and system time from ``wait4`` (its own and that of every
descendant it waited for, so worker processes count). A descendant nobody waits for is
missing from that figure (Spark's Python workers: their daemon is killed, not waited for),
so each process's own CPU time is also read from ``/proc`` while it runs, and the larger
of the two totals is reported. Peak memory is read from ``/proc``
while the command runs: each process's ``VmHWM`` (its own high-water mark, which the
``ru_maxrss`` of a spawned child is not: Linux carries the parent's peak over ``exec``) and
the sum of ``VmRSS`` over the whole process tree at each sample (what a run with workers
holds at once). Figures are reported in MB of 2**20 bytes.

Sampling costs CPU (a JVM's hundred threads are read each time), taken from the machine
the command runs on: at a fixed 10 ms it took a fifth of a core, which slowed a command
that uses every core and not one that leaves a core idle. So samples start 10 ms apart,
for short runs, and space out as the run goes on (:func:`sample_interval`), costing about
one percent of a core; what a process does in its last interval is what can be missed.
"""

from __future__ import annotations

import os
import subprocess
import tempfile
import threading
import time
from dataclasses import dataclass
from pathlib import Path

SAMPLE_SECONDS = 0.01  # between the first samples
MAX_SAMPLE_SECONDS = 0.5  # between the samples of a long run
SPACING = 20  # a sample waits at most this fraction of the run so far (1/SPACING of it)
CLOCK_TICKS = os.sysconf("SC_CLK_TCK")


@dataclass(frozen=True)
class Measurement:
    """One finished run of a command."""

    user: float
    sys: float
    wall: float
    peak_mb: float  # the largest single process of the run
    tree_peak_mb: float  # the most the whole process tree held at once
    returncode: int
    error: str  # the end of what it wrote to stderr, when it failed

    @property
    def cpu(self) -> float:
        return self.user + self.sys


def sample_interval(elapsed: float) -> float:
    """Seconds until the next sample, ``elapsed`` seconds into the run."""
    return min(MAX_SAMPLE_SECONDS, max(SAMPLE_SECONDS, elapsed / SPACING))


def _status_kb(pid: int, keys: tuple[str, ...]) -> dict[str, int]:
    try:
        lines = Path(f"/proc/{pid}/status").read_text().splitlines()
    except OSError:  # the process ended between listing and reading
        return {}
    values = {}
    for line in lines:
        key, _, rest = line.partition(":")
        if key in keys:
            values[key] = int(rest.split()[0])
    return values


def _own_cpu(pid: int) -> tuple[float, float]:
    """The user and system seconds ``pid`` itself has used so far (not its children's)."""
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return 0.0, 0.0
    fields = stat[stat.rindex(")") + 2 :].split()  # after the name, which may hold spaces
    return int(fields[11]) / CLOCK_TICKS, int(fields[12]) / CLOCK_TICKS


def _tree(pid: int) -> list[int]:
    """``pid`` and its live descendants, through each thread's ``children`` list."""
    found, todo = [], [pid]
    while todo:
        current = todo.pop()
        found.append(current)
        try:
            tids = os.listdir(f"/proc/{current}/task")
        except OSError:
            continue
        for tid in tids:
            try:
                children = Path(f"/proc/{current}/task/{tid}/children").read_text()
                todo.extend(int(child) for child in children.split())
            except OSError:
                pass
    return found


class _MemorySampler(threading.Thread):
    """Polls the process tree of ``pid`` until told to stop."""

    def __init__(self, pid: int) -> None:
        super().__init__(daemon=True)
        self.pid = pid
        self.hwm_kb: dict[int, int] = {}
        self.tree_kb = 0
        self.cpu: dict[int, tuple[float, float]] = {}  # each process's own, last seen
        self.done = threading.Event()

    def run(self) -> None:
        started = time.perf_counter()
        while not self.done.is_set():
            total = 0
            for pid in _tree(self.pid):
                status = _status_kb(pid, ("VmHWM", "VmRSS"))
                total += status.get("VmRSS", 0)
                self.hwm_kb[pid] = max(self.hwm_kb.get(pid, 0), status.get("VmHWM", 0))
                user, system = _own_cpu(pid)
                if user + system > sum(self.cpu.get(pid, (0.0, 0.0))):
                    self.cpu[pid] = (user, system)
            self.tree_kb = max(self.tree_kb, total)
            self.done.wait(sample_interval(time.perf_counter() - started))

    def seen_cpu(self) -> tuple[float, float]:
        """User and system seconds of every process seen, each counted once."""
        return sum(u for u, _ in self.cpu.values()), sum(s for _, s in self.cpu.values())


def measure(argv: list[str]) -> Measurement:
    """Run ``argv`` to the end, its output discarded, and return what it cost."""
    with tempfile.TemporaryFile() as stderr:
        started = time.perf_counter()
        child = subprocess.Popen(argv, stdout=subprocess.DEVNULL, stderr=stderr)
        sampler = _MemorySampler(child.pid)
        sampler.start()
        _, status, usage = os.wait4(child.pid, 0)
        wall = time.perf_counter() - started
        sampler.done.set()
        sampler.join()
        child.returncode = os.waitstatus_to_exitcode(status)  # reaped here, not by Popen
        stderr.seek(0)
        said = stderr.read().decode(errors="replace").strip()
    user, system = max((usage.ru_utime, usage.ru_stime), sampler.seen_cpu(), key=sum)
    return Measurement(
        user=user,
        sys=system,
        wall=wall,
        peak_mb=max(sampler.hwm_kb.values(), default=0) / 1024,
        tree_peak_mb=sampler.tree_kb / 1024,
        returncode=child.returncode,
        error=said[-3000:] if child.returncode else "",
    )
