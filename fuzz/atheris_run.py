"""Run one fuzz target coverage-guided, with atheris (libFuzzer), from its seeds.

    nice -n 10 python -m fuzz.atheris_run pulsar -max_total_time=600 -rss_limit_mb=400

The seeds (:data:`fuzz.targets.TARGETS`) are written to ``fuzz/work/<target>/seeds``,
the inputs libFuzzer finds interesting to ``fuzz/work/<target>/corpus``, and a crashing,
hanging or memory-hungry input to ``fuzz/work/<target>/`` as ``crash-*``, ``timeout-*``
or ``oom-*``: a failure worth keeping goes to ``fuzz/corpus/<target>/``, which the tests
replay (libFuzzer shrinks it first: ``TARGET -minimize_crash=1 -runs=10000 crash-*``).
Other arguments are libFuzzer's (``-help=1`` lists them). The interpreted decoder runs
(``PWCAP_PURE_PYTHON``): atheris follows the coverage of Python code only, and the
compiled modules are built from the same sources.
"""

from __future__ import annotations

import hashlib
import os
import sys
from pathlib import Path

WORK = Path(__file__).resolve().parent / "work"


def main(argv: list[str]) -> int:
    os.environ["PWCAP_PURE_PYTHON"] = "1"
    from fuzz.targets import TARGETS

    if not argv or argv[0] not in TARGETS:
        print(__doc__.strip(), f"\ntargets: {', '.join(TARGETS)}", file=sys.stderr)
        return 2
    import atheris  # only here: the targets run without it

    atheris.instrument_all()  # pwcap's own import finder bypasses instrument_imports

    name, options = argv[0], argv[1:]
    target, seeds = TARGETS[name]
    work = WORK / name
    (work / "seeds").mkdir(parents=True, exist_ok=True)
    (work / "corpus").mkdir(exist_ok=True)
    for seed in seeds():
        digest = hashlib.sha1(seed).hexdigest()
        (work / "seeds" / digest).write_bytes(seed)
    defaults = [f"-artifact_prefix={work}/", "-timeout=20", "-rss_limit_mb=400"]
    folders = [str(work / "corpus"), str(work / "seeds")]
    atheris.Setup([sys.argv[0], *defaults, *options, *folders], target)
    atheris.Fuzz()
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
