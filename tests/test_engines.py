"""The compiled hot path and the interpreted one are the same decoder.

Both run from one set of sources (Cython compiles the plain Python modules that
``setup.py`` lists); ``PWCAP_PURE_PYTHON=1`` makes pwcap import the sources instead of
the extensions. Every sample capture, the derived damaged ones among them, and captures
damaged here on purpose decode to the same tables, row for row and in the same order.
"""

from __future__ import annotations

import importlib.machinery
import os
import random
import shutil
import subprocess
import sys
from functools import partial
from pathlib import Path

import pyarrow.parquet as pq
import pytest

from pwcap.cli.decode import EXIT_CUT_OFF
from pwcap.decode.engine import STALE_AFTER_SECONDS, is_stale, stale_build
from pwcap.tables.schema import TABLES
from tests.conftest import SAMPLES, sample_keylogs

# Captures whose damage reaches the framing, payload and batch paths of both protocols.
DAMAGED_FROM = (
    "pulsar_batching_compression.pcap",
    "pulsar_chunked.pcap",
    "pulsar_shared_two_consumers.pcap",
    "kafka07_gzip.pcap",
    "kafka07_multi.pcap",
    "tls13_key_update.pcap",  # TLS records that fail, resynchronisation
    "tls12_cbc_mte_mutual.pcap",
)
FLIPS_PER_CAPTURE = 40
PCAP_HEADER_BYTES = 24  # left whole: a capture whose file header breaks is no capture


def run_pwcap(*args: str, pure_python: bool) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "PWCAP_PURE_PYTHON": "1" if pure_python else "0"}
    return subprocess.run(
        [sys.executable, "-m", "pwcap.cli", *args],
        env=env,
        capture_output=True,
        text=True,
        check=False,
    )


