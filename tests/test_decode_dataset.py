"""The dataset writer: row groups streamed out, the schema's columns, atomic replacement."""

from __future__ import annotations

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from pwcap.tables import dataset
from pwcap.tables.dataset import DatasetError, DatasetWriter
from pwcap.tables.schema import TABLES, arrow_schema

T0 = 1_700_000_000_000_000


def frame_row(i: int) -> dict:
    return {
        "ts": T0 + i,
        "capture": "a.pcap",
        "conn_id": 1,
        "direction": "c2b",
        "protocol": "pulsar",
        "command": "SEND" if i % 3 else "FLOW",
        "sequence_id": i,
    }


def _row_groups(path):
    metadata = pq.ParquetFile(path).metadata
    return [metadata.row_group(i) for i in range(metadata.num_row_groups)]


def read(out, table):
    return pq.read_table(out / table)


def test_rows_are_written_in_row_groups_in_the_order_given(tmp_path):
    out = tmp_path / "ds"
    with DatasetWriter(out, batch_rows=10, row_group_rows=20, file_rows=40) as writer:
        for i in range(137):
            writer.rows.frames.add(frame_row(i))
            assert len(writer.tables["frames"].buffer) < 10  # converted at the row that fills it
    files = sorted((out / "frames").iterdir())
    assert [f.name for f in files] == [f"part-{i:05d}.parquet" for i in range(4)]
    groups = [[g.num_rows for g in _row_groups(f)] for f in files]
    assert groups == [[20, 20], [20, 20], [20, 20], [17]]
    assert read(out, "frames").column("sequence_id").to_pylist() == list(range(137))


def test_every_table_has_exactly_the_schema_columns_even_when_empty(tmp_path):
    out = tmp_path / "ds"
    with DatasetWriter(out) as writer:
        writer.rows.frames.add(frame_row(0))
    for table in TABLES:
        assert pq.read_schema(next((out / table).iterdir())) == arrow_schema(table)
    assert read(out, "messages").num_rows == 0


def test_offsets_and_times_are_written_without_a_dictionary_and_the_rest_with_one(tmp_path):
    out = tmp_path / "ds"
    with DatasetWriter(out) as writer:
        for i in range(10):
            writer.rows.frames.add(
                {
                    **frame_row(i),
                    "stream_offset": 100 * i,
                    "request_ts": 1_700_000_000_000_000 + 7 * i,
                    "message_ids": [{"entry_id": i}],
                }
            )
    group = _row_groups(next((out / "frames").iterdir()))[0]
    columns = {group.column(i).path_in_schema: group.column(i) for i in range(group.num_columns)}
    for undictionaried in ("stream_offset", "ts", "ts_first", "request_ts"):
        assert not columns[undictionaried].has_dictionary_page
    for capture_time in ("ts", "ts_first", "request_ts"):  # written as deltas
        assert "DELTA_BINARY_PACKED" in columns[capture_time].encodings
    assert columns["command"].has_dictionary_page and columns["conn_id"].has_dictionary_page
    assert columns["message_ids.list.element.entry_id"].has_dictionary_page
    frames = read(out, "frames")
    assert frames.column("stream_offset").to_pylist() == [100 * i for i in range(10)]
    request_ts = frames.column("request_ts").cast(pa.int64()).to_pylist()
    assert request_ts == [1_700_000_000_000_000 + 7 * i for i in range(10)]


def test_row_group_bounds_are_written_for_times_ids_and_the_capture_not_other_text(tmp_path):
    out = tmp_path / "ds"
    with DatasetWriter(out) as writer:
        for i in range(10):
            writer.rows.frames.add({**frame_row(i), "topic": f"persistent://t/n/{i}"})
    group = _row_groups(next((out / "frames").iterdir()))[0]
    columns = {group.column(i).path_in_schema: group.column(i) for i in range(group.num_columns)}
    bounds = columns["ts"].statistics
    assert columns["ts"].is_stats_set and bounds.has_min_max
    assert columns["sequence_id"].statistics.min == 0 and columns["sequence_id"].statistics.max == 9
    assert columns["capture"].statistics.min == columns["capture"].statistics.max == "a.pcap"
    assert not columns["topic"].is_stats_set and not columns["command"].is_stats_set


def test_a_column_missing_from_a_row_is_null(tmp_path):
    out = tmp_path / "ds"
    with DatasetWriter(out) as writer:
        writer.rows.frames.add(frame_row(0))
    row = read(out, "frames").to_pylist()[0]
    assert row["sequence_id"] == 0
    assert row["producer_name"] is None and row["message_ids"] is None


def test_message_properties_are_a_map(tmp_path):
    out = tmp_path / "ds"
    with DatasetWriter(out) as writer:
        writer.rows.messages.add({"ts": T0, "conn_id": 1, "properties": {"k": "v", "a": "b"}})
    assert dict(read(out, "messages").column("properties").to_pylist()[0]) == {
        "k": "v",
        "a": "b",
    }


