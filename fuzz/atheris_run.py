"""Run one fuzz target coverage-guided, with atheris (libFuzzer), from its seeds.

    nice -n 10 python -m fuzz.atheris_run pulsar -max_total_time=600 -rss_limit_mb=400
    make fuzz-compiled TARGET=pulsar ARGS=-max_total_time=600

The seeds (:data:`fuzz.targets.TARGETS`) are written to ``<work>/<target>/seeds``, the
inputs libFuzzer finds interesting to ``<work>/<target>/corpus``, and a crashing, hanging
or memory-hungry input to ``<work>/<target>/`` as ``crash-*``, ``timeout-*`` or ``oom-*``
(``<work>`` is ``fuzz/work`` unless ``--work`` says otherwise): a failure worth keeping
goes to ``fuzz/corpus/<target>/``, which the tests replay (libFuzzer shrinks it first:
``TARGET -minimize_crash=1 -runs=10000 crash-*``). Other arguments are libFuzzer's
(``-help=1`` lists them).

By default the interpreted decoder runs (``PWCAP_PURE_PYTHON``): atheris follows the
coverage of Python code. ``--compiled`` runs the compiled modules instead, which only
``make fuzz-compiled`` can give it: an extension build instrumented for libFuzzer's
coverage and ASan/UBSan (clang's ``-fsanitize=fuzzer-no-link,address,undefined``), in a
process where libFuzzer and the ASan runtime were preloaded together, so the extensions'
coverage counters reach the fuzzer that atheris drives (``fuzz/sanitize.sh``).
"""

from __future__ import annotations

import ctypes
import gc
import hashlib
import os
import sys
from pathlib import Path
from types import FunctionType, ModuleType

from pwcap.decode.engine import activate

WORK = Path(__file__).resolve().parent / "work"


def main(argv: list[str]) -> int:
    compiled = "--compiled" in argv[:3]
    work = WORK
    if "--work" in argv[:3]:
        at = argv.index("--work")
        work = Path(argv[at + 1])
        del argv[at : at + 2]
    argv = [arg for arg in argv if arg != "--compiled"]
    if not compiled:
        os.environ["PWCAP_PURE_PYTHON"] = "1"
        activate()  # importing fuzz chose the engine before the variable was set
    from fuzz.targets import TARGETS

    if not argv or argv[0] not in TARGETS:
        print(__doc__.strip(), f"\ntargets: {', '.join(TARGETS)}", file=sys.stderr)
        return 2
    if compiled:
        problem = _compiled_problem()
        if problem:
            print(
                f"fuzz.atheris_run: --compiled: {problem}; run `make fuzz-compiled`",
                file=sys.stderr,
            )
            return 2
    import atheris  # only here: the targets run without it

    if compiled:
        _instrument_own_code(atheris)
    else:
        atheris.instrument_all()  # pwcap's own import finder bypasses instrument_imports

    name, options = argv[0], argv[1:]
    target, seeds = TARGETS[name]
    work = work / name
    (work / "seeds").mkdir(parents=True, exist_ok=True)
    (work / "corpus").mkdir(exist_ok=True)
    for seed in seeds():
        digest = hashlib.sha1(seed).hexdigest()
        (work / "seeds" / digest).write_bytes(seed)
    # pwcap's 400 MB holds on the normal build; under ASan its shadow memory and
    # quarantine alone pass it before the first input (643 MB), as in `make sanitize`.
    memory_mb = 2000 if compiled else 400
    defaults = [f"-artifact_prefix={work}/", "-timeout=20", f"-rss_limit_mb={memory_mb}"]
    folders = [str(work / "corpus"), str(work / "seeds")]
    atheris.Setup([sys.argv[0], *defaults, *options, *folders], target)
    atheris.Fuzz()
    return 0


def _instrument_own_code(atheris: ModuleType) -> None:
    """Atheris's coverage for the Python functions of pwcap and the targets already
    imported, beside the compiled modules' own counters. Not ``atheris.instrument_all``:
    it rewrites every function loaded (~7,000, pyarrow's and the standard library's),
    which under ASan took longer than the campaign it was to start."""
    own = ("pwcap.", "fuzz.")
    for found in gc.get_objects():
        if isinstance(found, FunctionType) and (found.__module__ or "").startswith(own):
            atheris.instrument_func(found)


def _compiled_problem() -> str | None:
    """Why this process cannot fuzz the compiled path, or None."""
    from pwcap.decode.engine import PROBE, engine

    activate()
    if engine() != "compiled":
        return f"the decoder here is {engine()}"
    try:
        ctypes.CDLL(None).LLVMFuzzerRunDriver  # noqa: B018 - looked up, not called
    except AttributeError:
        return "no libFuzzer was preloaded, so the extensions' coverage would reach none"
    module = sys.modules[PROBE]
    with open(module.__file__ or "", "rb") as extension:
        if b"__sanitizer_cov_8bit_counters_init" not in extension.read():
            return f"{module.__file__} is not instrumented for coverage"
    return None


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
