"""``pwcap decode``: captures in, the Parquet dataset out, a short summary at the end."""

from __future__ import annotations

import argparse
import gc
import sys
from collections import Counter
from pathlib import Path
from typing import TYPE_CHECKING, TextIO

from ..decode.options import add_decode_options, decode_options, positive
from ..tables.printable import printable
from .paths import describe

if TYPE_CHECKING:  # imported lazily at run time: `pwcap --help` stays fast
    from ..capture import CaptureStats
    from ..decode.driver import Summary

EPILOG = """\
exit status: 0 when every capture was decoded; 1 when an input is unusable (missing, not
a capture, nothing matched) or OUT cannot be written -- then nothing is written; 3 when
a capture ends in the middle of a record (cut off, e.g. copied while tcpdump was still
writing): everything before the cut is in the dataset, with a `truncated_capture` row in
`anomalies`, and the dataset is written.
"""
EXIT_UNUSABLE = 1
EXIT_CUT_OFF = 3
TOP_COMMANDS = 8
YOUNG_OBJECTS = 100_000  # allocations between two collections of the young generation


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.epilog = EPILOG
    parser.formatter_class = argparse.RawDescriptionHelpFormatter
    parser.add_argument(
        "inputs",
        nargs="+",
        metavar="IN",
        help="capture files, folders, globs, or - for standard input (tcpdump -w -)",
    )
    parser.add_argument("-o", "--output", required=True, metavar="OUT", help="dataset directory")
    parser.add_argument(
        "--overwrite", action="store_true", help="replace OUT if it is an earlier pwcap dataset"
    )
    add_decode_options(parser)
    parser.add_argument(
        "-j",
        "--jobs",
        type=positive,
        metavar="N",
        help="worker processes (default: every core, one per 16 MB of input at most);"
        " 1 decodes in this process",
    )
    parser.add_argument("-q", "--quiet", action="store_true", help="no progress bar and no summary")


def run(args: argparse.Namespace) -> int:
    from ..decode.capture_anomalies import capture_warnings
    from ..decode.inputs import InputError
    from ..decode.parallel import WorkerDied, decode_parallel
    from ..tables.dataset import DatasetError
    from ..tables.interrupts import exit_status, signals_as_interrupt
    from .progress import ProgressBar, wanted

    options = decode_options(args)
    progress = ProgressBar() if wanted(args.quiet) else None
    # What the imports made (protobuf descriptors, pyarrow's types) lives as long as the
    # process: frozen, the collector's full passes skip it and walk only what decoding
    # holds. Decoding makes no reference cycles (a closed connection is freed by reference
    # counting: see ``on_close`` of the decoders and of reassembly), so the young
    # generation is collected every YOUNG_OBJECTS allocations rather than every 700.
    gc.freeze()
    gc.set_threshold(YOUNG_OBJECTS, *gc.get_threshold()[1:])
    try:
        with signals_as_interrupt():
            summary = decode_parallel(
                args.inputs, args.output, args.jobs, options, args.overwrite, progress
            )
    except (InputError, DatasetError, WorkerDied) as error:
        _error(str(error))
        return EXIT_UNUSABLE
    except OSError as error:
        _error(describe(error, _written_path(error, args.output)))
        return EXIT_UNUSABLE
    except KeyboardInterrupt as interrupt:
        written = "was written" if getattr(interrupt, "written", False) else "was not written"
        _error(f"interrupted; {args.output} {written}")
        return exit_status(interrupt)
    if summary.removed:
        names = ", ".join(str(path) for path in summary.removed)
        print(
            f"pwcap decode: removed what interrupted runs left: {printable(names, None)}",
            file=sys.stderr,
        )
    if not args.quiet:
        print_summary(summary, sys.stdout)
    for capture in summary.cut_off:
        print(
            f"pwcap decode: warning: {printable(capture.cut_off, None)}"
            " (decoded up to the cut; dataset written)",
            file=sys.stderr,
        )
    for capture in summary.captures:
        for line in capture_warnings(capture.stats, str(capture.path)):
            print(f"pwcap decode: warning: {printable(line, None)}", file=sys.stderr)
    return EXIT_CUT_OFF if summary.cut_off else 0


