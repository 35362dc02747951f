"""``pwcap show``: one line per frame for a person, like tshark's packet list.

Reads a capture directly (decoding on the fly, nothing written) or the ``frames`` table
of a dataset directory that ``pwcap decode`` wrote. Frames appear in decode order: the
order in which their last byte was captured. Each frame keeps its number in the full
listing and its time since the capture's first frame, whatever the filters, so a line
found in a filtered listing can be found again in the whole one. What the decoder could
not take at face value (gaps, resyncs, bad frames) is shown inline, as tshark's expert
info is: where the decoder met it when decoding a capture, by its time in a dataset.
"""

from __future__ import annotations

import argparse
import os
import sys
from collections import Counter
from collections.abc import Callable, Iterator
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from ..decode.options import (
    add_port_arguments,
    add_tls_arguments,
    add_tunnel_arguments,
    port_hints,
    positive,
)
from ..tables.printable import TEXT_LIMIT, printable

FrameCallback = Callable[[dict[str, Any]], None]
ANOMALY_COLUMNS = ["ts", "capture", "conn_id", "direction", "kind", "stream_offset", "detail"]

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
    "capture",
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
    parser.add_argument(
        "file", metavar="FILE", help="a capture (- for standard input), or a dataset directory"
    )
    parser.add_argument("--conn", type=int, action="append", metavar="ID", help="only this conn_id")
    parser.add_argument(
        "--command",
        dest="commands",  # `command` is the sub-command's name
        nargs="+",
        action="extend",
        metavar="CMD",
        help="only these commands (SEND, MESSAGE, ...; any case)",
    )
    parser.add_argument("--limit", type=positive, metavar="N", help="stop after N frames")
    parser.add_argument(
        "--absolute-time",
        action="store_true",
        help="print capture times (UTC) instead of seconds since the capture's first frame",
    )
    add_port_arguments(parser)
    add_tunnel_arguments(parser)
    add_tls_arguments(parser)


def run(args: argparse.Namespace) -> int:
    from ..tables.interrupts import exit_status, signals_as_interrupt

    path = Path(args.file)
    unknown = sorted({c.upper() for c in args.commands or ()} - command_names())
    if unknown:
        return _error(
            f"unknown command {', '.join(unknown)};"
            f" the commands are: {', '.join(sorted(command_names()))}"
        )
    keep = _Filter(args.conn, args.commands, args.limit)
    printer = _Printer(sys.stdout, args.absolute_time)

    def show(row: dict[str, Any]) -> None:
        number = printer.count(row)
        if keep(row):
            printer.print(number, row)
            if keep.full:
                raise _Enough

    def expert_info(row: dict[str, Any]) -> None:
        if keep.connection(row):
            printer.anomaly(row)

    try:
        with signals_as_interrupt():
            if path.is_dir():
                for is_frame, row in _dataset_rows(path):
                    (show if is_frame else expert_info)(row)
            elif path.is_file() or args.file == "-":
                options = {
                    "hints": port_hints(args),
                    "tls_keylogs": tuple(args.tls_keylog),
                    "vxlan_ports": tuple(args.vxlan_port),
                }
                _capture_frames(path, options, show, expert_info)
            else:
                return _error(f"{path}: no such file or directory")
    except _Enough:
        pass
    except BrokenPipeError:  # `pwcap show ... | head`: the reader has seen enough
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
    except _ShowError as error:
        return _error(str(error))
    except KeyboardInterrupt as interrupt:
        _error("interrupted")
        return exit_status(interrupt)
    if not printer.shown and not printer.anomalies:  # an anomaly says why there is no frame
        return _error(f"no frame matches {_asked(args)}" if _asked(args) else "no frame to show")
    return 0


def _asked(args: argparse.Namespace) -> str:
    """The filters given, as typed: what matched nothing."""
    asked = [f"--conn {conn}" for conn in args.conn or ()]
    if args.commands:
        asked.append(f"--command {' '.join(args.commands)}")
    return " ".join(asked)


