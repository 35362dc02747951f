"""The benchmarks measure the compiled engine, or say they will not.

A stale or missing build makes pwcap decode on the interpreted engine, several times
slower: figures taken then would be read as pwcap's. Each benchmark that runs the decoder
refuses such a run before it makes or measures anything, unless ``--allow-interpreted``
asks for it.
"""

from __future__ import annotations

import os
import subprocess
import sys

import pytest

from tests.bench_scripts import BENCH, load_bench

DECODER_BENCHMARKS = [
    "bench_shapes",
    "bench_decode",
    "bench_real_clients",
    "bench_spark_decode",
    "bench_pulsar_decoder",
    "bench_capture",
]


def _interpreted() -> dict[str, str]:
    return {**os.environ, "PWCAP_PURE_PYTHON": "1"}


@pytest.mark.parametrize("script", DECODER_BENCHMARKS)
def test_a_benchmark_refuses_the_interpreted_engine_before_it_measures(script, tmp_path):
    argv = [sys.executable, str(BENCH / f"{script}.py")]
    data = tmp_path / "data"
    if script not in ("bench_pulsar_decoder", "bench_capture"):
        argv += ["--data", str(data)]

    done = subprocess.run(
        argv, capture_output=True, text=True, env=_interpreted(), cwd=tmp_path, timeout=120
    )

    assert done.returncode == 1
    said = done.stderr.strip()
    assert "\n" not in said
    assert "decoder: interpreted" in said
    assert "--allow-interpreted" in said
    assert not data.exists()  # no capture made, nothing measured
    assert list(tmp_path.iterdir()) == []


def test_asked_explicitly_a_benchmark_measures_the_interpreted_engine(monkeypatch):
    contenders = load_bench("contenders")
    monkeypatch.setenv("PWCAP_PURE_PYTHON", "1")

    assert "decoder: interpreted" in contenders.engine_checked(allow_interpreted=True)
    with pytest.raises(SystemExit):
        contenders.engine_checked(allow_interpreted=False)
