"""What a reader, an IDE or a path-based structure view sees of the imports is what runs.

The product's folders (the library: ``capture/``, ``decode/``, ``tables/``, ``jobs/``; the
front end: ``cli/``, ``report/``; and ``pwcap/``, the top package) are installed under
``pwcap`` (``decode/`` is ``pwcap.decode``, ``cli/`` is ``pwcap.cli``) and import each other
relatively, never as ``pwcap.…``, so a tool that knows nothing of the installation follows
each import to its file by path. These tests resolve every relative import both ways, by
path in the checkout and by Python's import system, and require the same existing file;
they keep the command line and the report out of the library, the tests out of the fuzzing
tools, and ruff sorting pwcap's own imports as first-party. (``test_jobs_imports.py`` holds
the layering: what the analytics jobs may load at all.)
"""

from __future__ import annotations

import ast
import importlib.util
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
LIBRARY = ("capture", "decode", "tables", "jobs")  # each installed as pwcap.<folder>
FRONT_END = ("cli", "report")  # so too
PRODUCT = (*LIBRARY, *FRONT_END, "pwcap")  # pwcap/ is the top package itself


def sources(*folders: str) -> list[Path]:
    return sorted(path for folder in folders for path in (ROOT / folder).rglob("*.py"))


def package_of(path: Path) -> str:
    """The installed package a product source sits in (``decode/pulsar/hot.py``:
    ``pwcap.decode.pulsar``; ``cli/show.py``: ``pwcap.cli``; ``pwcap/__init__.py``:
    ``pwcap``)."""
    folders = path.parent.relative_to(ROOT).parts
    return ".".join(["pwcap", *(folders[1:] if folders[0] == "pwcap" else folders)])


def imports(path: Path) -> Iterator[ast.ImportFrom | ast.Import]:
    for node in ast.walk(ast.parse(path.read_text(), str(path))):
        if isinstance(node, ast.ImportFrom | ast.Import):
            yield node


def by_path(folder: Path, dotted: str) -> Path | None:
    """``dotted`` below ``folder`` as a file or a package folder, if it exists."""
    target = folder.joinpath(*dotted.split(".")) if dotted else folder
    if target.with_suffix(".py").is_file():
        return target.with_suffix(".py")
    if (target / "__init__.py").is_file():
        return target / "__init__.py"
    return None


def by_import(module: str) -> Path | None:
    """Where Python's import system finds ``module`` (its source, compiled or not), links
    followed: the sanitizers' scratch copy reaches ``capture/`` as ``pwcap/capture``."""
    spec = importlib.util.find_spec(module)
    if spec is None or spec.origin is None:
        return None
    origin = Path(spec.origin)
    return origin.with_name(origin.name.split(".", 1)[0] + ".py").resolve()  # ...so too


def relative_targets(path: Path) -> Iterator[tuple[int, str, Path | None, str]]:
    """(line, the import as written, the file it names by path, the module it names when
    run) for every relative import in ``path``; ``from . import name`` names a module
    when there is one of that name, else a name of the package's ``__init__``."""
    for node in imports(path):
        if not isinstance(node, ast.ImportFrom) or node.level == 0:
            continue
        folder = path.parent
        for _ in range(node.level - 1):
            folder = folder.parent
        written = "." * node.level + (node.module or "")
        module = importlib.util.resolve_name(written, package_of(path))
        if node.module is None:
            for alias in node.names:
                target = by_path(folder, alias.name) or by_path(folder, "")
                submodule = f"{module}.{alias.name}"
                named = submodule if by_path(folder, alias.name) else module
                yield node.lineno, f"{written} import {alias.name}", target, named
        else:
            yield node.lineno, written, by_path(folder, node.module), module


@pytest.mark.parametrize("path", sources(*PRODUCT), ids=lambda p: str(p.relative_to(ROOT)))
def test_every_relative_import_names_by_path_the_file_python_imports(path):
    for line, written, target, module in relative_targets(path):
        where = f"{path.relative_to(ROOT)}:{line}: {written}"
        assert target is not None, f"{where} names no file or package folder in the checkout"
        assert target.is_relative_to(ROOT) and target.relative_to(ROOT).parts[0] in PRODUCT, (
            f"{where} leaves the product's folders ({target})"
        )
        assert by_import(module) == target, f"{where} imports {by_import(module)}, not {target}"


def test_the_walk_sees_relative_imports_between_the_folders():
    """The test above would pass on no imports at all: the code does cross the folders."""
    crossing = {
        (path.relative_to(ROOT).parts[0], target.relative_to(ROOT).parts[0])
        for path in sources(*PRODUCT)
        for _, _, target, _ in relative_targets(path)
        if target is not None
    }
    assert {
        ("decode", "capture"),
        ("decode", "tables"),
        ("jobs", "tables"),
        ("cli", "capture"),
        ("cli", "decode"),
        ("cli", "jobs"),
        ("cli", "report"),
        ("cli", "tables"),
        ("report", "tables"),
    } <= crossing


