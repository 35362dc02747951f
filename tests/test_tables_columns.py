"""Rows held column by column become the batch Arrow itself would make of the dicts.

The reference is Arrow's own conversion of the same dict rows to a struct array against
the table's schema (what the writer did before rows were held by column): for random
rows of every table, with any subset of columns set, edge values, booleans, nested
values and keys the schema lacks, both give the same record batch.
"""

from __future__ import annotations

import random

import pyarrow as pa
import pytest
from pwcap.tables.columns import ColumnBuffer
from pwcap.tables.schema import TABLES, arrow_schema

I64_EDGES = [0, 1, -1, (1 << 63) - 1, -(1 << 63), 1_700_000_000_000_000]
I32_EDGES = [0, 1, -1, (1 << 31) - 1, -(1 << 31)]


def value_for(rng: random.Random, kind: pa.DataType):
    if pa.types.is_boolean(kind):
        return rng.choice([True, False])
    if pa.types.is_int32(kind):
        return rng.choice(I32_EDGES)
    if pa.types.is_integer(kind) or pa.types.is_timestamp(kind):
        return rng.choice(I64_EDGES)
    if pa.types.is_string(kind):
        return rng.choice(["", "SEND", "persistent://t/ns/topic", "ünï"])
    if pa.types.is_binary(kind):
        return rng.choice([b"", b"\x00\xff", bytes(100)])
    if pa.types.is_map(kind):
        return [("k", "v"), ("k2", "")]
    if pa.types.is_list(kind):
        first = {"ledger_id": 1, "entry_id": 2, "partition": None, "batch_index": 3}
        second = {"ledger_id": -1, "entry_id": 0, "partition": 7}  # batch_index left out
        return rng.choice([[], [first], [first, second]])
    raise AssertionError(f"no sample value for {kind}")


def random_rows(rng: random.Random, schema: pa.Schema, count: int) -> list[dict]:
    rows = []
    for _ in range(count):
        share = rng.choice([0.0, 0.2, 0.8, 1.0])
        row = {f.name: value_for(rng, f.type) for f in schema if rng.random() < share}
        if rng.random() < 0.1:
            row["not_a_column"] = 1
        if rng.random() < 0.1 and row:
            row[rng.choice(list(row))] = None  # an explicit None is null too
        rows.append(row)
    return rows


@pytest.mark.parametrize("table", list(TABLES))
def test_column_buffer_batches_equal_arrows_own_conversion(table):
    rng = random.Random(table)
    schema = arrow_schema(table)
    buffer = ColumnBuffer(schema, limit=50)
    for _ in range(6):
        rows = random_rows(rng, schema, 50)
        full = [buffer.add(row) for row in rows]
        assert full == [False] * 49 + [True]  # the 50th row fills it
        batch = buffer.take_batch()
        expected = pa.RecordBatch.from_struct_array(pa.array(rows, type=pa.struct(list(schema))))
        assert batch.equals(expected)
        assert len(buffer) == 0 and buffer.take_batch() is None


def test_an_int32_value_out_of_range_is_refused_not_wrapped():
    schema = pa.schema([("n", pa.int32())])
    buffer = ColumnBuffer(schema, limit=4)
    buffer.add({"n": 1 << 31})
    with pytest.raises(pa.ArrowInvalid):
        buffer.take_batch()


def test_a_full_buffer_takes_no_row_until_emptied():
    buffer = ColumnBuffer(pa.schema([("n", pa.int64())]), limit=1)
    assert buffer.add({"n": 1})
    with pytest.raises(OverflowError):
        buffer.add({"n": 2})


def test_string_and_binary_bytes_end_a_batch_early():
    schema = pa.schema([("payload", pa.binary()), ("topic", pa.string())])
    buffer = ColumnBuffer(schema, limit=100, byte_limit=10)
    assert not buffer.add({"payload": b"12345"})
    assert buffer.add({"topic": "67890"})
    assert buffer.held_bytes == 10


def test_text_columns_take_utf8_bytes_and_refuse_what_arrow_would():
    schema = pa.schema([("topic", pa.string()), ("payload", pa.binary())])
    buffer = ColumnBuffer(schema, limit=8)
    buffer.add({"topic": "ünï".encode(), "payload": bytearray(b"\x00")})
    buffer.add({"topic": "t", "payload": memoryview(b"\xff")})
    buffer.add({"payload": "text"})
    batch = buffer.take_batch()
    assert batch.column("topic").to_pylist() == ["ünï", "t", None]
    assert batch.column("payload").to_pylist() == [b"\x00", b"\xff", b"text"]
    with pytest.raises(UnicodeDecodeError):
        buffer.add({"topic": b"\xff"})
    with pytest.raises(TypeError, match="topic"):
        ColumnBuffer(schema, limit=8).add({"topic": 5})


def test_a_key_is_its_column_by_value_whatever_str_object_carries_it():
    """A key built at run time (equal to a column's name, another object) and hundreds of
    keys the schema lacks, row after row, fill exactly the columns they name."""
    schema = pa.schema([("topic", pa.string()), ("ts", pa.int64())])
    buffer = ColumnBuffer(schema, limit=1200)
    for i in range(600):
        buffer.add({"".join(["to", "pic"]): f"t{i}", f"extra{i}": i, "".join(["t", "s"]): i})
        buffer.add({"topic": "same", "ts": -i})
    batch = buffer.take_batch()
    assert batch.column("topic").to_pylist() == [v for i in range(600) for v in (f"t{i}", "same")]
    assert batch.column("ts").to_pylist() == [v for i in range(600) for v in (i, -i)]


def test_a_str_that_has_no_utf8_form_is_refused():
    buffer = ColumnBuffer(pa.schema([("topic", pa.string())]), limit=8)
    with pytest.raises(UnicodeEncodeError):
        buffer.add({"topic": "lone \ud800 surrogate"})


def test_a_bytearray_changed_after_its_row_was_added_keeps_the_value_it_had():
    buffer = ColumnBuffer(pa.schema([("payload", pa.binary())]), limit=8)
    value = bytearray(b"abc")
    buffer.add({"payload": value})
    value[0:1] = b"X"
    buffer.add({"payload": value})
    assert buffer.take_batch().column("payload").to_pylist() == [b"abc", b"Xbc"]


def test_nested_values_of_another_shape_are_left_to_arrows_conversion():
    schema = pa.schema([("properties", pa.map_(pa.string(), pa.string()))])
    buffer = ColumnBuffer(schema, limit=8)
    buffer.add({"properties": {"k": "v"}})  # a dict, not (key, value) pairs
    buffer.add({"properties": [("k2", None)]})
    assert buffer.take_batch().column("properties").to_pylist() == [[("k", "v")], [("k2", None)]]
