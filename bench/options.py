"""Command-line options the decode benchmarks share."""

from __future__ import annotations

import argparse
from pathlib import Path

DATA = Path(__file__).resolve().parent.parent / "bench_data"  # git ignores it


def parse_size(text: str) -> int:
    """``300M``, ``1G``, ``2000000``: a size in bytes."""
    units = {"K": 1e3, "M": 1e6, "G": 1e9}
    scale = units.get(text[-1:].upper())
    return int(float(text[:-1]) * scale) if scale else int(text)


def add_options(parser: argparse.ArgumentParser, size: str, runs: int) -> None:
    parser.add_argument("--size", type=parse_size, default=parse_size(size), help="e.g. 50M, 1G")
    parser.add_argument("--runs", type=int, default=runs, help="runs of each contender")
    parser.add_argument(
        "--data",
        type=Path,
        default=DATA,
        help="where the generated captures are kept between runs, and pwcap's output",
    )
    parser.add_argument("--profile", action="store_true", help="where pwcap's time goes")
    add_engine_option(parser)


def add_engine_option(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--allow-interpreted",
        action="store_true",
        help="measure even when pwcap runs on the interpreted engine (refused otherwise)",
    )
