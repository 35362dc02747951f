"""A one-line progress bar on stderr, drawn only when stderr is a terminal.

Redrawing costs a write system call, so :meth:`ProgressBar.tick` looks at the clock and
redraws at most :data:`INTERVAL` seconds apart; callers may tick as often as they like.
"""

from __future__ import annotations

import shutil
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import TextIO

from ..tables.printable import printable

INTERVAL = 0.25  # seconds between redraws


class ProgressBar:
    """Bytes done of a known total, the current file's name and the rate so far."""

    def __init__(self, stream: TextIO | None = None) -> None:
        self._stream = stream or sys.stderr
        self._done = 0  # bytes of the captures finished before the current one
        self._position: Callable[[], int] = lambda: 0  # bytes of the current one, roughly
        self._total = 0
        self._label = ""
        self._started = time.monotonic()
        self._next = 0.0
        self._drawn = False

    def start(self, total_bytes: int) -> None:
        self._total = max(total_bytes, 1)
        self._started = time.monotonic()

    def capture(self, path: Path, done_bytes: int, position: Callable[[], int]) -> None:
        self._label = printable(path.name)
        self._done = done_bytes
        self._position = position
        self._next = 0.0
        self.tick()

    def tick(self) -> None:
        now = time.monotonic()
        if now < self._next:
            return
        self._next = now + INTERVAL
        self._draw(min(self._done + self._position(), self._total), now - self._started)

    def finish(self) -> None:
        if self._drawn:
            self._stream.write("\r\x1b[K")
            self._stream.flush()

    def _draw(self, done: int, seconds: float) -> None:
        width = shutil.get_terminal_size((80, 24)).columns
        rate = done / seconds / 1e6 if seconds > 0 else 0.0
        text = f" {done / self._total:4.0%} {done / 1e6:,.1f}/{self._total / 1e6:,.1f} MB"
        text += f" {rate:,.1f} MB/s  {self._label}"
        bar_width = max(10, min(30, width - len(text) - 3))
        filled = int(bar_width * done / self._total)
        line = f"[{'#' * filled}{'.' * (bar_width - filled)}]{text}"
        self._stream.write("\r" + line[: width - 1] + "\x1b[K")
        self._stream.flush()
        self._drawn = True


def wanted(quiet: bool, stream: TextIO | None = None) -> bool:
    """A bar only for a person watching: not asked to be quiet, stderr a terminal."""
    return not quiet and (stream or sys.stderr).isatty()
