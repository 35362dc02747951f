"""Rows held column by column become the batch Arrow itself would make of the dicts.

The reference is Arrow's own conversion of the same dict rows to a struct array against
the table's schema (what the writer did before rows were held by column): for random
rows of every table, with any subset of columns set, edge values, booleans, nested
values and keys the schema lacks, both give the same record batch.
"""

from __future__ import annotations

import random
from collections import Counter

import pyarrow as pa
import pytest

from pwcap.tables.columns import ColumnBuffer
from pwcap.tables.nested import add_span
from pwcap.tables.schema import TABLES, arrow_schema, position

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
        return rng.choice([[("k", "v"), ("k2", "")], [], [("ключ", None)]])
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


@pytest.mark.parametrize("table", list(TABLES))
def test_a_batch_taken_stays_as_it_was_while_the_buffer_fills_again(table):
    rng = random.Random(f"kept-{table}")
    schema = arrow_schema(table)
    buffer = ColumnBuffer(schema, limit=40)
    taken = []
    for _ in range(4):
        rows = random_rows(rng, schema, 40)
        for row in rows:
            buffer.add(row)
        taken.append((buffer.take_batch(), rows))
    for batch, rows in taken:
        expected = pa.RecordBatch.from_struct_array(pa.array(rows, type=pa.struct(list(schema))))
        assert batch.equals(expected)


def test_a_row_being_built_when_the_batch_is_taken_leaves_nothing_behind():
    schema = pa.schema([("n", pa.int64()), ("s", pa.string()), ("b", pa.bool_())])
    buffer = ColumnBuffer(schema, limit=4)
    buffer.add({"n": 1, "s": "one", "b": True})
    buffer.set(0, 2)
    buffer.set(1, "two")
    buffer.set(2, True)  # a row begun, never ended
    assert buffer.take_batch().to_pylist() == [{"n": 1, "s": "one", "b": True}]
    buffer.add({})
    assert buffer.take_batch().to_pylist() == [{"n": None, "s": None, "b": None}]


def test_the_tallied_column_counts_the_rows_that_end_with_each_value():
    schema = pa.schema([("command", pa.string()), ("n", pa.int64())])
    source = ColumnBuffer(schema, limit=8)
    buffer = ColumnBuffer(schema, limit=8)
    buffer.tally(0)
    rng = random.Random(7)
    names = [f"C{i}" for i in range(40)]  # more distinct values than the C counters hold
    ended = []
    for _ in range(500):
        what = rng.random()
        if what < 0.1:  # a row that is discarded counts for nothing
            buffer.set(0, rng.choice(names))
            buffer.discard_row()
            continue
        value = rng.choice([*names[: rng.choice([3, 40])], None])
        if what < 0.2:  # copied from another buffer's row, not set as a str
            source.set(0, value)
            if rng.random() < 0.5:
                buffer.set(0, "overwritten by the copy")
            buffer.copy(source, 0, 0)
            source.discard_row()
        else:
            if rng.random() < 0.2:
                buffer.set(0, "replaced")  # a value set again: the last one counts
            buffer.set(0, value)
        ended.append(value)
        if buffer.end_row():
            buffer.take_batch()
    assert buffer.tallied() == Counter(ended)


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


def test_a_map_may_come_as_a_dict_and_hold_null_values():
    schema = pa.schema([("properties", pa.map_(pa.string(), pa.string()))])
    buffer = ColumnBuffer(schema, limit=8)
    buffer.add({"properties": {"k": "v"}})
    buffer.add({"properties": [("k2", None)]})
    assert buffer.take_batch().column("properties").to_pylist() == [[("k", "v")], [("k2", None)]]


def frames_builder(limit: int = 8) -> ColumnBuffer:
    return ColumnBuffer(arrow_schema("frames"), limit)


def test_a_row_built_column_by_column_is_the_row_added_whole():
    rng = random.Random(5)
    schema = arrow_schema("frames")
    built, added = frames_builder(50), frames_builder(50)
    for row in random_rows(rng, schema, 50):
        for name, value in row.items():
            if name in schema.names:  # `add` ignores the others
                built.set(position("frames", name), value)
        built.end_row()
        added.add(row)
    assert built.take_batch().equals(added.take_batch())


def test_a_column_set_again_holds_the_last_value_and_none_makes_it_null():
    rows = frames_builder()
    topic, permits, ids = (position("frames", c) for c in ("topic", "permits", "message_ids"))
    rows.set_text(topic, "first")
    rows.set_text(topic, "second")
    rows.set_int(permits, 5)
    rows.set(permits, None)
    rows.set(ids, [{"ledger_id": 1, "entry_id": 2}])
    assert (rows.get(topic), rows.has(permits), rows.get(ids)) == ("second", False, rows.get(ids))
    rows.end_row()
    batch = rows.take_batch()
    assert batch.column("topic").to_pylist() == ["second"]
    assert batch.column("permits").to_pylist() == [None]
    assert batch.column("message_ids").to_pylist()[0][0]["entry_id"] == 2


