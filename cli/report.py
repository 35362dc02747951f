"""``pwcap report DATASET [--analytics DIR] -o report.html``: one self-contained HTML page."""

from __future__ import annotations

import argparse
import contextlib
import os
import sys
from pathlib import Path

from ..tables.printable import printable
from .paths import PathError, check_dataset, check_new_output, describe

EXIT_UNUSABLE = 1


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("dataset", type=Path, help="decoded dataset folder (pwcap decode -o)")
    parser.add_argument(
        "--analytics", type=Path, help="analytics folder (pwcap analyze -o); optional"
    )
    parser.add_argument("-o", "--output", type=Path, required=True, help="HTML file to write")
    parser.add_argument("--overwrite", action="store_true", help="replace OUTPUT if it exists")


def run(args: argparse.Namespace) -> int:
    from ..tables.interrupts import exit_status, signals_as_interrupt

    try:
        with signals_as_interrupt():
            return _report(args)
    except KeyboardInterrupt as interrupt:
        written = "was written" if getattr(interrupt, "written", False) else "was not written"
        _error(f"interrupted; {args.output} {written}")
        return exit_status(interrupt)


def _report(args: argparse.Namespace) -> int:
    from ..report import render

    try:
        check_dataset(args.dataset)
        if args.analytics is not None:
            for warning in check_analytics(args.dataset, args.analytics):
                print(f"pwcap report: warning: {printable(warning, None)}", file=sys.stderr)
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


def check_analytics(dataset: Path, analytics: Path) -> list[str]:
    """Refuse an analytics folder that holds no analytics tables, or tables computed from
    another dataset than ``dataset`` (their numbers would be shown as its own); what to
    warn of: tables computed from it and others together, or from sources not recorded."""
    from ..report.tables import ANALYTICS_TABLES
    from ..tables import provenance

    if not analytics.is_dir():
        raise PathError(f"{analytics}: not an analytics folder (pwcap analyze -o)")
    present = [name for name in ANALYTICS_TABLES if (analytics / name).is_dir()]
    if not present:
        raise PathError(f"{analytics}: no analytics tables in it (pwcap analyze -o writes them)")
    record_path = analytics / provenance.RECORD
    record = provenance.parse(record_path.read_text() if record_path.is_file() else None)
    this = provenance.local_fingerprint(dataset) or ""
    other, mixed, unknown = provenance.mismatches(record, present, this)
    if other:
        raise PathError(
            f"{analytics} was computed from another dataset than {dataset}"
            f" ({', '.join(other)}): run pwcap analyze {dataset} -o DIR, or give its analytics"
        )
    warnings = []
    if mixed:
        warnings.append(
            f"{analytics}: {', '.join(mixed)} computed from {dataset} and other datasets"
            " together: their numbers include the others'"
        )
    if unknown:
        warnings.append(
            f"{analytics} does not record which dataset {', '.join(unknown)} came from"
            f" (written by an older pwcap): make sure it was {dataset}"
        )
    return warnings


def _write(path: Path, html: str) -> None:
    """Written beside the target and renamed: a reader never sees half a page, and a
    failed write leaves nothing behind."""
    from ..tables.interrupts import Interrupted, interrupts_deferred

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
