"""Where ``pwcap decode``'s time goes, and how many Python-level calls it makes per frame.

Runs ``pwcap decode`` (one process: ``--jobs 1`` when the option exists) under the
standard library's cProfile in a child process and prints the calls of Python functions
and of built-ins per frame decoded, then the functions that take the most time of their own,
each with its calls per frame. Code compiled by Cython makes no profiled call inside
itself, so a hot path that runs compiled shows as few calls per frame. cProfile slows
every call it counts: read the shares, not the absolute times.
"""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

from contenders import ONE_PROCESS

_CHILD = """
import cProfile, pstats, sys
from pwcap.cli import main
capture, out, frames, top = sys.argv[1], sys.argv[2], int(sys.argv[3]), int(sys.argv[4])
profiler = cProfile.Profile()
profiler.enable()
main(["decode", capture, "-o", out, "--overwrite", "-q", *sys.argv[5:]])
profiler.disable()
stats = pstats.Stats(profiler)
python = sum(calls for (path, _, _), (_, calls, *_) in stats.stats.items() if path != "~")
built_in = stats.total_calls - python
print(f"  calls per frame ({frames:,} frames): {python / frames:.1f} of Python functions,"
      f" {built_in / frames:.1f} of built-ins")
print(f"  {'own time':>8} {'calls/frame':>11}  function")
rows = sorted(stats.stats.items(), key=lambda item: item[1][2], reverse=True)[:top]
for (path, line, name), (_, calls, own, _, _) in rows:
    where = "/".join(path.split("/")[-2:]) + (f":{line}" if line else "")
    print(f"  {own / stats.total_tt:8.1%} {calls / frames:11.2f}  {name}  ({where})")
"""


def profile_decode(capture: Path, out: Path, frames: int, top: int = 25) -> None:
    """Print the profile of decoding ``capture`` (``frames`` frames) into ``out``."""
    argv = [sys.executable, "-c", _CHILD, str(capture), str(out), str(frames), str(top)]
    subprocess.run([*argv, *ONE_PROCESS], check=True)
