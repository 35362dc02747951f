"""The coverage-guided targets, replayed without atheris: their seeds, a short seeded run
of random damage to those seeds, and the inputs atheris found (``fuzz/corpus/<target>``)."""

from __future__ import annotations

import random
import subprocess
import sys
from pathlib import Path

import pytest

from fuzz.targets import TARGETS, Broken, Rows, check_rows
from pwcap.capture import ClientBy, Connection

CORPUS = Path(__file__).resolve().parent.parent / "fuzz" / "corpus"
RUNS = {"records": 300, "reassembly": 600, "pulsar": 60, "kafka07": 150}


@pytest.mark.parametrize("name", list(TARGETS))
def test_a_target_takes_its_seeds_and_damaged_copies_of_them(name: str) -> None:
    target, seeds = TARGETS[name]
    found = list(seeds())
    assert found
    for seed in found:
        target(seed)
    rng = random.Random(name)
    for _ in range(RUNS[name]):
        data = bytearray(rng.choice(found))
        for _ in range(rng.randrange(1, 6)):
            if rng.random() < 0.2:
                data += rng.randbytes(rng.randrange(1, 300))
            elif data:
                data[rng.randrange(len(data))] = rng.randrange(256)
        if rng.random() < 0.3:
            del data[rng.randrange(len(data) + 1) :]
        target(bytes(data))


def corpus_inputs() -> list[tuple[str, Path]]:
    return [
        (name, path)
        for name in TARGETS
        if (CORPUS / name).is_dir()
        for path in sorted((CORPUS / name).iterdir())
    ]


@pytest.mark.parametrize(("name", "path"), corpus_inputs(), ids=lambda v: getattr(v, "name", v))
def test_an_input_atheris_found_failing_passes_now(name: str, path: Path) -> None:
    TARGETS[name][0](path.read_bytes())


def test_a_decoder_target_refuses_rows_that_break_a_promise() -> None:
    conn = Connection(7, "10.0.0.1", 40000, "10.0.0.2", 6650, 0, ClientBy.SYN)
    rows = Rows()
    rows.tables["anomalies"].append({"ts": 1, "capture": "fuzz", "conn_id": 7, "kind": "sideways"})
    with pytest.raises(Broken, match="'sideways' is not documented"):
        check_rows(rows, {"anomalies": 1}, conn, "pulsar")
    with pytest.raises(Broken, match="counts 2 anomalies, 1 rows name it"):
        rows.tables["anomalies"][0]["kind"] = "gap"
        check_rows(rows, {"anomalies": 2}, conn, "pulsar")


def test_fuzzing_the_compiled_path_refuses_a_build_libfuzzer_cannot_follow() -> None:
    """``--compiled`` on the normal build (no libFuzzer preloaded, no coverage counters in
    the extensions) would fuzz blind: it says so in one line and how to get one."""
    done = subprocess.run(
        [sys.executable, "-m", "fuzz.atheris_run", "--compiled", "pulsar", "-runs=1"],
        cwd=CORPUS.parent.parent,
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert done.returncode == 2
    assert done.stderr.count("\n") == 1, done.stderr
    assert "no libFuzzer was preloaded" in done.stderr and "make fuzz-compiled" in done.stderr
