"""Interrupting ``pwcap decode`` (Ctrl-C, SIGTERM, SIGKILL) at any moment.

The promise: either the whole dataset is at OUT and nothing else is left beside it, or
nothing is, and the last line says which. A SIGKILL cannot be answered: the next run
removes what it left (and says so).
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from tests.pulsar_frames import command, frame

FLOWS = b"".join(frame(command("FLOW", consumer_id=i, messagePermits=1000)) for i in range(2000))


@pytest.fixture(scope="module")
def busy_capture(tmp_path_factory: pytest.TempPathFactory, write_capture) -> Path:
    """A capture that takes a few seconds to decode: 200 connections of 2,000 frames."""
    path = tmp_path_factory.mktemp("signals") / "busy.pcap"
    return write_capture(path, [(6650, [(0, FLOWS)])] * 200)


def start_decode(capture: Path, out: Path, jobs: int = 1) -> subprocess.Popen:
    command = ["decode", "-q", "--jobs", str(jobs), str(capture), "-o", str(out)]
    return subprocess.Popen(
        [sys.executable, "-m", "pwcap.cli", *command],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )


def left_beside(out: Path) -> list[str]:
    return sorted(p.name for p in out.parent.iterdir() if p.name.startswith(out.name))


def wait_for_writing(out: Path) -> None:
    """Until the run has created its temporary dataset (it has started writing)."""
    while not any(p.name.startswith(f"{out.name}.tmp-") for p in out.parent.iterdir()):
        time.sleep(0.02)


@pytest.mark.parametrize("signum", [signal.SIGINT, signal.SIGTERM], ids=["SIGINT", "SIGTERM"])
@pytest.mark.parametrize("delay", [0.0, 0.5, 1.0, 2.0])
@pytest.mark.parametrize("jobs", [1, 2], ids=["one-process", "two-workers"])
def test_a_signal_at_any_moment_leaves_a_whole_dataset_or_nothing_and_says_which(
    busy_capture: Path, tmp_path: Path, signum: int, delay: float, jobs: int
) -> None:
    out = tmp_path / "out"
    process = start_decode(busy_capture, out, jobs)
    wait_for_writing(out)
    time.sleep(delay)
    process.send_signal(signum)
    _, stderr = process.communicate(timeout=120)
    assert "Traceback" not in stderr
    if process.returncode == 0:  # it had finished: the signal came too late to matter
        assert left_beside(out) == ["out"]
        return
    assert process.returncode == 128 + signum
    assert stderr.count("\n") == 1, stderr
    if left_beside(out) == ["out"]:
        assert "was written" in stderr and "not written" not in stderr
    else:
        assert left_beside(out) == []
        assert "was not written" in stderr


def test_a_killed_run_leaves_a_temporary_folder_the_next_run_removes_and_names(
    busy_capture: Path, tmp_path: Path
) -> None:
    out = tmp_path / "out"
    process = start_decode(busy_capture, out)
    wait_for_writing(out)
    os.kill(process.pid, signal.SIGKILL)
    process.wait(timeout=30)
    stale = left_beside(out)
    assert len(stale) == 1 and stale[0].startswith("out.tmp-")
    small = tmp_path / "small.pcap"
    small.write_bytes(busy_capture.read_bytes()[:100_000])
    done = subprocess.run(
        [sys.executable, "-m", "pwcap.cli", "decode", "-q", str(small), "-o", str(out)],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert left_beside(out) == ["out"]
    assert stale[0] in done.stderr and "removed" in done.stderr


def test_a_temporary_folder_of_a_run_still_going_is_left_alone(
    busy_capture: Path, tmp_path: Path
) -> None:
    out = tmp_path / "out"
    first = start_decode(busy_capture, out)
    wait_for_writing(out)
    second = subprocess.run(
        [sys.executable, "-m", "pwcap.cli", "decode", "-q", str(busy_capture), "-o", str(out)],
        capture_output=True,
        text=True,
        timeout=120,
    )
    first.communicate(timeout=120)
    assert "removed" not in second.stderr
    assert first.returncode == 0 or second.returncode == 0


def test_ctrl_c_while_the_dataset_is_moved_into_place_says_it_was_written(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """The interruption lands right after the rename: the message must not deny the
    dataset that is there."""
    from pwcap.cli import main

    rename = os.rename

    def rename_then_interrupt(source: Path, target: Path) -> None:
        rename(source, target)
        signal.raise_signal(signal.SIGINT)

    monkeypatch.setattr(os, "rename", rename_then_interrupt)
    sample = Path(__file__).resolve().parent.parent / "sample_pcaps" / "pulsar_plain.pcap"
    out = tmp_path / "out"
    status = main(["decode", "-q", str(sample), "-o", str(out)])
    assert status == 130
    assert capsys.readouterr().err == f"pwcap decode: error: interrupted; {out} was written\n"
    assert left_beside(out) == ["out"]
    assert sorted(p.name for p in out.iterdir()) == [
        "anomalies",
        "connections",
        "frames",
        "messages",
    ]
