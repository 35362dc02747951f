"""docs/schema.md is the dataset reference users read: it must say what the schema says."""

from __future__ import annotations

import ast
import re
from collections.abc import Iterator
from pathlib import Path

from pwcap.tables import schema
from pwcap.tables.analytics import ANALYTICS

DOC = Path(__file__).resolve().parent.parent / "docs" / "schema.md"


def test_the_doc_is_what_the_schema_module_renders():
    assert DOC.read_text() == schema.markdown(), (
        "docs/schema.md is stale: run `python -m pwcap.tables.schema > docs/schema.md`"
    )


def test_every_column_of_every_table_is_documented():
    text = DOC.read_text()
    for table, columns in {**schema.TABLES, **ANALYTICS}.items():
        section = text.split(f"## {table}\n", 1)[1].split("\n## ", 1)[0]
        for column in columns:
            assert f"| `{column.name}` | {column.type} |" in section, (table, column.name)
            assert column.doc.strip(), (table, column.name)


# -- anomaly kinds ---------------------------------------------------------------------------

ROOT = DOC.parent.parent
_WORD = re.compile(r"[a-z][a-z0-9_]*\Z")


def _words(node: ast.AST) -> Iterator[str]:
    """The one-word string constants ``node`` may evaluate to."""
    if isinstance(node, ast.Constant) and isinstance(node.value, str) and _WORD.match(node.value):
        yield node.value
    elif isinstance(node, ast.IfExp):
        yield from _words(node.body)
        yield from _words(node.orelse)


def _is_detail(node: ast.AST) -> bool:
    return isinstance(node, ast.JoinedStr) or (
        isinstance(node, ast.Constant) and " " in str(node.value)
    )


def written_kinds(source: str) -> Iterator[str]:
    """The anomaly kinds a module writes, as the decoders spell them: an argument of a
    call that reports or raises (``_anomaly(..., "gap", ...)``, ``report("resync", ...)``,
    ``PayloadError("bad_payload", ...)``), a ``(kind, ..., detail)`` tuple, a ``"kind"``
    value of a row, or a value assigned to ``kind``."""
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.Call):
            func = node.func
            name = func.attr if isinstance(func, ast.Attribute) else getattr(func, "id", "")
            if "anomaly" in name.lower() or "report" in name or name.endswith("Error"):
                for argument in node.args:
                    yield from _words(argument)
        elif isinstance(node, ast.Tuple) and len(node.elts) >= 2 and _is_detail(node.elts[-1]):
            yield from _words(node.elts[0])
        elif isinstance(node, ast.Dict):
            for key, value in zip(node.keys, node.values, strict=True):
                if isinstance(key, ast.Constant) and key.value == "kind":
                    yield from _words(value)
        elif isinstance(node, ast.Assign) and any(
            isinstance(target, ast.Name) and target.id == "kind" for target in node.targets
        ):
            yield from _words(node.value)


def test_every_anomaly_kind_written_is_documented_and_every_documented_one_written():
    """A kind only the code knows (``bad_payload`` and ``decode_error`` once were) is a
    value no reader of the dataset can look up; a kind only the doc knows is stale."""
    written: dict[str, set[str]] = {}
    for folder in ("capture", "decode", "tables"):
        for path in sorted((ROOT / folder).rglob("*.py")):
            for kind in written_kinds(path.read_text()):
                written.setdefault(kind, set()).add(str(path.relative_to(ROOT)))
    undocumented = {kind: where for kind, where in written.items() if kind not in schema.KINDS}
    assert not undocumented, f"written but not in tables/schema.py ANOMALY_KINDS: {undocumented}"
    never = schema.KINDS - set(written)
    assert not never, f"documented, never written: {never}"
    for kind in schema.KINDS:
        assert f"`{kind}`" in DOC.read_text(), kind