def absolute_imports(path: Path) -> Iterator[tuple[int, str]]:
    """The modules ``path`` imports by an absolute name."""
    for node in imports(path):
        if isinstance(node, ast.Import):
            yield from ((node.lineno, alias.name) for alias in node.names)
        elif node.level == 0:
            yield node.lineno, node.module or ""


def import_module_calls(path: Path) -> Iterator[tuple[int, str]]:
    """The module names written out in ``importlib.import_module("...")`` calls."""
    for node in ast.walk(ast.parse(path.read_text(), str(path))):
        if not isinstance(node, ast.Call) or not node.args:
            continue
        func = node.func
        called = func.attr if isinstance(func, ast.Attribute) else getattr(func, "id", None)
        first = node.args[0]
        if called == "import_module" and isinstance(first, ast.Constant):
            yield node.lineno, str(first.value)


@pytest.mark.parametrize("folder", PRODUCT)
def test_no_product_module_imports_pwcap_by_its_installed_name(folder):
    """``pwcap.decode...`` names no file a path-based tool can find (there is no
    ``pwcap/decode/``): inside the product every import is relative."""
    found = [
        f"{path.relative_to(ROOT)}:{line}: {name}"
        for path in sources(folder)
        for line, name in [*absolute_imports(path), *import_module_calls(path)]
        if name == "pwcap" or name.startswith("pwcap.")
    ]
    assert found == []


def test_the_check_for_installed_names_sees_them(tmp_path):
    """The check above finds each way of writing such an import."""
    probe = tmp_path / "probe.py"
    probe.write_text(
        "import pwcap.decode\nfrom pwcap.tables import schema\nfrom pwcap import cli\n"
        "import importlib\nimportlib.import_module('pwcap.report')\nfrom . import near\n"
    )
    found = [name for _, name in [*absolute_imports(probe), *import_module_calls(probe)]]
    assert found == ["pwcap.decode", "pwcap.tables", "pwcap", "importlib", "pwcap.report"]


def imported_modules(path: Path) -> Iterator[tuple[int, str]]:
    """Every module an import statement of ``path`` may load, absolute."""
    for node in imports(path):
        if isinstance(node, ast.Import):
            yield from ((node.lineno, alias.name) for alias in node.names)
            continue
        module = node.module or ""
        if node.level:
            module = importlib.util.resolve_name("." * node.level + module, package_of(path))
        yield node.lineno, module
        yield from ((node.lineno, f"{module}.{alias.name}") for alias in node.names)


def strings(path: Path) -> Iterator[tuple[int, str]]:
    """The string constants of ``path`` (a module named for importlib is one)."""
    for node in ast.walk(ast.parse(path.read_text(), str(path))):
        if isinstance(node, ast.Constant) and isinstance(node.value, str):
            yield node.lineno, node.value


@pytest.mark.parametrize("folder", LIBRARY)
def test_no_library_module_imports_the_command_line_or_the_report(folder):
    found = [
        f"{path.relative_to(ROOT)}:{line}: {name}"
        for path in sources(folder)
        for line, name in [*imported_modules(path), *strings(path)]
        if name in ("pwcap.cli", "pwcap.report") or name.startswith(("pwcap.cli.", "pwcap.report."))
    ]
    assert found == []


def test_the_fuzzing_tools_import_nothing_of_the_tests():
    found = [
        f"{path.relative_to(ROOT)}:{line}: {name}"
        for path in sources("fuzz")
        for line, name in imported_modules(path)
        if name == "tests" or name.startswith("tests.")
    ]
    assert found == []


def unsorted(source: str) -> bool:
    """Whether ``ruff check --select I`` (the project's settings) would sort the imports of
    ``source``, read as a module of ``decode/``."""
    probe = ROOT / "decode" / "probe.py"
    done = subprocess.run(
        [sys.executable, "-m", "ruff", "check", "--select", "I", "--stdin-filename", probe, "-"],
        input=source,
        capture_output=True,
        text=True,
        cwd=ROOT,
    )
    assert done.returncode in (0, 1), done.stderr
    return done.returncode == 1


def test_ruff_sorts_pwcap_imports_as_first_party():
    use = "\nprint(pyarrow, schema)\n"
    third_then_first = "import pyarrow\n\nfrom pwcap.tables import schema\n" + use
    one_group = "import pyarrow\nfrom pwcap.tables import schema\n" + use
    assert not unsorted(third_then_first)
    assert unsorted(one_group)  # as a third-party import, pwcap would sort into pyarrow's group
