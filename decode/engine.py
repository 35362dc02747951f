"""Which engine decodes: the hot path compiled by Cython, or the same modules interpreted.

The hot-path modules (``setup.py`` lists them) are plain Python that the build also
compiles into extension modules beside their sources. Python's import system prefers an
extension module to a source file of the same name, so the compiled path runs whenever
the build produced it. For pwcap's own modules a finder placed first turns that
preference around in two cases: ``PWCAP_PURE_PYTHON=1`` (the interpreted path runs from
the very same sources, which is how the tests compare the two), and a build older than
its sources (a source edited since the last build: the edit runs, never stale code).

The compiled modules reach into each other's C declarations (``.pxd`` files), so they
load as one: when any extension is older than its ``.py`` or its ``.pxd``, every module
of the hot path loads from its source, and :func:`activate` says so on stderr: that run is
several times slower, and only a rebuild makes it fast again.

Nothing here happens at ``import pwcap``: the programs (the ``pwcap`` command, the Spark
decode tasks, the tests) call :func:`activate` before they import the hot path. A
program that imports the decoders without it runs whatever Python's own import picks.
This module is in ``decode/`` because ``decode/__init__.py`` imports nothing: importing it
loads no compiled module, so the choice can still be made.
"""

from __future__ import annotations

import importlib.machinery
import importlib.util
import os
import sys
from types import ModuleType
from typing import TextIO

PURE_PYTHON_VARIABLE = "PWCAP_PURE_PYTHON"
# One module of the hot path: whether it came compiled says which engine runs.
PROBE = "pwcap.decode.pulsar.framing"
# The packages that hold compiled modules.
COMPILED_PACKAGES = ("pwcap.capture", "pwcap.decode", "pwcap.tables")
# Installing a wheel writes the extension and its source a moment apart, in either order;
# a source edited after a build is newer by more than this.
STALE_AFTER_SECONDS = 2.0


def pure_python_requested() -> bool:
    return os.environ.get(PURE_PYTHON_VARIABLE, "") not in ("", "0")


class _SourceWhenDue:
    """Finds pwcap's modules as the other finders do, and loads a compiled one's source
    instead of its extension (placed only when the interpreted path is due). A finder
    needs only ``find_spec``: importlib.abc's base class would load importlib.resources
    into every start for nothing."""

    def find_spec(
        self, fullname: str, path: object = None, target: ModuleType | None = None
    ) -> importlib.machinery.ModuleSpec | None:
        if not fullname.startswith("pwcap."):
            return None
        for finder in sys.meta_path:
            if finder is self or not hasattr(finder, "find_spec"):
                continue
            spec = finder.find_spec(fullname, path, target)
            if spec is not None:
                break
        else:
            return None
        if not isinstance(spec.loader, importlib.machinery.ExtensionFileLoader):
            return spec
        origin = spec.origin or ""
        source = origin.split(".", 1)[0] + ".py"  # name.cpython-311-....so -> name.py
        if not os.path.exists(source):
            return spec
        return importlib.util.spec_from_file_location(fullname, source)


def _compiled_folders() -> list[str]:
    folders: list[str] = []
    for package in COMPILED_PACKAGES:
        spec = importlib.util.find_spec(package)
        if spec is not None and spec.submodule_search_locations:
            folders.extend(spec.submodule_search_locations)
    return folders


def stale_build(folders: list[str]) -> bool:
    """Whether an extension module under ``folders`` is older than its source or the
    ``.pxd`` beside it."""
    for folder in folders:
        for directory, _, names in os.walk(folder):
            for name in names:
                if not name.endswith(tuple(importlib.machinery.EXTENSION_SUFFIXES)):
                    continue
                stem = os.path.join(directory, name.split(".", 1)[0])
                extension = os.path.join(directory, name)
                for source in (stem + ".py", stem + ".pxd"):
                    if os.path.exists(source) and is_stale(extension, source):
                        return True
    return False


def is_stale(extension: str, source: str) -> bool:
    return os.path.getmtime(source) > os.path.getmtime(extension) + STALE_AFTER_SECONDS


REBUILD_HINT = "run `make build` in the checkout, or reinstall pwcap"


def activate(warn: TextIO | None = sys.stderr) -> None:
    """Decode with the engine this environment asks for, from here on in this process.

    Called once by each program before it imports the hot path (again is harmless). The
    finder goes first on the import path only when it has something to do: the
    interpreted path was asked for, or the build is older than its sources; in the second
    case ``warn`` gets one line saying so, every run, so a slow run is never a mystery.
    """
    if any(isinstance(finder, _SourceWhenDue) for finder in sys.meta_path):
        return
    pure = pure_python_requested()
    stale = not pure and stale_build(_compiled_folders())
    if not (pure or stale):
        return
    sys.meta_path.insert(0, _SourceWhenDue())
    if stale and warn is not None:
        print(
            "pwcap: warning: the compiled decoder is older than its sources, so this run"
            f" uses the interpreted one (several times slower): {REBUILD_HINT}",
            file=warn,
        )


def engine() -> str:
    """The engine this interpreter decodes with, and why when it is not the compiled one."""
    module = importlib.import_module(PROBE)
    if isinstance(getattr(module, "__loader__", None), importlib.machinery.ExtensionFileLoader):
        return "compiled"
    if pure_python_requested():
        return f"interpreted: {PURE_PYTHON_VARIABLE} is set"
    stem = os.path.splitext(getattr(module, "__file__", None) or "")[0]
    if any(os.path.exists(stem + suffix) for suffix in importlib.machinery.EXTENSION_SUFFIXES):
        return f"interpreted: the compiled build is older than its sources; {REBUILD_HINT}"
    return "interpreted: no compiled build (making one needs a C compiler and Cython)"
