"""``pwcap report DATASET [--analytics DIR] -o report.html``: one self-contained HTML page."""

from __future__ import annotations

import argparse
import os
import sys
from pathlib import Path


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("dataset", type=Path, help="decoded dataset folder (pwcap decode -o)")
    parser.add_argument(
        "--analytics", type=Path, help="analytics folder (pwcap analyze -o); optional"
    )
    parser.add_argument("-o", "--output", type=Path, required=True, help="HTML file to write")


def run(args: argparse.Namespace) -> int:
    from pwcap.report import render

    if not args.dataset.is_dir():
        print(f"pwcap report: not a dataset folder: {args.dataset}", file=sys.stderr)
        return 2
    if args.analytics is not None and not args.analytics.is_dir():
        print(f"pwcap report: not an analytics folder: {args.analytics}", file=sys.stderr)
        return 2
    html = render(args.dataset, args.analytics)
    # Written beside the target and renamed: a reader never sees half a page.
    temporary = args.output.with_name(f".{args.output.name}.tmp")
    temporary.write_text(html, encoding="utf-8")
    os.replace(temporary, args.output)
    print(f"{args.output} ({len(html.encode()) / 1024:,.0f} KiB)")
    return 0
