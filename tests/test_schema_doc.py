"""docs/schema.md is the dataset reference users read: it must say what the schema says."""

from __future__ import annotations

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
