"""Interrupting ``pwcap analyze``, ``report``, ``show`` and the job scripts as ``decode``
is interrupted (``test_hostile_signals.py``): Ctrl-C (SIGINT to the whole process group,
as a terminal sends it) or SIGTERM (a service manager's, to the process) gives one line,
the shell's exit status, no temporary folder, and the earlier output as it was.
"""

from __future__ import annotations

import hashlib
import os
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from pwcap.cli import main
from tests.test_hostile_signals import FLOWS

ROOT = Path(__file__).resolve().parent.parent
SAMPLES = ROOT / "sample_pcaps"
SIGNALS = pytest.mark.parametrize(
    "signum", [signal.SIGINT, signal.SIGTERM], ids=["ctrl-c", "sigterm"]
)
STARTED_WITHIN_S = 300
CAPTURES = ("plain", "slow_consumer", "redelivery_nack")  # starved, redelivered: every table


def start(*command: str) -> subprocess.Popen:
    return subprocess.Popen(
        list(command),
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        start_new_session=True,  # its own group, as a terminal's foreground job
    )


def interrupt(process: subprocess.Popen, signum: int) -> str:
    """Ctrl-C reaches the whole foreground group (Spark's JVM too); SIGTERM the process."""
    if signum == signal.SIGINT:
        os.killpg(process.pid, signum)
    else:
        process.send_signal(signum)
    _, stderr = process.communicate(timeout=300)
    return stderr


def snapshot(folder: Path) -> dict[str, str]:
    """Every file below ``folder`` (hidden ones too) and a digest of its bytes."""
    return {
        str(path.relative_to(folder)): hashlib.sha256(path.read_bytes()).hexdigest()
        for path in sorted(folder.rglob("*"))
        if path.is_file()
    }


def wait_for_temporary(folder: Path, process: subprocess.Popen) -> None:
    """Until a table is being written under its temporary name."""
    deadline = time.monotonic() + STARTED_WITHIN_S
    while time.monotonic() < deadline and process.poll() is None:
        if any(".tmp-" in p.name for p in folder.iterdir()):
            return
        time.sleep(0.05)
    raise AssertionError(f"no table written under a temporary name: {process.poll()}")


@pytest.fixture(scope="module")
def analyzed(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Path]:
    """Three sample captures decoded, and analysed once: the tables a run may replace."""
    folder = tmp_path_factory.mktemp("interrupted")
    dataset, analytics = folder / "dataset", folder / "analytics"
    captures = [str(SAMPLES / f"pulsar_{name}.pcap") for name in CAPTURES]
    assert main(["decode", "-q", *captures, "-o", str(dataset)]) == 0
    done = subprocess.run(
        [sys.executable, "-m", "pwcap.cli", "analyze", str(dataset), "-o", str(analytics)],
        capture_output=True,
        timeout=STARTED_WITHIN_S * 4,
    )
    assert done.returncode == 0, done.stderr[-2000:]
    return dataset, analytics


@pytest.mark.slow
@SIGNALS
@pytest.mark.parametrize("program", ["analyze", "latency.py"])
def test_an_interrupted_analytics_run_leaves_the_earlier_tables_as_they_were(
    analyzed, tmp_path, signum, program
):
    dataset, earlier = analyzed
    out = tmp_path / "analytics"
    shutil.copytree(earlier, out)
    before = snapshot(out)
    if program == "analyze":
        command = [sys.executable, "-m", "pwcap.cli", "analyze", str(dataset)]
    else:
        command = [sys.executable, str(ROOT / "jobs" / program), str(dataset)]
    process = start(*command, "-o", str(out), "--overwrite")
    wait_for_temporary(out, process)
    stderr = interrupt(process, signum)
    assert process.returncode == 128 + signum, stderr
    name = "pwcap analyze" if program == "analyze" else program.removesuffix(".py")
    said = f"{name}: error: interrupted; {out}: no table was written, it is as it was"
    lines = stderr.splitlines()
    assert lines[-1] == said
    own = [line for line in lines if not line.startswith("pwcap analyze: Spark local")]
    assert own == [said], stderr  # no traceback, no Spark warning, no Java stack
    assert snapshot(out) == before


@pytest.fixture(scope="module")
def busy_capture(tmp_path_factory: pytest.TempPathFactory, write_capture) -> Path:
    """A capture that takes seconds to show: 200 connections of 2,000 frames."""
    path = tmp_path_factory.mktemp("busy") / "busy.pcap"
    return write_capture(path, [(6650, [(0, FLOWS)])] * 200)


