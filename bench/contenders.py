"""The commands a decode benchmark runs on one capture: ``pwcap decode`` and its peers.

- ``pwcap decode`` with the Parquet dataset written (the product, as a user runs it);
- tshark with the apache/pulsar Wireshark plugin (the tool operators use today), when
  ``tshark -G protocols`` lists ``apache.pulsar``; the Pulsar ports are given with ``-d``
  so the plugin also dissects connections to a port other than its built-in 6650;
- tshark with those ports handed to the ``data`` dissector: the cost of tshark's reading,
  link/IP/TCP dissection and reassembly alone (plain tshark is no baseline: its SMPP
  heuristic claims Pulsar streams and runs super-linearly);
- ``cat``: the bare cost of reading the capture.

Both tshark runs print one field, the frame number, so output costs next to nothing.
"""

from __future__ import annotations

import shutil
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path

import pyarrow.parquet as pq

PULSAR_FILTER = "apache.pulsar"  # the protocol name the plugin registers
PLUGIN = "tshark + Pulsar plugin"
TSHARK_DATA = "tshark, ports as data"
CAT = "cat (reading the file)"


@dataclass(frozen=True)
class Contender:
    """A command and the name its row carries in the table."""

    name: str
    argv: list[str]


COMPILED = "(decoder: compiled)"  # what ``pwcap --version`` says of the compiled engine
# ``pwcap decode``'s options for one process (the per-core figures): its default is every core.
ONE_PROCESS = ("--jobs", "1")


def _pwcap(*args: str) -> list[str]:
    return [sys.executable, "-m", "pwcap.cli", *args]


def _said(argv: list[str]) -> str:
    done = subprocess.run(argv, capture_output=True, text=True, check=False)
    return done.stdout if done.returncode == 0 else ""


def pwcap_version() -> str:
    """What ``pwcap --version`` says (which decode path is built), if it says anything."""
    return _said(_pwcap("--version")).strip() or "pwcap (no --version)"


def engine_checked(allow_interpreted: bool) -> str:
    """``pwcap --version``, or the run refused when it names the interpreted engine (a stale
    or missing build: several times slower, so its figures say nothing of pwcap's) and
    ``--allow-interpreted`` was not given."""
    version = pwcap_version()
    if COMPILED not in version and not allow_interpreted:
        sys.exit(
            f"{version}: the benchmarks measure the compiled engine; run `make build`, or"
            " give --allow-interpreted to measure the interpreted one"
        )
    return version


def pwcap_decode(capture: Path, out: Path, *extra: str) -> Contender:
    name = " ".join(("pwcap decode", *extra)) + " (Parquet)"
    argv = _pwcap("decode", str(capture), "-o", str(out), "--overwrite", "-q", *extra)
    return Contender(name, argv)


FLOOR = "Parquet floor (its tables written again)"
FLOOR_SCRIPT = Path(__file__).resolve().parent / "parquet_floor.py"


def parquet_floor(arrow_dir: Path, out: Path) -> Contender:
    """``parquet_floor.py``: a decode's tables (kept in ``arrow_dir``) written to Parquet
    again, with nothing decoded: the least a run producing them can cost."""
    return Contender(FLOOR, [sys.executable, str(FLOOR_SCRIPT), str(arrow_dir), str(out)])


def has_pulsar_plugin() -> bool:
    if shutil.which("tshark") is None:
        return False
    listed = _said(["tshark", "-G", "protocols"]).splitlines()
    return any(line.split("\t")[-1] == PULSAR_FILTER for line in listed)


def _pulsar_plugin_file() -> str:
    """The plugin's line in ``tshark -G plugins``: file, version, path."""
    listed = _said(["tshark", "-G", "plugins"]).splitlines()
    return next((" ".join(line.split()) for line in listed if "pulsar" in line.lower()), "")


def _tshark(capture: Path, ports: list[int], dissector: str) -> list[str]:
    forced = [arg for port in ports for arg in ("-d", f"tcp.port=={port},{dissector}")]
    return ["tshark", "-r", str(capture), *forced, "-T", "fields", "-e", "frame.number"]


def peers(capture: Path, ports: list[int]) -> tuple[list[Contender], list[str]]:
    """The peers available on this machine, and a note saying which they are."""
    found, notes = [], []
    if shutil.which("tshark") is None:
        notes.append("tshark is not installed: no tshark peers")
    elif not has_pulsar_plugin():
        notes.append(f"tshark lists no {PULSAR_FILTER} protocol: no Pulsar plugin peer")
    else:
        found.append(Contender(PLUGIN, _tshark(capture, ports, PULSAR_FILTER)))
        notes.append(f"{PLUGIN}: {_pulsar_plugin_file()}")
    if shutil.which("tshark") is not None:
        found.append(Contender(TSHARK_DATA, _tshark(capture, ports, "data")))
        notes.append(_said(["tshark", "--version"]).partition("\n")[0])
    found.append(Contender(CAT, ["cat", str(capture)]))
    return found, notes


def decoded_rows(dataset: Path, table: str = "frames") -> int:
    """Rows in one table of a written dataset, from the Parquet footers alone."""
    parts = (dataset / table).rglob("*.parquet")
    return sum(pq.ParquetFile(part).metadata.num_rows for part in parts)
