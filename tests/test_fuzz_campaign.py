"""The mutation campaign in small: damaged captures decoded, every promise checked.

The short run decodes a few thousand mutants of the sample captures (seeded, so the same
ones every time); the long run is ``python -m fuzz.campaign`` (see ``fuzz/``). Inputs a
run found failing are kept, minimized, in ``fuzz/corpus/captures`` and replayed here.
"""

from __future__ import annotations

import random
from datetime import timedelta
from pathlib import Path

import pytest

from fuzz import mutate
from fuzz.batch import decode_batch
from fuzz.campaign import run
from fuzz.invariants import read, violations
from fuzz.known import OPEN, known
from fuzz.mutate import Mutant, mutant

SEED = 1
SHORT_RUN = 1000  # in every test run; `python -m fuzz.campaign` runs the long campaigns
BATCH = 100
CORPUS = Path(__file__).resolve().parent.parent / "fuzz" / "corpus" / "captures"


def test_a_mutant_is_the_same_bytes_every_time_and_differs_from_its_neighbours() -> None:
    assert mutant(SEED, 42) == mutant(SEED, 42)
    assert len({mutant(SEED, i).data for i in range(50)}) == 50


def test_a_segment_whose_header_a_mutation_shrank_is_not_re_cut() -> None:
    """Seed 19's mutant 6976 set a TCP data offset of 1 word, then re-cut that segment:
    the pieces' headers had no room for a sequence number and the mutator raised."""
    assert mutant(19, 6976).data


@pytest.mark.parametrize("name", [name for name, _ in mutate.OPERATIONS])
def test_every_mutation_changes_some_sample(name: str) -> None:
    operation = dict(mutate.OPERATIONS)[name]
    changed = 0
    pool = [s for s in mutate.samples() if name != "tls_record" or s[0].startswith("tls")]
    for stem, data, layout in pool:
        rng = random.Random(stem)
        if name in mutate.LAYOUT_OPERATIONS:
            copy = layout.copy()
            operation(rng, copy)
            changed += copy.to_bytes() != data
        else:
            changed += operation(rng, data) != data
    assert changed >= len(pool) // 2  # TLS records: of the TLS samples


def test_the_sample_dataset_keeps_every_promise(sample_dataset: Path) -> None:
    assert violations(read(sample_dataset)) == []


def test_the_checker_names_each_broken_promise(sample_dataset: Path) -> None:
    tables = read(sample_dataset)
    first = tables["connections"][0]
    late = first["last_ts"] + timedelta(seconds=1)
    backwards = first | {"conn_id": 1, "first_ts": late, "anomalies": 0}
    tables["connections"] += [dict(first), dict(first), backwards]
    tables["frames"][0]["direction"] = "sideways"
    tables["anomalies"][0]["stream_offset"] = -1
    found = violations(tables)
    capture = first["capture"]
    assert f"{capture}: 3 connections rows for conn_id {first['conn_id']}" in found
    assert f"{capture}: connections.first_ts is after its last_ts" in found
    assert any(line.endswith("frames.direction = 'sideways' is not documented") for line in found)
    assert any(line.endswith("anomalies.stream_offset = -1 is negative") for line in found)
    assert len(found) == 4


def test_a_short_campaign_breaks_no_promise_but_the_known_open_ones(tmp_path: Path) -> None:
    failures = []
    decoded = 0
    for start in range(0, SHORT_RUN, BATCH):
        batch = [mutant(SEED, i) for i in range(start, start + BATCH)]
        outcome = decode_batch(batch, tmp_path)
        failures += outcome.failures
        decoded += outcome.decoded + outcome.refused
    assert decoded == SHORT_RUN
    # In this process the peak also holds what earlier tests left in it (Spark's client,
    # DuckDB...): memory is judged in fresh processes (the supervised campaign below, the
    # long run, tests/test_hostile_memory.py), every other promise here.
    broken = [f for f in failures if known(f) is None and f.kind != "memory"]
    assert broken == []


def test_the_supervised_campaign_decodes_every_mutant_in_workers(tmp_path: Path) -> None:
    report = run(SEED, 0, 40, jobs=2, found=tmp_path, batch=10)
    assert report.decoded + report.refused == 40
    assert 0 < report.peak_mb < 400
    assert all(known(failure) for _, failure in report.failures)


CORPUS_INPUTS = sorted(path.name for path in CORPUS.iterdir())


@pytest.mark.parametrize("name", CORPUS_INPUTS)
def test_a_corpus_input_fails_only_as_its_open_problem_says(name: str, tmp_path: Path) -> None:
    outcome = decode_batch([Mutant(name, (CORPUS / name).read_bytes(), ())], tmp_path)
    # Decoded in this process, whose peak holds what earlier tests left in it: memory is
    # judged in fresh processes (the supervised campaign, tests/test_hostile_memory.py).
    failures = [failure for failure in outcome.failures if failure.kind != "memory"]
    entry = next((entry for entry in OPEN if name in entry.inputs), None)
    if entry is None:
        assert failures == []
    else:
        assert failures, f"{name} passes now: remove it from fuzz/known.py OPEN"
        assert all(entry.matches(failure) for failure in failures)


def test_every_open_problem_has_an_input_in_the_corpus() -> None:
    for entry in OPEN:
        assert entry.inputs
        assert all(name in CORPUS_INPUTS for name in entry.inputs)
