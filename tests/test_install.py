"""``pip install pwcap`` as a new user runs it: a fresh virtual environment, the package
alone (no dev extras), then the analytics and the report on a decoded dataset, and the
same environment packed and shipped to Spark executors as the README says."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pyarrow.dataset as ds
import pytest

from tests.conftest import sample_keylog_paths
from tests.test_decode_jobs import assert_same_dataset

ROOT = Path(__file__).resolve().parent.parent


def run(*command: str | Path) -> subprocess.CompletedProcess:
    return subprocess.run(
        [str(part) for part in command], capture_output=True, text=True, timeout=900
    )


@pytest.fixture(scope="module")
def venv(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A fresh virtual environment with pwcap installed alone, as a user's pip does."""
    venv = tmp_path_factory.mktemp("install") / "venv"
    assert run(sys.executable, "-m", "venv", venv).returncode == 0
    installed = run(venv / "bin" / "pip", "install", "-q", ROOT)
    assert installed.returncode == 0, installed.stderr[-3000:]
    return venv


@pytest.mark.slow
def test_a_fresh_install_analyzes_and_reports_a_decoded_dataset(venv, tmp_path, sample_dataset):
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


@pytest.mark.slow
def test_executors_run_pwcap_from_the_packed_environment(venv, tmp_path, sample_dataset):
    """The README's recipe for a cluster: the environment packed with venv-pack and
    shipped with --archives to executors in processes of their own (local-cluster), whose
    Python is the unpacked copy's: without it there, every task fails."""
    added = run(venv / "bin" / "pip", "install", "-q", "venv-pack")
    assert added.returncode == 0, added.stderr[-3000:]
    packed = tmp_path / "pwcap-env.tar.gz"  # not .tar: see the README
    packing = run(venv / "bin" / "venv-pack", "-p", venv, "-o", packed)
    assert packing.returncode == 0, packing.stderr[-3000:]
    out = tmp_path / "out"
    env = {name: value for name, value in os.environ.items() if not name.startswith("PYSPARK")}
    env |= {"PYSPARK_DRIVER_PYTHON": str(venv / "bin" / "python")}
    env |= {"PYSPARK_PYTHON": "./environment/bin/python"}
    submit = [venv / "bin" / "spark-submit", "--master", "local-cluster[2,1,1024]"]
    job = [ROOT / "jobs" / "decode.py", ROOT / "sample_pcaps", "-o", out]
    job += [f"--tls-keylog={keylog}" for keylog in sample_keylog_paths()]  # as the sample's
    done = subprocess.run(
        [str(part) for part in [*submit, "--archives", f"{packed}#environment", *job]],
        capture_output=True,
        text=True,
        timeout=900,
        env=env,
        cwd=tmp_path,
    )
    assert done.returncode == 0, done.stderr[-3000:]
    assert_same_dataset(sample_dataset, out)
