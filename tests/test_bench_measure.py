"""``bench/measure.py``: what a benchmarked command cost, its whole process tree included."""

from __future__ import annotations

import sys

from tests.bench_scripts import load_bench

measure = load_bench("measure")

BUSY = "import time\nstart = time.process_time()\nwhile time.process_time() - start < 0.5: pass"

# Starts a busy process and exits once it has ended, without reaping it: its CPU time
# reaches no one's wait4, as with Spark's Python workers, whose daemon is killed.
UNREAPED = f"""
import os, sys, time
pid = os.posix_spawn(sys.executable, [sys.executable, "-c", {BUSY!r}], os.environ)
while open(f"/proc/{{pid}}/stat").read().rpartition(") ")[2][0] != "Z":
    time.sleep(0.01)
"""


def test_the_cpu_time_of_a_process_nobody_waits_for_is_counted():
    run = measure.measure([sys.executable, "-c", UNREAPED])
    assert run.returncode == 0
    assert run.cpu >= 0.45  # the busy half second, less at most one sampling interval


def test_the_cpu_time_of_waited_for_children_is_counted_once():
    waited = f"import subprocess, sys\nsubprocess.run([sys.executable, '-c', {BUSY!r}])"
    run = measure.measure([sys.executable, "-c", waited])
    assert 0.45 <= run.cpu < 0.9  # the child's half second and two interpreters' start


def test_samples_space_out_as_a_run_goes_on():
    """10 ms apart at first (a short run is sampled finely), then further apart, so
    sampling never takes a sizeable share of a core from a long run."""
    intervals = [measure.sample_interval(second) for second in (0, 0.1, 5, 30, 600)]
    assert intervals[0] == intervals[1] == measure.SAMPLE_SECONDS
    assert intervals == sorted(intervals)
    assert intervals[-1] == measure.MAX_SAMPLE_SECONDS


# Two Cython modules, each with its own helper of the same name, and names given once.
CALLGRIND = """\
ob=(1) /lib/batch.so
fl=(1) batch.c
fn=(1) __pyx_gb_split
cob=(2) /lib/libpython.so
cfn=(2) PyTuple_New
calls=300 0
0 10
cfn=(3) __Pyx_FastCall
calls=100 0
0 10
ob=(3) /lib/messages.so
fn=(4) __pyx_f_emit
cob=(2)
cfn=(2)
calls=100 0
0 10
cfn=(3)
calls=100 0
0 10
"""


def test_callgrind_calls_counts_each_callee_by_caller_and_module(tmp_path):
    callgrind = load_bench("callgrind_calls")
    profile = tmp_path / "callgrind.out"
    profile.write_text(CALLGRIND)

    total, callers = callgrind.calls(profile)

    assert total["PyTuple_New"] == 400
    assert callers["PyTuple_New"] == {"__pyx_gb_split": 300, "__pyx_f_emit": 100}
    assert total["__Pyx_FastCall [batch.so]"] == 100
    assert total["__Pyx_FastCall [messages.so]"] == 100