def test_a_discarded_row_leaves_nothing_behind():
    rows = frames_builder()
    topic, ts = position("frames", "topic"), position("frames", "ts")
    rows.set_text(topic, "kept")
    rows.set_int(ts, 1)
    rows.end_row()
    rows.set_text(topic, "dropped")
    rows.set_int(ts, 2)
    rows.discard_row()
    rows.set_int(ts, 3)
    rows.end_row()
    batch = rows.take_batch()
    assert batch.column("topic").to_pylist() == ["kept", None]
    assert rows.held_bytes == 0


def test_a_row_taken_out_reads_back_every_column_and_is_forgotten():
    rows = frames_builder()
    rows.set_int(position("frames", "ts"), 7)
    rows.set_int(position("frames", "checksum_ok"), True)
    rows.set_text(position("frames", "command"), "SEND")
    taken = rows.take_row()
    assert taken["ts"] == 7 and taken["checksum_ok"] is True and taken["command"] == "SEND"
    assert set(taken) == set(arrow_schema("frames").names) and taken["topic"] is None
    assert rows.take_row()["command"] is None


def test_a_column_copied_from_another_builder_keeps_its_value_and_nulls():
    frames, messages = frames_builder(), ColumnBuffer(arrow_schema("messages"), 8)
    frames.set_text(position("frames", "topic"), "t")
    for column in ("topic", "consumer_id"):
        messages.copy(frames, position("frames", column), position("messages", column))
    messages.end_row()
    batch = messages.take_batch()
    assert batch.column("topic").to_pylist() == ["t"]
    assert batch.column("consumer_id").to_pylist() == [None]


def test_a_typed_setter_refuses_a_column_kept_another_way():
    rows = frames_builder()
    with pytest.raises(TypeError, match="topic"):
        rows.set_int(position("frames", "topic"), 1)
    with pytest.raises(TypeError, match="ts"):
        rows.set_text(position("frames", "ts"), "1")


def test_the_row_that_fills_a_batch_hands_it_to_the_owner():
    batches = []
    rows = ColumnBuffer(
        pa.schema([("n", pa.int64())]), 2, on_full=lambda: batches.append(rows.take_batch())
    )
    for n in range(5):
        rows.set_int(0, n)
        rows.end_row()
    assert [b.column("n").to_pylist() for b in batches] == [[0, 1], [2, 3]]
    assert len(rows) == 1


TEXT_MAP = pa.schema([("properties", pa.map_(pa.string(), pa.string())), ("n", pa.int64())])


def spans_of(data: bytes, *pairs: tuple[bytes, bytes]) -> bytearray:
    """The spans of each (key, value) pair, found in ``data``."""
    spans = bytearray()
    for key, value in pairs:
        key_start, value_start = data.index(key), data.index(value)
        add_span(spans, key_start, key_start + len(key), value_start, value_start + len(value))
    return spans


def test_map_entries_are_copied_from_the_bytes_their_spans_point_at():
    """set_pairs copies each entry's key and value from where a reader found them; a row
    that sets no map is null, an empty span list is an empty map, a discarded row's
    entries and their bytes go."""
    data = "..k1=a..ключ=naïve..".encode()
    spans = spans_of(data, (b"k1", b"a"), ("ключ".encode(), "naïve".encode()))
    rows = ColumnBuffer(TEXT_MAP, limit=8)
    rows.set_pairs(0, data, spans)
    assert rows.get(0) == [("k1", "a"), ("ключ", "naïve")]
    rows.end_row()
    rows.set_int(1, 5)
    rows.end_row()
    held = rows.held_bytes
    rows.set_pairs(0, data, spans)
    assert rows.held_bytes == held + len("k1aключnaïve".encode())
    rows.discard_row()
    assert rows.held_bytes == held
    rows.set_pairs(0, data, bytearray())
    rows.end_row()
    rows.set(0, {"x": None})
    rows.end_row()
    column = rows.take_batch().column("properties").to_pylist()
    assert column == [[("k1", "a"), ("ключ", "naïve")], None, [], [("x", None)]]