@pytest.mark.slow
@SIGNALS
def test_an_interrupted_spark_decode_says_so_in_one_line_and_writes_nothing(
    busy_capture, tmp_path, signum
):
    out = tmp_path / "dataset"
    decode = ROOT / "jobs" / "decode.py"
    process = start(sys.executable, str(decode), str(busy_capture), "-o", str(out))
    wait_for_temporary(tmp_path, process)
    stderr = interrupt(process, signum)
    assert process.returncode == 128 + signum, stderr
    said = f"decode: error: interrupted; {out}: no table was written, it is as it was"
    assert stderr.splitlines() == [said], stderr  # no traceback, no Spark warning
    assert list(tmp_path.iterdir()) == []


@SIGNALS
def test_an_interrupted_show_says_so_in_one_line(busy_capture, signum):
    process = start(sys.executable, "-m", "pwcap.cli", "show", str(busy_capture))
    assert process.stdout is not None
    process.stdout.readline()  # it is listing frames
    stderr = interrupt(process, signum)
    assert process.returncode == 128 + signum
    assert stderr == "pwcap show: error: interrupted\n"


@SIGNALS
def test_an_interrupted_report_writes_no_page_or_a_whole_one(busy_capture, tmp_path, signum):
    dataset = tmp_path / "dataset"
    assert main(["decode", "-q", str(busy_capture), "-o", str(dataset)]) == 0
    page = tmp_path / "report.html"
    process = start(sys.executable, "-m", "pwcap.cli", "report", str(dataset), "-o", str(page))
    time.sleep(1.0)  # reading the dataset
    stderr = interrupt(process, signum)
    if process.returncode == 0:  # done before the signal came
        assert page.read_text().endswith("</html>\n")
    else:
        assert process.returncode == 128 + signum
        assert stderr == f"pwcap report: error: interrupted; {page} was not written\n"
        assert not page.exists()
    assert [p.name for p in tmp_path.iterdir() if "report" in p.name] in ([], ["report.html"])


# Ctrl-C reaches a command while it runs code that exec() made from a string (as the
# decode's test in test_hostile_signals.py): the command wraps the function named here.
_CTRL_C_IN_EXEC = """
import importlib, signal, sys
from pwcap.cli import entry

signal.signal(signal.SIGINT, signal.default_int_handler)  # even if started with it ignored
module = importlib.import_module(sys.argv[1])
original = getattr(module, sys.argv[2])

def interrupted_in_exec(*args, **kwargs):
    exec("signal.raise_signal(signal.SIGINT)")
    return original(*args, **kwargs)

setattr(module, sys.argv[2], interrupted_in_exec)
sys.argv = ["pwcap", *sys.argv[3:]]
sys.exit(entry())
"""


@pytest.mark.parametrize("command", ["show", "report", "analyze"])
def test_ctrl_c_during_code_made_by_exec_ends_a_command_with_130(tmp_path, command):
    """Python's own KeyboardInterrupt leaving exec'd code marks the interpreter as ended by
    Ctrl-C even when the command handles it: run with `-m`, it said its one line and then
    killed itself with SIGINT (exit -2). Every command raises pwcap's own Interrupted."""
    sample = SAMPLES / "pulsar_plain.pcap"
    (tmp_path / "ctrl_c_in_exec.py").write_text(_CTRL_C_IN_EXEC)
    if command == "show":
        wrapped, arguments = ("pwcap.cli.show", "_capture_frames"), ["show", str(sample)]
        said = "pwcap show: error: interrupted\n"
    elif command == "report":
        dataset, page = tmp_path / "dataset", tmp_path / "report.html"
        assert main(["decode", "-q", "--jobs", "1", str(sample), "-o", str(dataset)]) == 0
        wrapped, arguments = ("pwcap.report", "render"), ["report", str(dataset), "-o", str(page)]
        said = f"pwcap report: error: interrupted; {page} was not written\n"
    else:  # Ctrl-C as Spark's session starts
        dataset, out = tmp_path / "dataset", tmp_path / "analytics"
        assert main(["decode", "-q", "--jobs", "1", str(sample), "-o", str(dataset)]) == 0
        wrapped, arguments = (
            ("pwcap.jobs.common", "session"),
            ["analyze", str(dataset), "-o", str(out)],
        )
        said = f"pwcap analyze: error: interrupted; {out}: no table was written, it is as it was\n"
    done = subprocess.run(
        [sys.executable, "-m", "ctrl_c_in_exec", *wrapped, *arguments],
        capture_output=True,
        text=True,
        timeout=120,
        cwd=tmp_path,
    )
    assert (done.returncode, done.stderr) == (128 + signal.SIGINT, said)
