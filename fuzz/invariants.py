"""What every dataset pwcap writes must satisfy, whatever capture it was given.

Damaged input may cost frames, never honesty: times run forward within a frame and a
connection, offsets are never negative, a connection has one row, every value of an
enumerated column is one the schema documents, and a connection's ``anomalies`` count
is the number of its anomaly rows. :func:`violations` lists what a dataset breaks.
"""

from __future__ import annotations

import re
from collections import Counter
from functools import cache
from pathlib import Path

import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq
from pwcap.tables.schema import KINDS, TABLES

# Columns whose values the schema lists in backquotes in the column's description.
ENUM_COLUMNS = {
    "frames": ("direction", "protocol"),
    "messages": ("direction", "protocol"),
    "anomalies": ("direction", "protocol"),
    "connections": ("protocol", "client_by", "close_reason"),
}
NON_NEGATIVE = {
    "frames": ("stream_offset", "frame_size", "payload_size"),
    "messages": ("stream_offset", "payload_size"),
    "anomalies": ("stream_offset", "size"),
    "connections": ("bytes_c2b", "bytes_b2c", "frames_c2b", "frames_b2c", "gaps", "gap_bytes"),
}
IN_ORDER = {"frames": [("ts_first", "ts")], "connections": [("first_ts", "last_ts")]}


@cache
def documented(table: str, column: str) -> frozenset[str]:
    """The values the schema's description of a column names (`c2b`, `fin`...)."""
    if table == "anomalies" and column == "kind":
        return KINDS
    doc = next(c.doc for c in TABLES[table] if c.name == column)
    return frozenset(re.findall(r"`([a-z0-9_]+)`", doc))


def read(dataset: Path) -> dict[str, pa.Table]:
    return {table: pq.read_table(dataset / table) for table in TABLES}


def violations(tables: dict[str, pa.Table]) -> list[str]:
    """Every invariant the tables break, each as one line naming the capture."""
    found: list[str] = []
    for table, columns in ENUM_COLUMNS.items():
        for column in (*columns, *(["kind"] if table == "anomalies" else [])):
            allowed = documented(table, column)
            for value, capture in _rows(tables[table], column):
                if value is not None and value not in allowed:
                    found.append(f"{capture}: {table}.{column} = {value!r} is not documented")
    for table, columns in NON_NEGATIVE.items():
        for column in columns:
            for value, capture in _rows(tables[table], column, pc.less(tables[table][column], 0)):
                found.append(f"{capture}: {table}.{column} = {value} is negative")
    for table, pairs in IN_ORDER.items():
        for first, last in pairs:
            data = tables[table]
            for value, capture in _rows(data, first, pc.greater(data[first], data[last])):
                found.append(f"{capture}: {table}.{first} {value} is after its {last}")
    found += _connections(tables)
    return found


def _connections(tables: dict[str, pa.Table]) -> list[str]:
    """One row per conn_id; its `anomalies` count equals its anomaly rows; every row of
    a connection has the connection's row."""
    found = []
    connections = tables["connections"]
    ids = connections["conn_id"].to_pylist()
    captures = connections["capture"].to_pylist()
    repeated = {conn_id for conn_id, count in Counter(ids).items() if count > 1}
    for conn_id, count in Counter(ids).items():
        if count > 1:
            capture = captures[ids.index(conn_id)]
            found.append(f"{capture}: {count} connections rows for conn_id {conn_id}")
    rows = Counter(c for c in tables["anomalies"]["conn_id"].to_pylist() if c is not None)
    counted = connections["anomalies"].to_pylist()
    for conn_id, capture, count in zip(ids, captures, counted, strict=True):
        if count != rows.get(conn_id, 0) and conn_id not in repeated:  # said above
            found.append(
                f"{capture}: connection {conn_id} counts {count} anomalies,"
                f" {rows.get(conn_id, 0)} rows name it"
            )
    known = set(ids)
    for table in ("frames", "messages", "anomalies"):
        data = tables[table]
        for conn_id, capture in zip(
            data["conn_id"].to_pylist(), data["capture"].to_pylist(), strict=True
        ):
            if conn_id is not None and conn_id not in known:
                found.append(f"{capture}: {table} row of conn_id {conn_id}, which has no row")
                known.add(conn_id)  # said once
    return found


def _rows(
    table: pa.Table, column: str, where: pa.ChunkedArray | None = None
) -> list[tuple[object, str]]:
    """Distinct (value, capture) pairs of ``column``, of the rows ``where`` selects."""
    if where is not None:
        table = table.filter(pc.fill_null(where, False))
    if not len(table):
        return []
    pairs = table.select([column, "capture"]).group_by([column, "capture"]).aggregate([])
    return list(zip(pairs[column].to_pylist(), pairs["capture"].to_pylist(), strict=True))
