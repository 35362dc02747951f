"""What ``pwcap analyze`` is doing, on one line of a terminal: the tables being written,
how many are done, and the tasks of Spark's running stages.

Spark's own console bar is off (it prints over the summary and knows nothing of tables);
this line is drawn by a thread that asks Spark's status tracker twice a second.
"""

from __future__ import annotations

import shutil
import threading
import time
from typing import Any, TextIO

INTERVAL = 0.5  # seconds between redraws


class AnalyzeProgress:
    """``[3/8] latency_summary, unacked  stage tasks 5/8  42 s`` while tables are written
    (the jobs' tables are written at once, so several may be under way)."""

    def __init__(self, spark_context: Any, tables: int, stream: TextIO) -> None:
        self._tracker = spark_context.statusTracker()
        self._tables = tables
        self._stream = stream
        self._done = 0
        self._running: list[str] = []  # in the order they started
        self._lock = threading.Lock()  # writers' threads report, the drawing thread reads
        self._started = time.monotonic()
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name="pwcap-progress", daemon=True)

    def __enter__(self) -> AnalyzeProgress:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        self._thread.join()
        self._stream.write("\r\x1b[K")
        self._stream.flush()

    def started(self, name: str) -> None:
        with self._lock:
            self._running.append(name)

    def written(self, name: str) -> None:
        with self._lock:
            self._running.remove(name)
            self._done += 1

    def _run(self) -> None:
        while not self._stop.wait(INTERVAL):
            self._draw()

    def _draw(self) -> None:
        done = total = 0
        for stage_id in self._tracker.getActiveStageIds():
            stage = self._tracker.getStageInfo(stage_id)
            if stage is not None:
                done += stage.numCompletedTasks
                total += stage.numTasks
        seconds = time.monotonic() - self._started
        with self._lock:
            line = f"[{self._done}/{self._tables}] {', '.join(self._running)}"
        if total:
            line += f"  stage tasks {done}/{total}"
        line += f"  {seconds:.0f} s"
        width = shutil.get_terminal_size((80, 24)).columns
        self._stream.write("\r" + line[: width - 1] + "\x1b[K")
        self._stream.flush()
