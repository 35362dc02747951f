"""The ``pwcap`` command: decode captures, show frames, run the analytics.

Each sub-command lives in its own module exposing ``add_arguments(parser)`` and
``run(args) -> int``; modules import their heavy dependencies (pyarrow, pyspark) inside
``run`` so ``pwcap --help`` stays fast and a missing pyspark only matters to ``analyze``.
"""

from __future__ import annotations

import argparse
import importlib
import os
import signal
import sys

from ..decode.engine import activate

# pyarrow imports NumPy, whose OpenBLAS starts a thread per core that spins a while: CPU
# spent in every pwcap process (each `--jobs` worker too), for linear algebra pwcap
# never does. Set before any sub-command imports pyarrow; a user's setting stands.
os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")

DESCRIPTION = (
    "pwcap: decode packet captures of Pulsar and Kafka 0.7 traffic into Parquet tables,"
    " analyse them and report."
)
# The variable naming Arrow's default memory pool, read when pyarrow first allocates.
ARROW_POOL_VARIABLE = "ARROW_DEFAULT_MEMORY_POOL"
# Each sub-command's module in this package (cli/decode.py is pwcap.cli.decode).
SUBCOMMANDS = {
    "decode": (".decode", "decode captures into a Parquet dataset"),
    "show": (".show", "print one line per frame, like a packet list"),
    "analyze": (".analyze", "run the latency, permit and redelivery analytics"),
    "report": (".report", "write a self-contained HTML report of a dataset"),
}


def version_text() -> str:
    """What ``pwcap --version`` prints: the version and which decoder engine runs (the
    version as installed: ``pyproject.toml`` reads it from ``pwcap.__version__``)."""
    from importlib.metadata import version

    from ..decode.engine import engine

    return f"pwcap {version('pwcap')} (decoder: {engine()})"


class _VersionAction(argparse.Action):
    """``--version``, worked out only when asked for: saying which engine runs imports the
    decoder (pyarrow, protobuf), which no other command should pay for before it starts."""

    def __init__(self, option_strings: list[str], dest: str = argparse.SUPPRESS) -> None:
        super().__init__(
            option_strings,
            dest,
            default=argparse.SUPPRESS,
            nargs=0,
            help="show the version and which decoder engine runs, and exit",
        )

    def __call__(self, parser: argparse.ArgumentParser, *_: object) -> None:
        print(version_text())
        parser.exit()


def _command(argv: list[str]) -> str | None:
    """The sub-command ``argv`` names (its first word that is not an option), if any."""
    first = next((arg for arg in argv if not arg.startswith("-")), None)
    return first if first in SUBCOMMANDS else None


def main(argv: list[str] | None = None) -> int:
    activate()  # before a sub-command imports the decoders
    if argv is None:
        argv = sys.argv[1:]
    parser = argparse.ArgumentParser(prog="pwcap", description=DESCRIPTION)
    parser.add_argument("--version", action=_VersionAction)
    subparsers = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")
    # Only the sub-command asked for is imported (a decode has no use for the analytics'
    # modules); the others are listed by name and help for `pwcap --help`.
    chosen = _command(argv)
    module = None
    for name, (module_name, help_text) in SUBCOMMANDS.items():
        sub = subparsers.add_parser(name, help=help_text, description=help_text)
        if name == chosen:
            module = importlib.import_module(module_name, __name__)
            module.add_arguments(sub)
    args = parser.parse_args(argv)
    if module is None:  # argparse took a word for the command that _command did not
        parser.error(f"give the command first: {' '.join(SUBCOMMANDS)}")
    return module.run(args)


def entry() -> int:
    """The ``pwcap`` program: :func:`main`, then deaf to Ctrl-C and SIGTERM while the
    interpreter winds down, when the work is done and its outcome said (a signal then
    would kill the process and turn a written dataset's exit status into a signal's)."""
    if sys.argv[1:2] == ["decode"]:
        # pyarrow imports NumPy whenever it is installed, for conversions a decode never
        # makes, at every start and in every worker. Marked absent, it is not loaded;
        # pyarrow runs without it. Only the program does this: a process importing pwcap
        # may want it.
        sys.modules.setdefault("numpy", None)  # type: ignore[arg-type]
        # Arrow's default allocator (mimalloc) hands freed pages back to the system and
        # faults fresh ones in for the next batch, CPU spent in the kernel. The C
        # library's allocator keeps them: less CPU and a lower peak. A user's own choice
        # (the same variable) stands.
        os.environ.setdefault(ARROW_POOL_VARIABLE, "system")
    status = main()
    for signum in (signal.SIGINT, signal.SIGTERM):
        signal.signal(signum, signal.SIG_IGN)
    return status
