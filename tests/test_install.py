"""``pip install pwcap`` as a new user runs it: a fresh virtual environment, the package
alone (no dev extras), then the analytics and the report on a decoded dataset."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pyarrow.dataset as ds
import pytest

ROOT = Path(__file__).resolve().parent.parent


def run(*command: str | Path) -> subprocess.CompletedProcess:
    return subprocess.run(
        [str(part) for part in command], capture_output=True, text=True, timeout=900
    )


@pytest.mark.slow
def test_a_fresh_install_analyzes_and_reports_a_decoded_dataset(tmp_path, sample_dataset):
    venv = tmp_path / "venv"
    assert run(sys.executable, "-m", "venv", venv).returncode == 0
    installed = run(venv / "bin" / "pip", "install", "-q", ROOT)
    assert installed.returncode == 0, installed.stderr[-3000:]
    pwcap = venv / "bin" / "pwcap"
    assert "decoder: compiled" in run(pwcap, "--version").stdout  # the install built it
    analyzed = run(pwcap, "analyze", sample_dataset, "-o", tmp_path / "analytics")
    assert analyzed.returncode == 0, analyzed.stderr[-3000:]
    assert ds.dataset(tmp_path / "analytics" / "latency_pairs").count_rows() > 0
    report = tmp_path / "report.html"
    reported = run(
        pwcap, "report", sample_dataset, "--analytics", tmp_path / "analytics", "-o", report
    )
    assert reported.returncode == 0, reported.stderr[-3000:]
    assert report.read_text().startswith("<!DOCTYPE html>")
    for notice in ("Traceback", "log4j", "NativeCodeLoader"):
        assert notice not in analyzed.stderr + reported.stderr
