"""Decode many mutants in one run of pwcap, in this process, and say which ones failed.

Writing a Parquet dataset costs more than decoding a small capture, so mutants are
decoded together: one :func:`pwcap.decode.driver.decode_captures` over a folder of them, as a
user decodes a folder of captures. A capture pwcap refuses (not a capture) stops such a
run with one line naming the file; that file is set aside and the run repeated. When a
run raises anything else or outgrows the memory budget, each of its mutants is decoded
alone to find the ones to blame.
"""

from __future__ import annotations

import re
import shutil
import time
import traceback
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path

from fuzz.invariants import read, violations
from fuzz.mutate import SAMPLES, Mutant
from pwcap.decode.api import DecodeOptions
from pwcap.decode.driver import Summary, decode_captures
from pwcap.decode.inputs import InputError

MEMORY_MB = 400  # peak resident memory of the whole decoding process, any input
# The samples' key logs: mutants of TLS samples are decrypted, not only reported.
OPTIONS = DecodeOptions(
    tls_keylogs=tuple(
        str(path) for path in sorted(SAMPLES.glob("*.keylog")) if ".wrong." not in path.name
    )
)
SECONDS_BASE = 1.0  # time budget of one capture: this plus SECONDS_PER_BYTE per byte
SECONDS_PER_BYTE = 20e-6  # 50 KB/s: far below pwcap's speed, far above a quadratic's


@dataclass(frozen=True)
class Limits:
    """What a decode may take: the product's promise by default. A sanitized build
    (``make sanitize``) is slower and ASan's shadow memory is not pwcap's: it runs with
    wider ones, and the normal build keeps checking the promise itself."""

    memory_mb: float = MEMORY_MB
    time_factor: float = 1.0  # times the time budget

    def seconds(self, size: int) -> float:
        """The time budget of a capture of ``size`` bytes."""
        return self.time_factor * (SECONDS_BASE + SECONDS_PER_BYTE * size)


PROMISED = Limits()


@dataclass(frozen=True)
class Failure:
    """A broken promise: ``kind`` is exception, invariant, slow, memory, refusal, hang
    or died; ``detail`` is the traceback or the message."""

    name: str  # the mutant's file name
    kind: str
    detail: str


@dataclass
class Outcome:
    """What a batch gave: failures, and counts for the campaign's report."""

    failures: list[Failure] = field(default_factory=list)
    decoded: int = 0
    refused: int = 0
    peak_mb: float = 0.0
    cpu_seconds: float = 0.0  # set by the campaign's worker, which measures its own


def decode_batch(mutants: Sequence[Mutant], folder: Path, limits: Limits = PROMISED) -> Outcome:
    """Decode ``mutants`` in ``folder`` (emptied first) and check every promise."""
    shutil.rmtree(folder, ignore_errors=True)
    inputs = folder / "in"
    inputs.mkdir(parents=True)
    paths = []
    for one in mutants:
        path = inputs / one.name
        path.write_bytes(one.data)
        paths.append(path)
    reset_peak()
    try:
        outcome = _decode(paths, folder / "out", limits)
    except Exception:
        if len(paths) == 1:
            return Outcome([Failure(paths[0].name, "exception", traceback.format_exc())])
        outcome = None
    if outcome is not None:
        outcome.peak_mb = peak_mb()
        if outcome.peak_mb <= limits.memory_mb or len(paths) == 1:
            if outcome.peak_mb > limits.memory_mb:
                outcome.failures.append(
                    Failure(paths[0].name, "memory", f"peak {outcome.peak_mb:.0f} MB")
                )
            return outcome
    return _one_by_one(mutants, folder, limits)


def _one_by_one(mutants: Sequence[Mutant], folder: Path, limits: Limits) -> Outcome:
    total = Outcome()
    for one in mutants:
        outcome = decode_batch([one], folder, limits)
        total.failures += outcome.failures
        total.decoded += outcome.decoded
        total.refused += outcome.refused
        total.peak_mb = max(total.peak_mb, outcome.peak_mb)
    return total


def _decode(paths: list[Path], out: Path, limits: Limits) -> Outcome:
    """One run over ``paths``, again without each file it refuses."""
    outcome = Outcome()
    remaining = list(paths)
    while remaining:
        try:
            summary = decode_captures(remaining, out, OPTIONS, overwrite=True)
        except InputError as error:
            message = str(error)
            refused = [p for p in remaining if str(p) in message]
            if len(refused) != 1 or "\n" in message:
                names = ", ".join(p.name for p in remaining)
                raise AssertionError(f"a refusal naming not one of {names}: {message}") from None
            remaining.remove(refused[0])
            outcome.refused += 1
            continue
        outcome.decoded += len(remaining)
        outcome.failures += _check(summary, out, limits)
        break
    return outcome


def _check(summary: Summary, out: Path, limits: Limits) -> list[Failure]:
    failures = []
    for capture in summary.captures:
        budget = limits.seconds(capture.size)
        if capture.seconds > budget:
            failures.append(
                Failure(
                    capture.path.name,
                    "slow",
                    f"{capture.seconds:.1f} s for {capture.size} bytes (budget {budget:.1f} s)",
                )
            )
    for line in violations(read(out)):
        name, _, detail = line.partition(": ")
        failures.append(Failure(name, "invariant", detail))
    return failures


def reset_peak() -> None:
    """Start measuring the peak resident memory of this process afresh (Linux)."""
    with open("/proc/self/clear_refs", "w") as clear:
        clear.write("5")


def peak_mb() -> float:
    """The peak resident memory of this process since :func:`reset_peak`, in MB."""
    status = Path("/proc/self/status").read_text()
    found = re.search(r"VmHWM:\s+(\d+) kB", status)
    return int(found[1]) / 1024 if found else 0.0


def timed(mutants: Sequence[Mutant], folder: Path) -> tuple[Outcome, float]:
    """:func:`decode_batch` and the CPU seconds it took."""
    started = time.process_time()
    outcome = decode_batch(mutants, folder)
    return outcome, time.process_time() - started