def test_a_map_of_another_shape_or_beyond_its_bytes_is_refused_whole():
    rows = ColumnBuffer(TEXT_MAP, limit=8)
    for bad, error in (([("a", "b"), ("c",)], ValueError), ([("a", "b"), (None, "v")], TypeError)):
        with pytest.raises(error):
            rows.set(0, bad)
        assert not rows.has(0) and rows.held_bytes == 0
    data = b"key=value"
    spans = spans_of(data, (b"key", b"value"))
    add_span(spans, 0, 3, 4, 99)  # a value past the end of the data
    with pytest.raises(IndexError):
        rows.set_pairs(0, data, spans)
    assert not rows.has(0) and rows.held_bytes == 0
    with pytest.raises(ValueError, match="whole spans"):
        rows.set_pairs(0, data, bytearray(5))
    with pytest.raises(OverflowError):
        add_span(bytearray(), 0, 1, 2, 1 << 31)


def test_maps_of_many_batches_read_back_as_they_were_set():
    """The storage kept from one batch to the next holds nothing of the last one."""
    rng = random.Random(3)
    rows = ColumnBuffer(TEXT_MAP, limit=4)
    expected, got = [], []
    for i in range(41):
        pairs = [(f"k{i}-{j}" * rng.randint(0, 3), "v" * rng.randint(0, 40)) for j in range(i % 4)]
        if i % 5:
            rows.set(0, pairs)
        expected.append(pairs if i % 5 else None)
        if rows.end_row():
            got += rows.take_batch().column("properties").to_pylist()
    got += rows.take_batch().column("properties").to_pylist()
    assert got == expected


ID_LIST = pa.schema(
    [
        (
            "ids",
            pa.list_(
                pa.struct([("ledger", pa.int64()), ("entry", pa.int64()), ("part", pa.int32())])
            ),
        ),
        ("n", pa.int64()),
    ]
)


def test_struct_elements_are_added_one_by_one_with_their_null_fields():
    """add_struct: a row's list begins with its first element; bit n of ``nulls`` makes
    field n null; a row that adds none is null; a discarded row's elements go."""
    rows = ColumnBuffer(ID_LIST, limit=8)
    rows.add_struct(0, 1, 2, 3, 0, 0)
    rows.add_struct(0, -1, (1 << 63) - 1, 0, 99, 4)  # the fourth value: past its fields
    assert rows.get(0) == [
        {"ledger": 1, "entry": 2, "part": 3},
        {"ledger": -1, "entry": (1 << 63) - 1, "part": None},
    ]
    rows.end_row()
    rows.set_int(1, 5)
    rows.end_row()
    rows.add_struct(0, 7, 7, 7, 0, 0)
    rows.discard_row()
    rows.set(0, [None, {"entry": 4}])
    rows.end_row()
    column = rows.take_batch().column("ids").to_pylist()
    assert column == [
        [
            {"ledger": 1, "entry": 2, "part": 3},
            {"ledger": -1, "entry": (1 << 63) - 1, "part": None},
        ],
        None,
        [None, {"ledger": None, "entry": 4, "part": None}],
    ]


def test_struct_values_out_of_their_fields_range_or_shape_are_refused():
    rows = ColumnBuffer(ID_LIST, limit=8)
    with pytest.raises(TypeError, match="n: not a column of that type"):
        rows.add_struct(1, 1, 2, 3, 4, 0)
    with pytest.raises(TypeError, match="struct"):
        rows.set(0, [{"ledger": 1}, ("a", "tuple")])
    assert not rows.has(0)
    rows.add_struct(0, 1, 2, 1 << 40, 0, 0)  # too large for the int32 field
    rows.end_row()
    with pytest.raises(pa.ArrowInvalid):
        rows.take_batch()


def test_structs_of_many_batches_read_back_as_they_were_added():
    """The storage kept from one batch to the next holds nothing of the last one."""
    rng = random.Random(4)
    rows = ColumnBuffer(ID_LIST, limit=4)
    expected, got = [], []
    for i in range(41):
        elements = []
        for _ in range(i % 4):
            part = rng.choice([None, 0, -5, 2**31 - 1])
            element = {"ledger": rng.randint(-(2**63), 2**63 - 1), "entry": i, "part": part}
            rows.add_struct(0, element["ledger"], i, part or 0, 0, 4 if part is None else 0)
            elements.append(element)
        expected.append(elements or None)
        if rows.end_row():
            got += rows.take_batch().column("ids").to_pylist()
    got += rows.take_batch().column("ids").to_pylist()
    assert got == expected


def test_a_nested_column_of_another_shape_is_refused():
    for kind in (pa.list_(pa.string()), pa.map_(pa.string(), pa.int64())):
        with pytest.raises(TypeError, match="no storage for a nested column"):
            ColumnBuffer(pa.schema([("nested", kind)]), limit=8)
