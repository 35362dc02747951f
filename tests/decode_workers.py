"""The worker processes of a ``pwcap decode --jobs N`` run, found as ``/proc`` lists them."""

from __future__ import annotations

import time
from pathlib import Path


def decode_workers(pid: int, count: int, timeout: float = 60.0) -> list[int]:
    """The first ``count`` decode workers of process ``pid``, once it has started them.

    Its other child, multiprocessing's resource tracker, is not one: a worker is an
    interpreter multiprocessing's ``spawn_main`` runs."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        children = Path(f"/proc/{pid}/task/{pid}/children").read_text().split()
        workers = [int(child) for child in children if _is_worker(int(child))]
        if len(workers) >= count:
            return workers[:count]
        time.sleep(0.02)
    raise AssertionError(f"process {pid} never started {count} decode workers")


def _is_worker(pid: int) -> bool:
    try:
        return b"spawn_main" in Path(f"/proc/{pid}/cmdline").read_bytes()
    except OSError:  # it has ended already
        return False
