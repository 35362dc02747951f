"""Run tcpdump around a scenario and prove it dropped nothing."""

from __future__ import annotations

import re
import signal
import subprocess
import time
from dataclasses import dataclass
from pathlib import Path


@dataclass(frozen=True)
class CaptureOptions:
    interface: str = "lo"
    linktype: str | None = None  # e.g. LINUX_SLL2 with interface "any"
    snaplen: int = 0  # 0: whole packets


@dataclass(frozen=True)
class CaptureStats:
    captured: int
    dropped_by_kernel: int


class CaptureError(RuntimeError):
    pass


class Tcpdump:
    """``with Tcpdump(path, port, options) as capture:`` records TCP traffic on ``port``."""

    def __init__(self, path: Path, port: int, options: CaptureOptions) -> None:
        command = [
            "tcpdump",
            "-i",
            options.interface,
            "-w",
            str(path),
            "-U",
            "-n",
            "--immediate-mode",
        ]
        command += ["-s", str(options.snaplen), "-B", "32768"]  # 32 MiB ring: no drops
        if options.linktype:
            command += ["-y", options.linktype]
        self.command = [*command, f"tcp port {port}"]
        self.stats: CaptureStats | None = None
        self._process: subprocess.Popen[str] | None = None

    def __enter__(self) -> Tcpdump:
        self._process = subprocess.Popen(
            self.command, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True
        )
        assert self._process.stderr is not None
        lines = []  # tcpdump may name the link type first; "listening on" means it is open
        while not lines or "listening on" not in lines[-1]:
            line = self._process.stderr.readline()
            if not line:
                self._process.kill()
                raise CaptureError(f"tcpdump did not start: {' '.join(lines)}")
            lines.append(line.strip())
        time.sleep(1.0)  # "listening on" comes before the capture ring is live
        return self

    def __exit__(self, *exc: object) -> None:
        assert self._process is not None
        time.sleep(1.0)  # let the last packets reach the capture buffer
        self._process.send_signal(signal.SIGINT)
        _, err = self._process.communicate(timeout=30)
        self.stats = parse_stats(err)


def parse_stats(stderr: str) -> CaptureStats:
    """tcpdump's closing summary: 'N packets captured' and 'M packets dropped by kernel'."""
    captured = re.search(r"(\d+) packets? captured", stderr)
    dropped = re.search(r"(\d+) packets? dropped by kernel", stderr)
    if captured is None or dropped is None:
        raise CaptureError(f"no tcpdump summary in: {stderr!r}")
    return CaptureStats(int(captured.group(1)), int(dropped.group(1)))