class _ShowError(Exception):
    """Unusable input, said in one line."""


class _Filter:
    def __init__(
        self, conns: list[int] | None, commands: list[str] | None, limit: int | None
    ) -> None:
        self._conns = set(conns) if conns else None
        self._commands = {c.upper() for c in commands} if commands else None
        self._left = limit
        self.full = False

    def connection(self, row: dict[str, Any]) -> bool:
        return self._conns is None or row.get("conn_id") in self._conns

    def __call__(self, row: dict[str, Any]) -> bool:
        if not self.connection(row):
            return False
        if self._commands is not None and (row["command"] or "") not in self._commands:
            return False
        if self._left is not None:
            self._left -= 1
            self.full = self._left <= 0
        return True


class _Printer:
    """Frame numbers and times as in the whole listing of the capture: its n-th frame,
    and seconds since its first frame (or the capture time itself)."""

    def __init__(self, out: Any, absolute: bool) -> None:
        self._out = out
        self._absolute = absolute
        self._numbers: Counter[str] = Counter()  # capture -> frames seen
        self._first: dict[str, int] = {}  # capture -> time of its first frame
        self.shown = 0  # frames printed
        self.anomalies = 0  # anomaly lines printed

    def count(self, row: dict[str, Any]) -> int:
        """Every frame of the source passes here, shown or not: its number in the listing."""
        capture = row.get("capture") or ""
        self._numbers[capture] += 1
        self._first.setdefault(capture, row["ts"])
        return self._numbers[capture]

    def print(self, number: int, row: dict[str, Any]) -> None:
        self.shown += 1
        command = printable(row["command"]) if row["command"] else f"type {row['command_type']}"
        print(
            f"{number:>6} {self._time(row)} {row['conn_id']:>19}"
            f" {ARROWS.get(row['direction'], '?')} {command:<28} {_details(row)}".rstrip(),
            file=self._out,
        )

    def anomaly(self, row: dict[str, Any]) -> None:
        """An anomaly between the frames, marked like an expert-info line."""
        self.anomalies += 1
        if row.get("ts") is None:
            when = " " * 11
        else:
            self._first.setdefault(row.get("capture") or "", row["ts"])
            when = self._time(row)
        arrow = ARROWS.get(row.get("direction") or "", " ")
        where = f" at offset {row['stream_offset']}" if row.get("stream_offset") is not None else ""
        conn = row.get("conn_id")
        detail = printable(row.get("detail"), TEXT_LIMIT)
        print(
            f"{'!':>6} {when} {'' if conn is None else conn:>19} {arrow}"
            f" [{printable(row['kind'])}]{where} {detail}".rstrip(),
            file=self._out,
        )

    def _time(self, row: dict[str, Any]) -> str:
        ts = row["ts"]
        if self._absolute:
            return datetime.fromtimestamp(ts / 1e6, UTC).strftime("%Y-%m-%d %H:%M:%S.%f")
        return f"{(ts - self._first[row.get('capture') or '']) / 1e6:>11.6f}"


def _details(row: dict[str, Any]) -> str:
    """The ids and names of a frame, as printed: every value from the wire escaped."""
    parts = [
        f"{label}={printable(row[name])}" for name, label in ID_COLUMNS if row.get(name) is not None
    ]
    if row.get("ledger_id") is not None:
        parts.insert(0, f"id={row['ledger_id']}:{row.get('entry_id')}")
    if row.get("answers"):
        parts.append(f"answers={printable(row['answers'])}")
    if row.get("checksum_ok") is False:
        parts.append("BAD-CHECKSUM")
    if row.get("info"):
        parts.append(printable(row["info"], TEXT_LIMIT))
    return " ".join(parts)


