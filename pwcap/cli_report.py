"""``pwcap report DATASET [--analytics DIR] -o report.html``: one self-contained HTML page."""

from __future__ import annotations

import argparse
import contextlib
import os
import sys
from pathlib import Path

from pwcap.cli_paths import PathError, check_dataset, check_new_output, describe
from pwcap.terminal import printable

EXIT_UNUSABLE = 1


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("dataset", type=Path, help="decoded dataset folder (pwcap decode -o)")
    parser.add_argument(
        "--analytics", type=Path, help="analytics folder (pwcap analyze -o); optional"
    )
    parser.add_argument("-o", "--output", type=Path, required=True, help="HTML file to write")
    parser.add_argument("--overwrite", action="store_true", help="replace OUTPUT if it exists")


def run(args: argparse.Namespace) -> int:
    from pwcap.tables.interrupts import exit_status, terminate_as_interrupt

    try:
        with terminate_as_interrupt():
            return _report(args)
    except KeyboardInterrupt as interrupt:
        written = "was written" if getattr(interrupt, "written", False) else "was not written"
        _error(f"interrupted; {args.output} {written}")
        return exit_status(interrupt)


def _report(args: argparse.Namespace) -> int:
    from pwcap.report import render

    try:
        check_dataset(args.dataset)
        if args.analytics is not None and not args.analytics.is_dir():
            raise PathError(f"{args.analytics}: not an analytics folder (pwcap analyze -o)")
        if args.output.is_dir():
            raise PathError(f"{args.output} is a folder; give the HTML file to write")
        if args.output.parent.exists() and not args.output.parent.is_dir():
            raise PathError(f"{args.output.parent} is not a folder")
        check_new_output(args.output, args.overwrite)
        html = render(args.dataset, args.analytics)
        _write(args.output, html)
    except PathError as error:
        return _error(str(error))
    except OSError as error:
        return _error(describe(error, args.output))
    print(f"{printable(args.output, None)} ({len(html.encode()) / 1024:,.0f} KiB)")
    return 0


def _write(path: Path, html: str) -> None:
    """Written beside the target and renamed: a reader never sees half a page, and a
    failed write leaves nothing behind."""
    from pwcap.tables.interrupts import Interrupted, interrupts_deferred

    path.parent.mkdir(parents=True, exist_ok=True)
    temporary = path.with_name(f".{path.name}.tmp")
    try:
        temporary.write_text(html, encoding="utf-8")
        with interrupts_deferred() as received:
            os.replace(temporary, path)
        if received:
            raise Interrupted(received[0], written=True)
    finally:
        with contextlib.suppress(FileNotFoundError):
            temporary.unlink()


def _error(message: str) -> int:
    print(f"pwcap report: error: {printable(message, None)}", file=sys.stderr)
    return EXIT_UNUSABLE