def test_the_summary_counts_frames_by_command_and_anomalies_by_kind(tmp_path):
    with DatasetWriter(tmp_path / "ds", batch_rows=4) as writer:
        for i in range(30):
            writer.rows.frames.add(frame_row(i))
        writer.rows.anomalies.add({"kind": "gap"})
    assert writer.tables["frames"].counted == {"FLOW": 10, "SEND": 20}
    assert writer.tables["anomalies"].counted == {"gap": 1}
    assert writer.row_counts() == {"frames": 30, "messages": 0, "connections": 0, "anomalies": 1}


def test_an_interrupted_run_leaves_nothing_behind(tmp_path):
    out = tmp_path / "ds"
    with pytest.raises(KeyboardInterrupt), DatasetWriter(out, batch_rows=2) as writer:
        for i in range(10):
            writer.rows.frames.add(frame_row(i))
        raise KeyboardInterrupt
    assert list(tmp_path.iterdir()) == []


def test_an_existing_output_is_kept_without_overwrite(tmp_path):
    out = tmp_path / "ds"
    with DatasetWriter(out) as writer:
        writer.rows.frames.add(frame_row(0))
    with pytest.raises(DatasetError, match="already exists"):
        DatasetWriter(out)
    assert read(out, "frames").num_rows == 1
    assert sorted(p.name for p in tmp_path.iterdir()) == ["ds"]


def test_overwrite_replaces_an_earlier_dataset(tmp_path):
    out = tmp_path / "ds"
    with DatasetWriter(out) as writer:
        writer.rows.frames.add(frame_row(0))
    with DatasetWriter(out, overwrite=True) as writer:
        writer.rows.frames.add(frame_row(1))
        writer.rows.frames.add(frame_row(2))
    assert read(out, "frames").column("sequence_id").to_pylist() == [1, 2]
    assert sorted(p.name for p in tmp_path.iterdir()) == ["ds"]


def test_overwrite_never_replaces_something_that_is_not_a_dataset(tmp_path):
    out = tmp_path / "notes"
    out.mkdir()
    (out / "thesis.tex").write_text("precious")
    with pytest.raises(DatasetError, match="does not look like a pwcap dataset"):
        DatasetWriter(out, overwrite=True)
    assert (out / "thesis.tex").read_text() == "precious"
    plain_file = tmp_path / "file"
    plain_file.write_text("x")
    with pytest.raises(DatasetError, match="not a dataset directory"):
        DatasetWriter(plain_file, overwrite=True)


def test_a_failed_overwrite_keeps_the_earlier_dataset(tmp_path):
    out = tmp_path / "ds"
    with DatasetWriter(out) as writer:
        writer.rows.frames.add(frame_row(0))
    with pytest.raises(RuntimeError), DatasetWriter(out, overwrite=True) as writer:
        writer.rows.frames.add(frame_row(5))
        raise RuntimeError("decoding failed")
    assert read(out, "frames").column("sequence_id").to_pylist() == [0]


def test_payload_bytes_held_in_memory_are_bounded(tmp_path, monkeypatch):
    monkeypatch.setattr(dataset, "BATCH_BYTES", 1 << 20)
    monkeypatch.setattr(dataset, "ROW_GROUP_BYTES", 2 << 20)
    payload = b"p" * 300_000
    out = tmp_path / "ds"
    with DatasetWriter(out) as writer:
        for i in range(20):
            writer.rows.messages.add({"ts": T0 + i, "conn_id": 1, "payload": payload})
            held = writer.tables["messages"].buffer.held_bytes
            assert held < (1 << 20) + len(payload)
    (part,) = (out / "messages").iterdir()
    groups = _row_groups(part)
    assert len(groups) > 1 and sum(g.num_rows for g in groups) == 20
    assert all(g.num_rows * len(payload) <= (2 << 20) + (1 << 20) for g in groups)


def test_an_interruption_while_parts_are_open_stays_an_interruption_and_leaves_nothing(
    tmp_path, monkeypatch
):
    """Ctrl-C while row groups were being written: closing a half-written part raised
    OSError, which took the interruption's place, and OUT.tmp-* stayed behind."""
    close = pq.ParquetWriter.close
    failed: list[bool] = []

    def close_failing_once(self) -> None:
        close(self)
        if not failed:
            failed.append(True)
            raise OSError(5, "Input/output error")

    with (
        pytest.raises(KeyboardInterrupt),
        DatasetWriter(tmp_path / "ds", batch_rows=10, row_group_rows=20) as writer,
    ):
        for i in range(45):
            writer.rows.frames.add(frame_row(i))
        monkeypatch.setattr(pq.ParquetWriter, "close", close_failing_once)
        raise KeyboardInterrupt
    assert failed and list(tmp_path.iterdir()) == []
