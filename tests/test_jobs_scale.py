"""``pwcap analyze`` with its defaults on a dataset of millions of frames: the local Spark
sizes its memory to the machine (with Spark's 1g default it died of a full heap at 4.6
million frames, and only a hidden environment variable saved it)."""

from __future__ import annotations

import subprocess
import sys

import pyarrow.dataset as ds
import pytest

from tests.bench_scripts import load_bench

FRAMES = 5_000_000


@pytest.mark.slow
def test_analyze_with_its_defaults_runs_on_five_million_frames(tmp_path):
    capture = tmp_path / "small.pcap"
    frames = load_bench("bench_decode").write_capture(capture, "small", 330 << 20)
    assert frames >= FRAMES
    pwcap = [sys.executable, "-m", "pwcap.cli"]
    decoded = subprocess.run(
        [*pwcap, "decode", str(capture), "-o", str(tmp_path / "ds"), "-q"],
        capture_output=True,
        text=True,
    )
    assert decoded.returncode == 0, decoded.stderr
    capture.unlink()  # room on the disk for Spark's
    assert ds.dataset(tmp_path / "ds" / "frames").count_rows() == frames
    analyzed = subprocess.run(
        [*pwcap, "analyze", str(tmp_path / "ds"), "-o", str(tmp_path / "analytics")],
        capture_output=True,
        text=True,
    )
    assert analyzed.returncode == 0, analyzed.stderr[-3000:]
    assert "OutOfMemoryError" not in analyzed.stderr
    assert ds.dataset(tmp_path / "analytics" / "latency_pairs").count_rows() > FRAMES // 4
