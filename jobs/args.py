"""The command line every analytics job shares, importable without pyspark so that
``pwcap --help`` stays fast and works where Spark is not installed."""

from __future__ import annotations

import argparse
import re

_UNITS = {"ms": "milliseconds", "s": "seconds", "m": "minutes", "h": "hours", "d": "days"}


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "datasets", nargs="+", metavar="DATASET", help="decoded dataset folder(s) or glob(s)"
    )
    parser.add_argument("-o", "--output", required=True, help="folder for the result tables")
    add_overwrite(parser)
    parser.add_argument(
        "--window",
        default="1m",
        type=spark_interval,
        help="time bucket of the summaries: 30s, 1m, 1h... (default 1m)",
    )
    parser.add_argument("--verbose", action="store_true", help="keep Spark's INFO logging")


def add_overwrite(parser: argparse.ArgumentParser) -> None:
    """The rule of every command that writes (``pwcap decode`` has it too): an output
    that exists is refused unless asked for."""
    parser.add_argument(
        "--overwrite",
        action="store_true",
        help="write into OUT even if it exists, replacing the tables of the same name",
    )


def spark_interval(text: str) -> str:
    """``1m`` -> ``1 minutes`` (Spark's interval syntax); Spark's own syntax passes through."""
    match = re.fullmatch(r"\s*(\d+)\s*(ms|s|m|h|d)\s*", text)
    if match:
        return f"{match[1]} {_UNITS[match[2]]}"
    if re.fullmatch(r"\s*\d+\s+[a-z]+\s*", text):
        return text.strip()
    raise argparse.ArgumentTypeError(f"not a time window: {text!r} (try 30s, 1m, 1h)")
