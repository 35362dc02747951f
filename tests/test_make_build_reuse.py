"""``make test`` after ``make demo`` reuses the demo's build of the hot path.

``make demo`` compiles the extension modules in place (``setup.py build_ext --inplace``)
and installs pwcap without building them again; ``make test`` then adds the development
tools, also without building, and runs ``make build``, which must find everything up to
date. Here that happens in a scratch copy of the checkout in the state ``make demo``
leaves: the sources, Cython's C in ``build/cython``, the modules setuptools compiled in
``build/lib.*`` and copied beside their sources (times kept), and a ``.venv`` whose
``.installed`` stamp is newer than ``setup.py`` and which runs this environment's
interpreter and packages. ``make build`` there must compile nothing and leave every
compiled module as it was (about 2 s).
"""

from __future__ import annotations

import importlib.machinery
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
SOURCES = ("capture", "cli", "decode", "jobs", "pwcap", "report", "tables")
BUILD_FILES = ("Makefile", "pyproject.toml", "setup.py")


def compiled_modules(root: Path) -> dict[Path, os.stat_result]:
    suffixes = tuple(importlib.machinery.EXTENSION_SUFFIXES)
    found = {}
    for folder in SOURCES:
        for path in (root / folder).rglob("*"):
            if path.name.endswith(suffixes):
                found[path.relative_to(root)] = path.stat()
    return found


@pytest.fixture
def after_demo(tmp_path: Path) -> Path:
    """A copy of the checkout as ``make demo`` leaves it, with a ``.venv`` of its own
    stamps that runs this environment (its interpreter and site-packages, linked)."""
    if not (Path(sys.prefix) / "pyvenv.cfg").exists():
        pytest.skip("the tests do not run from a virtual environment to lend the copy")
    copy = tmp_path / "checkout"
    copy.mkdir()
    for name in BUILD_FILES:
        shutil.copy2(ROOT / name, copy / name)
    for folder in SOURCES:
        shutil.copytree(ROOT / folder, copy / folder, symlinks=True)
    for built in (ROOT / "build").glob("[cl]*"):  # cython (the C) and lib.* (the modules)
        shutil.copytree(built, copy / "build" / built.name, symlinks=True)
    venv = copy / ".venv"
    (venv / "bin").mkdir(parents=True)
    shutil.copy2(Path(sys.prefix) / "pyvenv.cfg", venv / "pyvenv.cfg")
    (venv / "bin" / "python").symlink_to(Path(sys.prefix) / "bin" / "python")
    (venv / "lib").symlink_to(Path(sys.prefix) / "lib")
    (venv / ".installed").touch()  # the demo's install, done after its sources were
    return copy


def make(checkout: Path, *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        ["make", "--no-print-directory", *args],
        cwd=checkout,
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
    )


def test_make_test_after_make_demo_compiles_nothing(after_demo):
    before = compiled_modules(after_demo)
    assert len(before) > 40, "the hot path is not compiled in this checkout: `make build`"

    # What `make test` would run: its only compiling step is `make build`'s (the dev
    # tools' install builds no extension), and nothing remakes the demo's environment.
    planned = make(after_demo, "-n", "test")
    assert planned.returncode == 0, planned.stderr
    steps = planned.stdout.splitlines()
    assert not any(" -m venv " in step for step in steps), steps
    installs = [step for step in steps if "pip install" in step]
    assert installs and all(step.startswith("PWCAP_BUILD_EXT=0 ") for step in installs)
    assert [step for step in steps if "build_ext" in step] == [
        ".venv/bin/python setup.py -q build_ext --inplace"
    ]

    built = make(after_demo, "build")
    assert built.returncode == 0, built.stderr[-3000:]
    after = compiled_modules(after_demo)
    assert after.keys() == before.keys()
    touched = [
        str(path)
        for path, stat in after.items()
        if stat.st_mtime_ns != before[path].st_mtime_ns  # copied again each time, times kept
    ]
    assert touched == [], f"`make build` after `make demo` compiled again: {touched}"
