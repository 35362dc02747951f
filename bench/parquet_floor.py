"""The Parquet floor of a decode: what writing its tables costs with nothing decoded.

Any run that turns a capture into pwcap's dataset pays at least for an interpreter with
pyarrow loaded and for Parquet-encoding every row it writes. This program pays exactly
that and nothing else: it maps a decode's tables, kept beforehand as uncompressed Arrow
IPC files (:func:`keep_as_arrow`, not timed), and writes them again in row groups of the
decode's size with each table's own settings (``tables.dataset.parquet_settings``),
NumPy marked absent and the C library's allocator chosen as ``pwcap decode`` does. Its
CPU time beside pwcap's says how much of a decode is the output itself, and whether a
target leaves room for any decoding at all.

    python bench/parquet_floor.py ARROW_DIR OUT_DIR
"""

from __future__ import annotations

import os
import sys
from pathlib import Path

TABLE_FILE = "{}.arrow"


def keep_as_arrow(dataset: Path, arrow_dir: Path) -> None:
    """Each table of the written ``dataset`` as one uncompressed Arrow IPC file."""
    import pyarrow as pa
    import pyarrow.parquet as pq

    arrow_dir.mkdir(parents=True, exist_ok=True)
    for table_dir in sorted(p for p in dataset.iterdir() if p.is_dir()):
        table = pq.read_table(sorted(table_dir.glob("*.parquet")))
        path = str(arrow_dir / TABLE_FILE.format(table_dir.name))
        with pa.OSFile(path, "wb") as sink, pa.ipc.new_file(sink, table.schema) as writer:
            writer.write_table(table)


def write_again(arrow_dir: Path, out: Path) -> int:
    """Write every table kept in ``arrow_dir`` to ``out/TABLE.parquet``; the rows written."""
    import pyarrow as pa
    import pyarrow.parquet as pq

    from pwcap.tables.dataset import ROW_GROUP_ROWS, parquet_settings

    out.mkdir(parents=True, exist_ok=True)
    rows = 0
    for kept in sorted(arrow_dir.glob(TABLE_FILE.format("*"))):
        table = pa.ipc.open_file(pa.memory_map(str(kept))).read_all()
        settings = parquet_settings(table.schema)
        with pq.ParquetWriter(str(out / f"{kept.stem}.parquet"), table.schema, **settings) as w:
            w.write_table(table, row_group_size=ROW_GROUP_ROWS)
        rows += len(table)
    return rows


if __name__ == "__main__":
    sys.modules.setdefault("numpy", None)  # type: ignore[arg-type]  # as `pwcap decode`
    os.environ.setdefault("ARROW_DEFAULT_MEMORY_POOL", "system")
    write_again(Path(sys.argv[1]), Path(sys.argv[2]))
