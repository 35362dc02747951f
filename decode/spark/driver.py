"""``jobs/decode.py``'s program: list the captures, start Spark, decode and write."""

from __future__ import annotations

import argparse
import os
import sys
from functools import partial
from pathlib import Path

from ...jobs.common import at_once, interrupted, no_java, session
from ...tables.dataset import (
    DatasetError,
    check_output,
)
from ...tables.interrupts import interrupts_deferred, signals_as_interrupt
from ...tables.printable import printable
from ..inputs import InputError
from ..options import add_decode_options, decode_options
from .cluster import check_uri_output, interpreter_problem, unshared_output
from .listing import list_captures
from .writing import Output, write_dataset

DESCRIPTION = "decode captures on a Spark cluster into the dataset pwcap decode writes"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="decode.py", description=DESCRIPTION)
    parser.add_argument(
        "inputs",
        nargs="+",
        metavar="IN",
        help="capture files, folders or globs (file://, hdfs://, s3a://)",
    )
    parser.add_argument("-o", "--output", required=True, help="dataset folder to write")
    parser.add_argument(
        "--overwrite", action="store_true", help="replace OUT if it is an earlier pwcap dataset"
    )
    add_decode_options(parser)
    parser.add_argument(
        "--shared-output",
        action="store_true",
        help="OUT is a path every node of the cluster sees (a shared mount): write it there",
    )
    parser.add_argument("--verbose", action="store_true", help="keep Spark's INFO logging")
    args = parser.parse_args(argv)
    options = decode_options(args)
    try:
        captures, skipped = list_captures(args.inputs, options.series)
        if "://" not in args.output:  # known before Spark starts
            check_output(Path(args.output), args.overwrite)
        else:
            check_uri_output(args.output, args.overwrite)
    except (InputError, DatasetError) as error:
        parser.exit(1, f"decode: error: {printable(error, None)}\n")
    java = no_java()
    if java is not None:
        parser.exit(1, f"decode: error: {java}\n")
    if skipped:
        names = printable(", ".join(skipped[:3]), None)
        print(f"skipped {len(skipped)} files that are not captures: {names}")
    # The tasks run pwcap: local Python workers are this interpreter, which has it (a
    # cluster's are what PYSPARK_PYTHON names: see the README).
    os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
    output: Output | None = None
    try:
        with signals_as_interrupt():  # Ctrl-C and SIGTERM: one line, no dataset
            spark = session("pwcap-decode", args.verbose)
            problem = None if args.shared_output else unshared_output(spark, args.output)
            problem = problem or interpreter_problem(spark, "INFO" if args.verbose else "WARN")
            if problem is not None:
                parser.exit(1, f"decode: error: {printable(problem, None)}\n")
            output = Output(spark, args.output, args.overwrite)
            write = partial(output.write, partial(write_dataset, spark, captures, options))
            with signals_as_interrupt():  # not PySpark's handler, which the session set
                written = at_once([write])[0]
    except DatasetError as error:
        parser.exit(1, f"decode: error: {printable(error, None)}\n")
    except KeyboardInterrupt as interrupt:
        if output is not None:
            with interrupts_deferred():  # its tasks end with Spark: then nothing is left
                spark.stop()
                output.discard()
        return interrupted("decode", args.output, interrupt, False)
    for table, path in written.items():
        print(f"{table}: {printable(path, None)}")
    return 0
