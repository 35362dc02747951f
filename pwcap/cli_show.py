"""``pwcap show``: one line per frame for a person, like tshark's packet list.

Reads a capture directly (decoding on the fly, nothing written) or the ``frames`` table
of a dataset directory that ``pwcap decode`` wrote. Frames appear in decode order: the
order in which their last byte was captured.
"""

from __future__ import annotations

import argparse
import os
import sys
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

FrameCallback = Callable[[dict[str, Any]], None]

ARROWS = {"c2b": "->", "b2c": "<-"}
# (column, label) of the ids shown after the command, in this order.
ID_COLUMNS = (
    ("request_id", "req"),
    ("producer_id", "prod"),
    ("consumer_id", "cons"),
    ("sequence_id", "seq"),
    ("permits", "permits"),
    ("offset", "offset"),
    ("num_messages", "msgs"),
    ("redelivery_count", "redelivered"),
    ("error_code", "error"),
    ("topic", "topic"),
    ("subscription", "sub"),
    ("producer_name", "producer"),
    ("consumer_name", "consumer"),
)
COLUMNS = [
    "ts",
    "conn_id",
    "direction",
    "command",
    "command_type",
    "frame_size",
    "ledger_id",
    "entry_id",
    "answers",
    "info",
    "checksum_ok",
    *(name for name, _ in ID_COLUMNS),
]


class _Enough(BaseException):
    """The line limit is reached: stop reading the capture.

    A BaseException, like KeyboardInterrupt, so that no decoder's guard against damaged
    frames (``except Exception``) mistakes it for one.
    """


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("file", metavar="FILE", help="a capture, or a dataset directory")
    parser.add_argument("--conn", type=int, action="append", metavar="ID", help="only this conn_id")
    parser.add_argument(
        "--command",
        dest="commands",  # `command` is the sub-command's name
        nargs="+",
        action="extend",
        metavar="CMD",
        help="only these commands (SEND, MESSAGE, ...; any case)",
    )
    parser.add_argument("--limit", type=int, metavar="N", help="stop after N frames")
    parser.add_argument("--pulsar-port", type=int, action="append", default=[], metavar="P")
    parser.add_argument("--kafka07-port", type=int, action="append", default=[], metavar="P")


def run(args: argparse.Namespace) -> int:
    path = Path(args.file)
    keep = _Filter(args.conn, args.commands, args.limit)
    printer = _Printer(sys.stdout)

    def show(row: dict[str, Any]) -> None:
        if keep(row):
            printer.print(row)
            if keep.full:
                raise _Enough

    try:
        if keep.full:
            return 0
        if path.is_dir():
            for row in _dataset_frames(path):
                show(row)
        elif path.is_file():
            hints = {"pulsar": args.pulsar_port, "kafka07": args.kafka07_port}
            _capture_frames(path, hints, show)
        else:
            return _error(f"{path}: no such file or directory")
    except _Enough:
        pass
    except BrokenPipeError:  # `pwcap show ... | head`: the reader has seen enough
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
    except _ShowError as error:
        return _error(str(error))
    return 0


class _ShowError(Exception):
    """Unusable input, said in one line."""


class _Filter:
    def __init__(
        self, conns: list[int] | None, commands: list[str] | None, limit: int | None
    ) -> None:
        self._conns = set(conns) if conns else None
        self._commands = {c.upper() for c in commands} if commands else None
        self._left = limit
        self.full = limit is not None and limit <= 0

    def __call__(self, row: dict[str, Any]) -> bool:
        if self._conns is not None and row["conn_id"] not in self._conns:
            return False
        if self._commands is not None and (row["command"] or "") not in self._commands:
            return False
        if self._left is not None:
            self._left -= 1
            self.full = self._left <= 0
        return True


class _Printer:
    """Numbers the lines and shows time relative to the first frame, as tshark does."""

    def __init__(self, out: Any) -> None:
        self._out = out
        self._number = 0
        self._t0: int | None = None

    def print(self, row: dict[str, Any]) -> None:
        self._number += 1
        ts = row["ts"]
        if self._t0 is None:
            self._t0 = ts
        command = row["command"] or f"type {row['command_type']}"
        print(
            f"{self._number:>6} {(ts - self._t0) / 1e6:>11.6f} {row['conn_id']:>19}"
            f" {ARROWS.get(row['direction'], '?')} {command:<28} {_details(row)}".rstrip(),
            file=self._out,
        )


def _details(row: dict[str, Any]) -> str:
    parts = [f"{label}={row[name]}" for name, label in ID_COLUMNS if row.get(name) is not None]
    if row.get("ledger_id") is not None:
        parts.insert(0, f"id={row['ledger_id']}:{row.get('entry_id')}")
    if row.get("answers"):
        parts.append(f"answers={row['answers']}")
    if row.get("checksum_ok") is False:
        parts.append("BAD-CHECKSUM")
    if row.get("info"):
        parts.append(row["info"])
    return " ".join(parts)


def _error(message: str) -> int:
    print(f"pwcap show: error: {message}", file=sys.stderr)
    return 1


# -- sources of frame rows -----------------------------------------------------------------


def _dataset_frames(directory: Path) -> Iterator[dict[str, Any]]:
    """The `frames` table, one row group at a time: memory stays small on big datasets."""
    import pyarrow.parquet as pq

    files = sorted((directory / "frames").glob("*.parquet"))
    if not files:
        raise _ShowError(f"{directory}: not a pwcap dataset (no frames/*.parquet)")
    for file in files:
        parquet = pq.ParquetFile(file)
        for group in range(parquet.metadata.num_row_groups):
            table = parquet.read_row_group(group, columns=COLUMNS)
            # Microseconds as plain ints: the printer does its own arithmetic.
            ts = table.column("ts").cast("int64")
            table = table.set_column(table.schema.get_field_index("ts"), "ts", ts)
            yield from table.to_pylist()


def _capture_frames(path: Path, hints: dict[str, list[int]], show: FrameCallback) -> None:
    """Decode the capture on the fly, showing each frame as its decoder emits it."""
    from pwcap.capture import CaptureError, read_streams
    from pwcap.decode.api import DecodeOptions
    from pwcap.decode.registry import Registry
    from pwcap.decode.run import Pipeline

    class _Rows:
        frame = staticmethod(show)

        def message(self, row: dict[str, Any]) -> None:
            """Messages are not shown: their frames are."""

        def anomaly(self, row: dict[str, Any]) -> None:
            """Anomalies are in the dataset (`pwcap decode`), not in the packet list."""

    registry = Registry(hints)
    pipeline = Pipeline(_Rows(), lambda row: None, registry, DecodeOptions(capture=path.name))
    try:
        read_streams(str(path), pipeline, server_ports=registry.server_ports)
    except CaptureError as error:
        if pipeline.events == 0:
            raise _ShowError(str(error)) from None
        print(f"pwcap show: warning: {error}", file=sys.stderr)
    pipeline.close_all("end_of_capture")
