"""The benchmarks' Parquet floor writes what a decode writes, the way the decode writes it.

The floor is the least a run producing pwcap's dataset can cost (bench/parquet_floor.py):
it only means that if its files hold the decode's rows, compressed and encoded as the
decode's own part files are. A floor writing fewer columns, or without a dictionary where
the decode keeps one, would be a cheaper job than the one it bounds.
"""

from __future__ import annotations

import subprocess
import sys

import pyarrow.parquet as pq

from pwcap.decode.driver import decode_captures
from pwcap.tables.schema import TABLES
from tests.bench_scripts import load_bench
from tests.conftest import SAMPLES


def _chunk_layout(path) -> list[tuple[str, str, tuple[str, ...], bool]]:
    """Per column of the first row group: its path, codec, encodings, statistics or not."""
    group = pq.ParquetFile(path).metadata.row_group(0)
    columns = (group.column(i) for i in range(group.num_columns))
    return [
        (c.path_in_schema, c.compression, tuple(sorted(c.encodings)), c.is_stats_set)
        for c in columns
    ]


def test_the_floor_writes_the_decodes_tables_with_the_decodes_settings(tmp_path):
    floor = load_bench("parquet_floor")
    dataset = tmp_path / "decoded"
    decode_captures([SAMPLES / "pulsar_batching_compression.pcap"], dataset)
    floor.keep_as_arrow(dataset, tmp_path / "arrow")

    script = floor.__file__
    subprocess.run([sys.executable, script, tmp_path / "arrow", tmp_path / "again"], check=True)

    for table in TABLES:
        decoded = pq.read_table(dataset / table)
        again = pq.read_table(tmp_path / "again" / f"{table}.parquet")
        assert again.equals(decoded), table
        if decoded.num_rows:
            (part,) = sorted((dataset / table).glob("*.parquet"))
            assert _chunk_layout(tmp_path / "again" / f"{table}.parquet") == _chunk_layout(part)
