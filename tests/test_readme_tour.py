"""The README's tour, run as a reader pastes it: the commands are read from README.md
itself (the ``sh`` block under "A short tour") and run in order, in one shell, in a
folder that holds what a clone holds after ``make demo`` (the sample captures, ``jobs/``
and the virtual environment)."""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

import pyarrow.dataset as ds
import pytest

ROOT = Path(__file__).resolve().parent.parent


def tour_commands() -> list[str]:
    readme = (ROOT / "README.md").read_text(encoding="utf-8")
    section = readme.split("## A short tour", 1)[1].split("\n## ", 1)[0]
    (block,) = re.findall(r"```sh\n(.*?)```", section, flags=re.S)
    return [line for line in block.splitlines() if line.strip()]


def test_the_tour_starts_by_putting_pwcap_on_the_path():
    commands = tour_commands()
    assert commands[0] == ". .venv/bin/activate"
    assert all(not line.startswith(".venv/bin/") for line in commands)  # activation does it


@pytest.mark.slow
def test_every_tour_command_works_pasted_in_order(tmp_path):
    for name in ("sample_pcaps", "jobs"):
        (tmp_path / name).symlink_to(ROOT / name)
    (tmp_path / ".venv").symlink_to(Path(sys.prefix))  # the environment running the tests
    script = "set -eo pipefail\n" + "\n".join(
        f"echo '>>> {i}' >&2\n{line}" for i, line in enumerate(tour_commands())
    )
    environment = {k: v for k, v in os.environ.items() if k != "VIRTUAL_ENV"}
    environment["PATH"] = "/usr/local/bin:/usr/bin:/bin"  # no pwcap before activation
    done = subprocess.run(
        ["bash", "-c", script],
        cwd=tmp_path,
        env=environment,
        capture_output=True,
        text=True,
        timeout=600,
    )
    ran = done.stderr.count(">>> ")
    assert done.returncode == 0, f"command {ran - 1} failed:\n{done.stderr[-3000:]}"
    assert ran == len(tour_commands()) and "Traceback" not in done.stderr
    assert "[gap]" in done.stdout  # show lists the lost capture's gaps inline
    assert "MESSAGE" in done.stdout  # DuckDB's count by command
    for table in ("slow-analytics/latency_pairs", "latency-only/latency_pairs", "piped/frames"):
        assert ds.dataset(tmp_path / "out" / table).count_rows() > 0, table
    assert (tmp_path / "out" / "slow.html").read_text().startswith("<!DOCTYPE html>")
    # Nothing beside what was there: the tour writes under out/, which git ignores.
    assert sorted(p.name for p in tmp_path.iterdir()) == [".venv", "jobs", "out", "sample_pcaps"]
    ignored = subprocess.run(["git", "check-ignore", "-q", "out/"], cwd=ROOT, check=False)
    assert ignored.returncode == 0
