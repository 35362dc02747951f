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

import pyarrow.parquet as pq

from pwcap.tables.schema import KINDS, TABLES, Row

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


def read(dataset: Path) -> dict[str, list[Row]]:
    """The rows of every table of a dataset."""
    return {table: pq.read_table(dataset / table).to_pylist() for table in TABLES}


def violations(tables: dict[str, list[Row]]) -> list[str]:
    """Every invariant the rows break, each as one line naming the capture (once per
    capture, column and value)."""
    found: dict[str, None] = {}
    for table, rows in tables.items():
        enums = [(c, documented(table, c)) for c in ENUM_COLUMNS[table]]
        if table == "anomalies":
            enums.append(("kind", KINDS))
        for row in rows:
            capture = row.get("capture")
            for column, allowed in enums:
                value = row.get(column)
                if value is not None and value not in allowed:
                    found[f"{capture}: {table}.{column} = {value!r} is not documented"] = None
            for column in NON_NEGATIVE[table]:
                value = row.get(column)
                if value is not None and value < 0:
                    found[f"{capture}: {table}.{column} = {value} is negative"] = None
            for first, last in IN_ORDER.get(table, ()):
                before, after = row.get(first), row.get(last)
                if before is not None and after is not None and before > after:
                    found[f"{capture}: {table}.{first} is after its {last}"] = None
    return list(found) + _connections(tables)


def _connections(tables: dict[str, list[Row]]) -> list[str]:
    """One row per conn_id; its `anomalies` count equals its anomaly rows; every row of
    a connection has the connection's row."""
    found = []
    connections = tables["connections"]
    rows = Counter(c for c in (r.get("conn_id") for r in tables["anomalies"]) if c is not None)
    times = Counter(row["conn_id"] for row in connections)
    for row in connections:
        conn_id, capture = row["conn_id"], row.get("capture")
        if times[conn_id] > 1:  # said once; the counts of its rows mean nothing then
            found.append(f"{capture}: {times[conn_id]} connections rows for conn_id {conn_id}")
            times[conn_id] = 0
        if not times[conn_id]:
            continue
        if (row.get("anomalies") or 0) != rows.get(conn_id, 0):
            found.append(
                f"{capture}: connection {conn_id} counts {row.get('anomalies')} anomalies,"
                f" {rows.get(conn_id, 0)} rows name it"
            )
    known = set(times)
    for table in ("frames", "messages", "anomalies"):
        for row in tables[table]:
            conn_id = row.get("conn_id")
            if conn_id is not None and conn_id not in known:
                found.append(f"{row.get('capture')}: {table} row of conn_id {conn_id} has no row")
                known.add(conn_id)  # said once
    return found