def command_names() -> set[str]:
    """Every command name ``--command`` can match: Pulsar's and Kafka 0.7's."""
    from ..decode.kafka07.wire import ANSWERED, REQUEST_NAMES
    from ..decode.pulsar._pb.pulsar_api_pb2 import BaseCommand

    kafka = [*REQUEST_NAMES, *(f"{REQUEST_NAMES[t]}_RESPONSE" for t in ANSWERED)]
    return {*BaseCommand.Type.keys(), *kafka}


def _error(message: str) -> int:
    print(f"pwcap show: error: {printable(message, None)}", file=sys.stderr)
    return 1


# -- sources of frame rows -----------------------------------------------------------------


def _dataset_rows(directory: Path) -> Iterator[tuple[bool, dict[str, Any]]]:
    """(is a frame, row): the `frames` table with the `anomalies` rows merged in where
    they happened, as decoding the capture shows them."""
    frames = _table_rows(directory, "frames", COLUMNS)
    if frames is None:
        raise _ShowError(f"{directory}: not a pwcap dataset (no frames/*.parquet)")
    anomalies = _table_rows(directory, "anomalies", ANOMALY_COLUMNS) or iter(())
    pending = next(anomalies, None)
    finished: set[str] = set()  # captures whose frames are all listed
    current = None
    for frame in frames:
        if frame["capture"] != current:
            if current is not None:
                finished.add(current)
            current = frame["capture"]
        while pending is not None and _happened_before(pending, frame, finished):
            yield False, pending
            pending = next(anomalies, None)
        yield True, frame
    if pending is not None:
        yield False, pending
        yield from ((False, row) for row in anomalies)


def _happened_before(anomaly: dict[str, Any], frame: dict[str, Any], finished: set[str]) -> bool:
    if anomaly["capture"] in finished:
        return True
    ts = anomaly["ts"]
    return anomaly["capture"] == frame["capture"] and ts is not None and ts <= frame["ts"]


def _table_rows(directory: Path, table: str, columns: list[str]) -> Iterator[dict[str, Any]] | None:
    """A table's rows, one row group at a time (memory stays small on big datasets);
    None when the table has no files."""
    import pyarrow.parquet as pq

    files = sorted((directory / table).glob("*.parquet"))
    if not files:
        return None

    def rows() -> Iterator[dict[str, Any]]:
        for file in files:
            parquet = pq.ParquetFile(file)
            for group in range(parquet.metadata.num_row_groups):
                part = parquet.read_row_group(group, columns=columns)
                # Microseconds as plain ints: the printer does its own arithmetic.
                ts = part.column("ts").cast("int64")
                yield from part.set_column(part.schema.get_field_index("ts"), "ts", ts).to_pylist()

    return rows()


def _capture_frames(
    path: Path, options: dict[str, Any], on_frame: FrameCallback, on_anomaly: FrameCallback
) -> None:
    """Decode the capture on the fly (the decode driver, its rules for a capture cut off
    or no capture at all, ``options`` as ``DecodeOptions`` takes them), showing each frame
    as its decoder emits it."""
    from ..decode.api import DecodeOptions, RowSink
    from ..decode.capture_anomalies import capture_warnings
    from ..decode.driver import decode_capture
    from ..decode.inputs import STDIN, CaptureInput, InputError

    class _Rows:
        # Messages are not shown: their frames are.
        rows = RowSink.calling(on_frame, lambda row: None, on_anomaly)

        def connection(self, row: dict[str, Any]) -> None:
            """Nor connections: their frames are."""

    # Named as `pwcap decode` names it: the same connection ids.
    if str(path) == STDIN:
        capture = CaptureInput(STDIN, None, 0)
    else:
        capture = CaptureInput(path.name, path, path.stat().st_size)
    try:
        result = decode_capture(capture, _Rows(), DecodeOptions(**options))
    except InputError as error:
        raise _ShowError(str(error)) from None
    if result.cut_off is not None:
        print(f"pwcap show: warning: {printable(result.cut_off, None)}", file=sys.stderr)
    for line in capture_warnings(result.stats, str(path)):
        print(f"pwcap show: warning: {printable(line, None)}", file=sys.stderr)