def damaged_copies(folder: Path) -> Path:
    """Copies of a few sample captures with bytes flipped past the file header (seeded)."""
    folder.mkdir()
    for name in DAMAGED_FROM:
        raw = bytearray((SAMPLES / name).read_bytes())
        rng = random.Random(name)
        for _ in range(FLIPS_PER_CAPTURE):
            raw[rng.randrange(PCAP_HEADER_BYTES, len(raw))] ^= 1 << rng.randrange(8)
        (folder / f"flipped_{name}").write_bytes(bytes(raw))
        (folder / f"cut_{name}").write_bytes((SAMPLES / name).read_bytes()[: len(raw) * 3 // 5])
    return folder


def test_this_build_runs_compiled_and_can_run_interpreted():
    compiled = run_pwcap("--version", pure_python=False)
    interpreted = run_pwcap("--version", pure_python=True)
    assert "decoder: compiled" in compiled.stdout, (
        "the hot path is not compiled in this checkout: `make build` compiles it"
    )
    assert "decoder: interpreted: PWCAP_PURE_PYTHON is set" in interpreted.stdout


@pytest.mark.parametrize("payloads", [False, True], ids=["digests", "payloads"])
def test_both_engines_write_the_same_tables(tmp_path, payloads):
    inputs = [str(SAMPLES), str(damaged_copies(tmp_path / "damaged"))]
    extra = ["--payloads"] if payloads else []
    extra += [f"--tls-keylog={keylog}" for keylog in sample_keylogs()]
    outputs, statuses = {}, set()
    for pure_python in (False, True):
        out = tmp_path / ("interpreted" if pure_python else "compiled")
        done = run_pwcap(
            "decode",
            *inputs,
            "-o",
            str(out),
            "-q",
            "--jobs",
            "1",
            *extra,
            pure_python=pure_python,
        )
        assert done.returncode in (0, EXIT_CUT_OFF), done.stderr
        statuses.add(done.returncode)
        outputs[pure_python] = out
    assert len(statuses) == 1
    for table in TABLES:
        compiled = pq.read_table(outputs[False] / table)
        interpreted = pq.read_table(outputs[True] / table)
        assert compiled.num_rows > 0 or table == "anomalies"
        assert compiled.to_pylist() == interpreted.to_pylist(), table


LOADERS = """
import importlib.machinery, sys
import pwcap.decode.engine
pwcap.decode.engine.activate()
import pwcap.decode.dispatch, pwcap.decode.pulsar.decoder, pwcap.decode.kafka07.decoder
extension = importlib.machinery.ExtensionFileLoader
print(sorted(n for n, m in sys.modules.items()
             if n.startswith("pwcap.") and isinstance(getattr(m, "__loader__", None), extension)))
"""


def compiled_modules(pure_python: bool) -> list[str]:
    env = {**os.environ, "PWCAP_PURE_PYTHON": "1" if pure_python else "0"}
    done = subprocess.run(
        [sys.executable, "-c", LOADERS], env=env, capture_output=True, text=True, check=True
    )
    return eval(done.stdout)


def test_the_switch_takes_every_hot_module_from_its_source():
    assert {"pwcap.capture.reassembly", "pwcap.decode.pulsar.decoder"} <= set(
        compiled_modules(pure_python=False)
    )
    assert compiled_modules(pure_python=True) == []


def test_an_extension_older_than_its_source_is_stale(tmp_path):
    source, extension = tmp_path / "framing.py", tmp_path / "framing.so"
    source.write_text("")
    extension.write_bytes(b"")
    os.utime(extension, (1_000_000, 1_000_000))
    os.utime(source, (1_000_000 + STALE_AFTER_SECONDS / 2,) * 2)  # installed together
    assert not is_stale(str(extension), str(source))
    os.utime(source, (1_000_000 + 60,) * 2)  # edited after the build
    assert is_stale(str(extension), str(source))


def test_one_stale_extension_or_declaration_makes_the_whole_build_stale(tmp_path):
    """The compiled modules use each other's C declarations: they load all compiled or
    all from source."""
    package = tmp_path / "decode"
    (package / "pulsar").mkdir(parents=True)
    built = 1_000_000
    for stem in ("wire", "pulsar/hot"):
        for suffix in (".py", importlib.machinery.EXTENSION_SUFFIXES[0]):
            path = package / f"{stem}{suffix}"
            path.write_bytes(b"")
            os.utime(path, (built, built))
    declarations = package / "wire.pxd"
    declarations.write_text("")
    os.utime(declarations, (built, built))
    assert not stale_build([str(tmp_path)])
    os.utime(declarations, (built + 60, built + 60))  # C declarations edited since
    assert stale_build([str(tmp_path)])
    os.utime(declarations, (built, built))
    os.utime(package / "pulsar/hot.py", (built + 60, built + 60))
    assert stale_build([str(tmp_path)])


def test_importing_pwcap_changes_nothing_but_defines_names():
    """No import hook is placed by ``import pwcap``, nor by importing the engine's module
    (which loads nothing else of pwcap, so nothing compiled): programs choose their engine."""
    script = (
        "import sys; before = list(sys.meta_path); import pwcap, pwcap.decode.engine;"
        " print(sys.meta_path == before, *sorted(m for m in sys.modules if m.startswith('pwcap')))"
    )
    env = {**os.environ, "PWCAP_PURE_PYTHON": "1"}
    done = subprocess.run(
        [sys.executable, "-c", script], env=env, capture_output=True, text=True, check=True
    )
    assert done.stdout.split() == ["True", "pwcap", "pwcap.decode", "pwcap.decode.engine"]


def checkout_copy(root: Path) -> Path:
    """pwcap's folders laid out as the installed package (``pwcap/capture`` ...), built
    extensions included, under ``root``: a checkout of its own to make stale."""
    here = Path(__file__).resolve().parent.parent
    package = root / "pwcap"
    folders = ("capture", "cli", "decode", "jobs", "report", "tables")
    # Not the links to them that the sanitizers' scratch copy has in pwcap/.
    shutil.copytree(here / "pwcap", package, ignore=lambda _, names: set(folders) & set(names))
    for folder in folders:
        shutil.copytree(here / folder, package / folder)
    return root


def test_a_stale_build_runs_interpreted_and_says_so_on_every_run(tmp_path):
    root = checkout_copy(tmp_path / "site")
    env = {**os.environ, "PYTHONPATH": str(root), "PWCAP_PURE_PYTHON": "0"}
    run = partial(subprocess.run, env=env, cwd=tmp_path, capture_output=True, text=True)
    fresh = run([sys.executable, "-m", "pwcap.cli", "--version"])
    assert "decoder: compiled" in fresh.stdout and fresh.stderr == ""
    os.utime(root / "pwcap" / "decode" / "wire.py")  # edited now, after the build
    for _ in range(2):  # every run, not once
        done = run(
            [
                sys.executable,
                "-m",
                "pwcap.cli",
                "decode",
                str(SAMPLES / "pulsar_plain.pcap"),
                "-o",
                str(tmp_path / "out"),
                "--overwrite",
                "-q",
            ],
        )
        assert done.returncode == 0, done.stderr
        warning = done.stderr.splitlines()
        assert len(warning) == 1 and "older than its sources" in warning[0]
        assert "make build" in warning[0]
