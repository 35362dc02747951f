"""``pwcap decode --jobs N``: the same dataset as one process, whatever the split.

Each capture given alone to N workers is split by flow-hash share (every worker reads it,
each keeps its connections); a folder of captures is spread over the workers whole. Both
must give the rows, connection ids and summary of ``--jobs 1``.
"""

from __future__ import annotations

import contextlib
import multiprocessing
import os
import signal
import subprocess
import sys
import time
from collections.abc import Callable, Iterator
from pathlib import Path

import pyarrow.parquet as pq
import pytest

from fuzz.stream_sink import RecordingSink
from pwcap.capture import read_streams
from pwcap.capture.shares import FlowShare, flow_hash
from pwcap.cli import main
from pwcap.decode.driver import Progress, decode_captures
from pwcap.decode.inputs import CaptureInput
from pwcap.decode.parallel import (
    MIN_WORKER_BYTES,
    Unit,
    decode_parallel,
    default_jobs,
    plan,
)
from pwcap.tables.schema import TABLES
from tests.bench_scripts import load_bench
from tests.conftest import sample_captures
from tests.decode_workers import decode_workers
from tests.pulsar_frames import command, frame
from tests.test_decode_cli import pwcap
from tests.test_hostile_captures import pcapng_with

SAMPLES = Path(__file__).resolve().parent.parent / "sample_pcaps"
PING = frame(command("PING"))


def rows(out: Path, table: str) -> list[str]:
    """A table's rows, sorted, as text: order is the one thing workers may change."""
    return sorted(repr(sorted(row.items())) for row in pq.read_table(out / table).to_pylist())


def assert_same_dataset(one: Path, other: Path) -> None:
    """The same tables, with the same columns and types, holding the same rows."""
    for table in TABLES:
        schemas = [pq.read_schema(next((out / table).glob("*.parquet"))) for out in (one, other)]
        assert schemas[0].remove_metadata() == schemas[1].remove_metadata(), table
        assert rows(one, table) == rows(other, table), table