def print_summary(summary: Summary, out: TextIO) -> None:
    """A few lines a person reads after the run: what was found, how fast."""
    seconds = max(summary.seconds, 1e-9)
    frames = summary.rows["frames"]
    megabytes = summary.input_bytes / 1e6
    count = len(summary.captures)
    print(
        f"decoded {count} capture{'s' if count != 1 else ''} ({megabytes:,.1f} MB) in"
        f" {summary.seconds:.2f} s: {megabytes / seconds:,.1f} MB/s,"
        f" {frames / seconds:,.0f} frames/s",
        file=out,
    )
    totals = summary.capture_totals()
    print(f"packets      {_packets(totals)}", file=out)
    if totals.encapsulations:
        print(f"tunnelled    {_tally(totals.encapsulations, TOP_COMMANDS)}", file=out)
    print(f"connections  {_tally(summary.connections)}", file=out)
    if summary.tls or summary.keylog is not None:
        print(f"tls          {_tls(summary)}", file=out)
    print(f"frames       {_tally(summary.commands, TOP_COMMANDS)}", file=out)
    print(f"messages     {summary.rows['messages']:,}", file=out)
    print(f"anomalies    {_tally(summary.anomalies)}", file=out)
    if summary.skipped:
        from ..decode.inputs import skipped_summary

        print(f"skipped      {printable(skipped_summary(summary.skipped), None)}", file=out)
    print(f"written to   {printable(summary.out, None)}", file=out)


def _tls(summary: Summary) -> str:
    """TLS connections decrypted and not (with why), and the key log lines skipped."""
    outcomes = summary.tls
    decrypted = outcomes.get("decrypted", 0)
    why = {name.replace("_", " "): n for name, n in outcomes.items() if name != "decrypted"}
    line = f"{decrypted:,} decrypted, {_tally(Counter(why))} not"
    keylog = summary.keylog
    if keylog is not None and keylog.malformed:
        line += f"; {keylog.malformed:,} malformed key log lines skipped"
    return line


def _packets(stats: CaptureStats) -> str:
    """What reassembly made of the records: skipped, repaired and lost, in one line."""
    from ..decode.capture_anomalies import skip_reasons

    # Fragments are counted apart: their datagrams count as what they carried.
    skipped = sum(n for reason, n in stats.skipped.items() if reason != "ip_fragments")
    parts = [f"{stats.tcp_segments:,} TCP", f"{skipped:,} other skipped"]
    if skipped:
        parts[-1] += f" [{skip_reasons(stats, leave_out=('ip_fragments',))}]"
    if stats.ip_fragments:
        fragments = f"{stats.ip_fragments:,} IP fragments made {stats.fragments_reassembled:,}"
        fragments += " datagrams"
        if stats.fragments_dropped:
            fragments += f", {stats.fragments_dropped:,} never completed"
        parts.append(fragments)
    if stats.retransmitted_bytes:
        parts.append(f"{stats.retransmitted_bytes:,} B seen twice")
    if stats.reordered_segments:
        parts.append(f"{stats.reordered_segments:,} segments held for order")
    if stats.gaps:
        parts.append(f"{stats.gap_bytes:,} B missing in {stats.gaps:,} gaps")
    return f"{stats.records:,} ({', '.join(parts)})"


def _tally(counts: Counter, top: int | None = None) -> str:
    """The total and the largest counts, ties by name (so workers, whose counters met the
    names in another order, print what one process prints)."""
    total = sum(counts.values())
    if not total:
        return "0"
    ranked = sorted(counts.items(), key=lambda item: (-item[1], item[0] is None, item[0] or ""))
    shown = ranked[:top] if top else ranked
    parts = [f"{printable(name) if name else 'unknown type'} {n:,}" for name, n in shown]
    if len(ranked) > len(shown):
        parts.append(f"{len(ranked) - len(shown)} more")
    return f"{total:,} ({', '.join(parts)})"


def _written_path(error: OSError, output: str) -> Path | None:
    """``output`` when the failing file is inside the run's temporary copy of it
    (``OUT.tmp-XXXX``): the user never typed that name."""
    failed = str(error.filename or "")
    return Path(output) if failed.startswith(f"{Path(output)}.tmp-") else None


def _error(message: str) -> None:
    print(f"pwcap decode: error: {printable(message, None)}", file=sys.stderr)
