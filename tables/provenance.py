"""Which decoded dataset each analytics table was computed from.

``pwcap report DATASET --analytics DIR`` must not show numbers computed from another
dataset as this one's. The analytics jobs record, beside their tables, each table's
sources: a fingerprint of every dataset they read. A dataset's fingerprint is the names
and sizes of its ``frames`` part files: a dataset moved or copied keeps it, the same
captures decoded again give it again, and any other dataset gives another.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Iterable, Mapping
from pathlib import Path

RECORD = "_pwcap_sources.json"  # in the analytics folder: table -> fingerprints of its sources
PART_SUFFIX = ".parquet"


def fingerprint(parts: Iterable[tuple[str, int]]) -> str:
    """The identity of a dataset from its ``frames`` part files: (name, size) each."""
    digest = hashlib.sha256()
    for name, size in sorted(parts):
        digest.update(f"{name}\0{size}\n".encode())
    return digest.hexdigest()[:20]


def local_fingerprint(dataset: Path) -> str | None:
    """The fingerprint of a dataset folder on this machine; None without frames files."""
    parts = [
        (path.name, path.stat().st_size)
        for path in (dataset / "frames").glob(f"*{PART_SUFFIX}")
        if path.is_file()
    ]
    return fingerprint(parts) if parts else None


def updated(record: str | None, tables: Iterable[str], sources: list[str]) -> str:
    """The record's text once ``tables`` were (re)written from ``sources`` (unknown when
    empty); the other tables' entries stay (a job script rewrites its own tables only)."""
    entries = parse(record)
    for table in tables:
        entries.pop(table, None)
        if sources:
            entries[table] = sorted(set(sources))
    return json.dumps(entries, indent=1, sort_keys=True) + "\n"


def parse(record: str | None) -> dict[str, list[str]]:
    """table -> fingerprints, from a record's text (nothing from none or a damaged one)."""
    try:
        entries = json.loads(record) if record else {}
    except ValueError:
        return {}
    if not isinstance(entries, dict):
        return {}
    return {str(k): [str(s) for s in v] for k, v in entries.items() if isinstance(v, list)}


def mismatches(
    record: Mapping[str, list[str]], tables: Iterable[str], dataset: str
) -> tuple[list[str], list[str], list[str]]:
    """Of ``tables``: those computed from other datasets only, those computed from this
    one among others, and those whose sources are not recorded (an older pwcap)."""
    other, mixed, unknown = [], [], []
    for table in sorted(tables):
        sources = record.get(table)
        if sources is None:
            unknown.append(table)
        elif dataset not in sources:
            other.append(table)
        elif len(sources) > 1:
            mixed.append(table)
    return other, mixed, unknown