def damaged_captures(folder: Path) -> list[Path]:
    """A capture cut mid-record, and a pcapng with a timestamp no calendar holds: the
    rows about the whole capture must be written once, with the capture's own end."""
    folder.mkdir()
    raw = (SAMPLES / "pulsar_shared_two_consumers.pcap").read_bytes()
    cut = folder / "cut.pcap"
    cut.write_bytes(raw[: len(raw) * 2 // 3 + 7])
    timed = folder / "bad_timestamp.pcapng"
    timed.write_bytes(pcapng_with("high_word")[0])
    return [cut, timed]


def test_the_flow_hash_is_the_same_both_ways_and_in_every_process():
    a, b = bytes([10, 0, 0, 1]), bytes([10, 0, 1, 1])
    assert flow_hash(a, 40000, b, 6650) == flow_hash(b, 6650, a, 40000)
    assert flow_hash(a, 40000, b, 6650) != flow_hash(a, 40001, b, 6650)
    code = "from pwcap.capture.shares import flow_hash; print(flow_hash(*eval(input())))"
    seen = {
        subprocess.run(
            [sys.executable, "-c", code],
            input=repr((a, 40000, b, 6650)),
            capture_output=True,
            text=True,
            env={**os.environ, "PYTHONHASHSEED": seed},
            check=True,
        ).stdout
        for seed in ("1", "2")
    }
    assert seen == {f"{flow_hash(a, 40000, b, 6650)}\n"}


@pytest.mark.parametrize("count", [2, 3, 5])
def test_every_connection_is_kept_by_exactly_one_share(count):
    shares = [FlowShare(index, count) for index in range(count)]
    tuples = [
        (bytes([10, 0, i % 7, i % 251]), 1024 + i, bytes([10, 1, 0, i % 3]), 6650 + i % 2)
        for i in range(2000)
    ]
    for src, sport, dst, dport in tuples:
        keepers = [s.index for s in shares if s.keeps(src, sport, dst, dport)]
        assert len(keepers) == 1
        assert keepers == [s.index for s in shares if s.keeps(dst, dport, src, sport)]
    kept = [sum(s.keeps(*t) for t in tuples) for s in shares]
    assert min(kept) > len(tuples) / count / 2  # no share left idle


def test_a_worker_reassembles_only_the_connections_of_its_share(tmp_path, write_capture):
    """What keeps a worker's memory to its share: the other shares' segments are dropped
    before reassembly, so three workers hold the capture's connections between them,
    each connection once."""
    capture = write_capture(tmp_path / "many.pcap", [(6650, [(0, PING)])] * 30)
    everyone = RecordingSink()
    read_streams(capture, everyone)
    held = []
    for index in range(3):
        sink = RecordingSink()
        read_streams(capture, sink, share=FlowShare(index, 3))
        held.append(list(sink.by_endpoints()))
    assert all(0 < len(connections) < 30 for connections in held)
    assert sorted(c for connections in held for c in connections) == sorted(everyone.by_endpoints())


def test_by_default_every_core_with_enough_input_for_each(monkeypatch):
    monkeypatch.setattr(os, "sched_getaffinity", lambda pid: {0, 1, 2, 3})
    assert default_jobs(1 << 30) == 4
    assert default_jobs(2 * MIN_WORKER_BYTES) == 2
    assert default_jobs(MIN_WORKER_BYTES - 1) == 1
    assert default_jobs(0) == 1


def test_a_large_capture_is_shared_by_every_worker_and_small_ones_fill_the_least_loaded():
    captures = [
        CaptureInput("big.pcap", Path("big.pcap"), 900),
        CaptureInput("a.pcap", Path("a.pcap"), 100),
        CaptureInput("b.pcap", Path("b.pcap"), 60),
        CaptureInput("-", None, 1000),  # standard input: read once, so whole
    ]
    workers = plan(captures, 3)
    assert workers == [
        [Unit(0, 0, 3), Unit(3)],
        [Unit(0, 1, 3), Unit(1)],
        [Unit(0, 2, 3), Unit(2)],
    ]
    alike = [CaptureInput(f"{n}.pcap", Path(f"{n}.pcap"), 100) for n in range(5)]
    assert plan(alike, 2) == [[Unit(0), Unit(2), Unit(4)], [Unit(1), Unit(3)]]
    assert plan(captures[3:], 3) == [[Unit(0)]]  # no worker without work


@pytest.mark.parametrize("capture", sample_captures(), ids=lambda p: p.name)
def test_a_capture_split_in_shares_gives_the_rows_of_one_process(tmp_path, capture):
    one = decode_captures([capture], tmp_path / "one")
    three = decode_parallel([capture], tmp_path / "three", jobs=3)
    assert_same_dataset(tmp_path / "one", tmp_path / "three")
    assert three.rows == one.rows
    assert three.connections == one.connections
    assert three.commands == one.commands
    assert three.anomalies == one.anomalies
    assert three.capture_totals() == one.capture_totals()
    assert sorted(os.listdir(tmp_path)) == ["one", "three"]  # no OUT.tmp-* left


@pytest.mark.parametrize("damage", ["cut.pcap", "bad_timestamp.pcapng"])
def test_a_damaged_capture_split_in_shares_says_so_once(tmp_path, damage):
    capture = {p.name: p for p in damaged_captures(tmp_path / "in")}[damage]
    one = decode_captures([capture], tmp_path / "one")
    two = decode_parallel([capture], tmp_path / "two", jobs=2)
    assert_same_dataset(tmp_path / "one", tmp_path / "two")
    assert [c.cut_off for c in two.captures] == [c.cut_off for c in one.captures]
    assert two.anomalies == one.anomalies and sum(one.anomalies.values()) > 0
    assert two.capture_totals() == one.capture_totals()


def test_a_folder_spread_over_workers_gives_the_rows_of_one_process(tmp_path):
    one = decode_captures([SAMPLES], tmp_path / "one")
    two = decode_parallel([SAMPLES], tmp_path / "two", jobs=2)
    assert_same_dataset(tmp_path / "one", tmp_path / "two")
    assert two.rows == one.rows and two.capture_totals() == one.capture_totals()
    assert two.connections == one.connections
    assert two.commands == one.commands and two.anomalies == one.anomalies
    assert [c.path for c in two.captures] == [c.path for c in one.captures]
    assert two.skipped == one.skipped


def test_a_capture_on_standard_input_beside_files_is_decoded_whole(tmp_path):
    """Standard input can be read once: with ``-`` among the inputs the run decodes in one
    process (a worker's standard input is empty), and gives the rows of the files."""
    piped, other = SAMPLES / "pulsar_shared_two_consumers.pcap", SAMPLES / "pulsar_plain.pcap"
    decode_captures([piped, other], tmp_path / "files")
    command = [sys.executable, "-m", "pwcap.cli", "decode", "-q", "--jobs", "2"]
    with piped.open("rb") as stdin:
        done = subprocess.run(
            [*command, "-", str(other), "-o", str(tmp_path / "piped")],
            stdin=stdin,
            capture_output=True,
            text=True,
            timeout=120,
        )
    assert (done.returncode, done.stderr) == (0, "")
    for table in ("frames", "messages", "anomalies"):  # rows name their capture: counted
        assert len(rows(tmp_path / "piped", table)) == len(rows(tmp_path / "files", table))


@pytest.mark.parametrize("inputs", [[SAMPLES], [SAMPLES / "pulsar_shared_two_consumers.pcap"]])
def test_the_printed_summary_of_workers_is_the_one_of_one_process(tmp_path, inputs, capsys):
    """Spread whole or split in shares, the counts a person reads add up to --jobs 1's."""
    printed = {}
    for jobs in ("1", "3"):
        out = tmp_path / f"jobs{jobs}"
        assert main(["decode", *map(str, inputs), "-o", str(out), "--jobs", jobs]) == 0
        lines = capsys.readouterr().out.splitlines()
        assert lines[0].startswith("decoded ") and lines[-1] == f"written to   {out}"
        printed[jobs] = lines[1:-1]  # the first line has the time, the last the folder
    assert printed["3"] == printed["1"]


class Recorded(Progress):
    """What a run tells its progress: the total, the labels, where it says it is."""

    def __init__(self) -> None:
        self.total = 0
        self.labels: list[str] = []
        self.position = lambda: 0

    def start(self, total_bytes: int) -> None:
        self.total = total_bytes

    def capture(self, path: Path, done_bytes: int, position: Callable[[], int]) -> None:
        self.labels.append(path.name)
        self.position = lambda: done_bytes + position()


@pytest.mark.parametrize("inputs", [[SAMPLES], [SAMPLES / "pulsar_shared_two_consumers.pcap"]])
def test_progress_is_the_whole_job_over_every_worker(tmp_path, inputs):
    progress = Recorded()
    summary = decode_parallel(inputs, tmp_path / "out", jobs=2, progress=progress)
    assert progress.labels == ["2 workers"]
    assert progress.total == summary.input_bytes
    assert abs(progress.position() - progress.total) < 1  # every share and capture counted


@pytest.mark.parametrize("attempt", range(8))  # a worker's exit once hung one run in five
def test_a_file_that_is_not_a_capture_is_one_line_from_the_workers_too(tmp_path, attempt):
    bogus = tmp_path / "notes.pcap"
    bogus.write_bytes(b"not a capture at all" * 100)
    done = pwcap("decode", str(bogus), "-o", str(tmp_path / "out"), "--jobs", "2")
    assert done.returncode == 1
    assert done.stderr.count("\n") == 1 and "notes.pcap" in done.stderr
    assert sorted(os.listdir(tmp_path)) == ["notes.pcap"]


@pytest.mark.parametrize(
    ("how", "status", "says"),
    [
        ("sigterm", 128 + signal.SIGTERM, "interrupted"),
        ("ctrl-c", 128 + signal.SIGINT, "interrupted"),
        ("kill", 1, "killed by SIGKILL"),
    ],
)
def test_stopping_the_run_stops_every_worker_and_leaves_no_dataset(tmp_path, how, status, says):
    capture = tmp_path / "big.pcap"
    load_bench("bench_decode").write_capture(capture, "small", 96 << 20)  # seconds of work
    out = tmp_path / "out"
    with _sigint_not_ignored():
        run = subprocess.Popen(
            [sys.executable, "-m", "pwcap.cli", "decode", str(capture), "-o", str(out), "-j", "2"],
            stderr=subprocess.PIPE,
            text=True,
            start_new_session=True,  # its own process group, as a shell gives a command
        )
    workers = decode_workers(run.pid, 2)
    time.sleep(1.0)  # past their start: reading the capture
    if how == "sigterm":
        run.send_signal(signal.SIGTERM)
    elif how == "ctrl-c":
        os.killpg(run.pid, signal.SIGINT)  # what the terminal sends on Ctrl-C
    else:
        os.kill(workers[1], signal.SIGKILL)  # as the kernel's out-of-memory killer would
    _, stderr = run.communicate(timeout=60)
    assert run.returncode == status
    assert stderr.count("\n") == 1 and says in stderr
    assert sorted(os.listdir(tmp_path)) == ["big.pcap"]
    assert not [pid for pid in workers if Path(f"/proc/{pid}").exists()]


@contextlib.contextmanager
def _sigint_not_ignored() -> Iterator[None]:
    """Children started within take Ctrl-C as a terminal's foreground command does. A
    shell runs a background command (pytest started with ``&``) with SIGINT ignored, and
    an ignored signal stays ignored in every child."""
    previous = signal.getsignal(signal.SIGINT)
    if previous is signal.SIG_IGN:
        signal.signal(signal.SIGINT, signal.SIG_DFL)
    try:
        yield
    finally:
        signal.signal(signal.SIGINT, previous)


def test_an_interruption_between_two_worker_starts_stops_the_started_one(tmp_path, monkeypatch):
    """Python runs a signal's handler in the main thread whichever thread took it, so it
    may raise between two starts: the started worker is stopped, the interruption is what
    surfaces, and no dataset is left."""
    process_class = multiprocessing.get_context("spawn").Process
    start = process_class.start
    started: list[multiprocessing.process.BaseProcess] = []

    def start_then_interrupt(self):
        if started:
            raise KeyboardInterrupt
        start(self)
        started.append(self)

    monkeypatch.setattr(process_class, "start", start_then_interrupt)
    capture = SAMPLES / "pulsar_shared_two_consumers.pcap"
    with pytest.raises(KeyboardInterrupt):
        decode_parallel([capture], tmp_path / "out", jobs=2)
    assert [process.exitcode is not None for process in started] == [True]
    assert list(tmp_path.iterdir()) == []  # no dataset, no temporary folder


# A worker is a fresh interpreter that runs the main script (as ``__mp_main__``) before its
# task: what the script replaces at its top level, it replaces in the workers too.
_WRITER_INTERRUPTED = """
import signal, sys
from pwcap.decode import parallel
from pwcap.tables.interrupts import Interrupted

def interrupted(*args, **kwargs):
    raise Interrupted(signal.SIGTERM)

parallel.DatasetWriter = interrupted

if __name__ == "__main__":
    try:
        parallel.decode_parallel([sys.argv[1]], sys.argv[2], jobs=2)
    except parallel.WorkerDied as error:
        sys.exit(str(error))
"""


def test_a_worker_stopped_while_its_writer_holds_signals_ends_without_a_traceback(tmp_path):
    """The writer holds SIGTERM back while it makes its folder and raises it after: in a
    worker, that ends the worker as the signal would, not with a Python traceback."""
    script, folder = tmp_path / "interrupted.py", tmp_path / "run"
    script.write_text(_WRITER_INTERRUPTED)
    folder.mkdir()
    capture = SAMPLES / "pulsar_shared_two_consumers.pcap"
    done = subprocess.run(
        [sys.executable, str(script), str(capture), str(folder / "out")],
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert done.returncode == 1 and "killed by SIGTERM" in done.stderr
    assert "Traceback" not in done.stderr
    assert list(folder.iterdir()) == []


# Another thread of the process that runs the decode holds a lock all along, as another
# thread may hold the C allocator's (AddressSanitizer's) or a library's at the moment a
# worker starts. A worker forked then has that lock taken by a thread it does not have,
# for ever, and waits for it as soon as it needs it: here at once, in a fork handler, as
# a library's own does.
_LOCK_HELD_ELSEWHERE = """
import os, sys, threading
from pwcap.decode.parallel import decode_parallel

if __name__ == "__main__":
    held, holding = threading.Lock(), threading.Event()

    def hold():
        with held:
            holding.set()
            threading.Event().wait()

    threading.Thread(target=hold, daemon=True).start()
    holding.wait()
    os.register_at_fork(after_in_child=held.acquire)
    decode_parallel([sys.argv[1]], sys.argv[2], jobs=2)
"""


def test_workers_start_while_another_thread_holds_a_lock_they_would_need(tmp_path):
    """Forked, the workers of a decode run from a test process hung in the sanitized build:
    Spark's gateway thread held the allocator's lock. Started fresh, they inherit none."""
    script = tmp_path / "held.py"
    script.write_text(_LOCK_HELD_ELSEWHERE)
    capture = SAMPLES / "pulsar_shared_two_consumers.pcap"
    run = subprocess.Popen(
        [sys.executable, str(script), str(capture), str(tmp_path / "two")],
        stderr=subprocess.PIPE,
        text=True,
        start_new_session=True,  # its workers too can be stopped, if they hang
    )
    try:
        _, stderr = run.communicate(timeout=180)
    except subprocess.TimeoutExpired:
        os.killpg(run.pid, signal.SIGKILL)
        run.wait()
        pytest.fail("the decode hung: its workers wait for a lock no thread of theirs holds")
    assert run.returncode == 0, stderr
    decode_captures([capture], tmp_path / "one")
    assert_same_dataset(tmp_path / "two", tmp_path / "one")
