"""Reading the decoded and analytics Parquet tables with pyarrow, in bounded memory.

The report must open on a laptop whatever the capture size, so every summary here is
computed batch by batch (counts, top-N) or reads only the few columns it needs; a table
that is absent or unreadable is ``None``, never an error, because the report shows what
exists and says what is missing.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.dataset as ds

from ..tables.analytics import ANALYTICS
from ..tables.schema import TABLES

# The tables the report reads, as the table contract names them.
DECODED_TABLES = tuple(TABLES)
ANALYTICS_TABLES = tuple(ANALYTICS)


class Source:
    """The tables found under one folder (a decoded dataset or an analytics output)."""

    def __init__(self, root: Path | None, names: Sequence[str]) -> None:
        self.root = root
        self.tables: dict[str, ds.Dataset] = {}
        self.problems: dict[str, str] = {}
        for name in names:
            table = _open(root / name) if root is not None else None
            if isinstance(table, ds.Dataset):
                self.tables[name] = table
            else:
                self.problems[name] = table or "no analytics folder given"

    def get(self, name: str) -> ds.Dataset | None:
        return self.tables.get(name)

    def has(self, name: str, *columns: str) -> bool:
        table = self.tables.get(name)
        return table is not None and all(c in table.schema.names for c in columns)


def _open(path: Path) -> ds.Dataset | str:
    """The Parquet dataset at ``path``, or why it cannot be read."""
    if not path.is_dir():
        return "not found"
    try:
        found = ds.dataset(path, format="parquet", exclude_invalid_files=True)
    except (pa.ArrowInvalid, OSError) as error:
        return f"unreadable: {error}"
    # Spark writes its timestamps as INT96, which reads back as naive nanoseconds; they are
    # UTC like the decoded tables', so they are read as such, not as local time.
    utc = pa.timestamp("us", tz="UTC")
    naive = [f for f in found.schema if pa.types.is_timestamp(f.type) and f.type.tz is None]
    if not naive:
        return found
    schema = pa.schema([f.with_type(utc) if f in naive else f for f in found.schema])
    return ds.dataset(path, format="parquet", schema=schema, exclude_invalid_files=True)


def batches(
    table: ds.Dataset, columns: Sequence[str], where: pc.Expression | None = None
) -> Iterator[pa.RecordBatch]:
    """The table's columns, one record batch at a time (memory bounded by the batch)."""
    present = [c for c in columns if c in table.schema.names]
    # Little read-ahead: the report is not in a hurry, and a laptop's memory is shared.
    yield from table.to_batches(
        columns=present, filter=where, batch_readahead=2, fragment_readahead=1
    )


def count_by(
    table: ds.Dataset, keys: Sequence[str], where: pc.Expression | None = None
) -> Counter[tuple[Any, ...]]:
    """Row counts per distinct key tuple; the key set must be small (commands, kinds)."""
    counts: Counter[tuple[Any, ...]] = Counter()
    for batch in batches(table, keys, where):
        if batch.num_rows == 0:
            continue
        grouped = pa.Table.from_batches([batch]).group_by(list(keys)).aggregate([([], "count_all")])
        key_columns = [grouped.column(k).to_pylist() for k in keys]
        for row, n in zip(
            zip(*key_columns, strict=True), grouped.column("count_all").to_pylist(), strict=True
        ):
            counts[row] += n
    return counts


def sum_by(
    table: ds.Dataset, keys: Sequence[str], values: Sequence[str], count: bool = False
) -> dict[tuple[Any, ...], list[float]]:
    """Sums of ``values`` per distinct key tuple (nulls count as zero), followed by the
    row count when ``count``."""
    sums: dict[tuple[Any, ...], list[float]] = {}
    names = [f"{v}_sum" for v in values] + (["count_all"] if count else [])
    aggregations: list[tuple[Any, str]] = [(v, "sum") for v in values]
    if count:
        aggregations.append(([], "count_all"))
    for batch in batches(table, [*keys, *values]):
        if batch.num_rows == 0:
            continue
        grouped = pa.Table.from_batches([batch]).group_by(list(keys)).aggregate(aggregations)
        key_columns = [grouped.column(k).to_pylist() for k in keys]
        value_columns = [grouped.column(name).to_pylist() for name in names]
        for row, *vals in zip(zip(*key_columns, strict=True), *value_columns, strict=True):
            total = sums.setdefault(row, [0] * len(names))
            for i, v in enumerate(vals):
                total[i] += v or 0
    return sums


def top_rows(
    table: ds.Dataset,
    columns: Sequence[str],
    by: str,
    n: int,
    where: pc.Expression | None = None,
    largest: bool = True,
) -> list[dict[str, Any]]:
    """The ``n`` rows with the largest ``by`` (the smallest when not ``largest``; nulls
    never), in that order; at most ``n`` rows per batch ever reach Python."""
    best: list[dict[str, Any]] = []
    order = "descending" if largest else "ascending"
    for batch in batches(table, list(dict.fromkeys([*columns, by])), where):
        batch = batch.filter(pc.is_valid(batch.column(by)))
        if batch.num_rows == 0:
            continue
        indices = pc.select_k_unstable(batch, min(n, batch.num_rows), [(by, order)])
        best += batch.take(indices).to_pylist()
        best = sorted(best, key=lambda row: row[by], reverse=largest)[:n]
    return best


def read_columns(
    table: ds.Dataset, columns: Sequence[str], where: pc.Expression | None = None
) -> pa.Table:
    """Whole columns, for the summaries that need every value (percentiles)."""
    return table.to_table(columns=[c for c in columns if c in table.schema.names], filter=where)


def value_range(
    table: ds.Dataset, column: str, where: pc.Expression | None = None
) -> tuple[Any, Any] | None:
    """Smallest and largest non-null value of ``column``, batch by batch."""
    low = high = None
    for batch in batches(table, [column], where):
        bounds = pc.min_max(batch.column(column))
        lo, hi = bounds["min"].as_py(), bounds["max"].as_py()
        if lo is not None:
            low = lo if low is None else min(low, lo)
            high = hi if high is None else max(high, hi)
    return None if low is None else (low, high)
