"""The progress bar: drawn for a person at a terminal, never into a pipe or a file."""

from __future__ import annotations

import io
from pathlib import Path

from pwcap.cli.progress import ProgressBar, wanted


class Terminal(io.StringIO):
    def isatty(self) -> bool:
        return True


def test_a_bar_only_on_a_terminal_and_only_when_not_quiet():
    assert wanted(quiet=False, stream=Terminal())
    assert not wanted(quiet=True, stream=Terminal())
    assert not wanted(quiet=False, stream=io.StringIO())


def test_the_bar_shows_the_share_done_and_the_capture_then_clears_its_line():
    screen = Terminal()
    bar = ProgressBar(screen)
    bar.start(4_000_000)
    bar.capture(Path("/captures/monday.pcap"), 1_000_000, lambda: 1_000_000)
    line = screen.getvalue()
    assert line.startswith("\r[") and " 50% " in line and "monday.pcap" in line
    assert "2.0/4.0 MB" in line
    bar.finish()
    assert screen.getvalue().endswith("\r\x1b[K")


def test_ticks_between_redraws_cost_no_output():
    screen = Terminal()
    bar = ProgressBar(screen)
    bar.start(100)
    bar.capture(Path("a.pcap"), 0, lambda: 10)
    drawn = screen.getvalue()
    for _ in range(1000):
        bar.tick()
    assert screen.getvalue() == drawn
