"""A failing capture made as small as it stays failing, for the regression corpus.

    python -m fuzz.minimize fuzz/found/invariant-0000318-kafka07_errors.pcap fuzz/corpus/

Records (or pcapng blocks) are removed in halves, quarters and so on down to one at a
time, keeping each removal after which the capture still fails the same way (the same
kind, the same message once its numbers are set aside); then the tail is cut short.
"""

from __future__ import annotations

import re
import sys
from collections.abc import Callable
from pathlib import Path
from tempfile import TemporaryDirectory

from fuzz.batch import Failure, decode_batch
from fuzz.layout import parse
from fuzz.mutate import Mutant


def signature(failure: Failure) -> str:
    """What a failure is, its numbers (ids, offsets, sizes) set aside."""
    lines = failure.detail.strip().splitlines()
    return failure.kind + ": " + re.sub(r"\d+", "N", lines[-1] if lines else "")


def minimize(data: bytes, fails: Callable[[bytes], bool]) -> bytes:
    """The smallest capture found that still ``fails``, by whole records then bytes."""
    layout = parse(data)
    if layout is not None:
        parts = layout.parts
        chunk = max(1, len(parts) // 2)
        while chunk:
            at = 0
            while at < len(parts):
                trial = parts[:at] + parts[at + chunk :]
                if fails(bytes(layout.head) + b"".join(bytes(p.raw) for p in trial)):
                    parts = trial
                else:
                    at += chunk
            chunk //= 2
        data = bytes(layout.head) + b"".join(bytes(p.raw) for p in parts)
    cut = len(data) // 2
    while cut:
        if len(data) > cut and fails(data[:-cut]):
            data = data[:-cut]
        else:
            cut //= 2
    return data


def main(argv: list[str]) -> int:
    if len(argv) != 2 or argv[0].startswith("-"):
        print(__doc__.strip(), file=sys.stderr)
        return 2
    source, corpus = Path(argv[0]), Path(argv[1])
    name = source.name.split("-", 1)[1]  # without the failure kind in front
    with TemporaryDirectory(prefix="pwcap-minimize-") as tmp:

        def failures(data: bytes) -> set[str]:
            outcome = decode_batch([Mutant(name, data, ())], Path(tmp))
            return {signature(f) for f in outcome.failures}

        wanted = failures(source.read_bytes())
        if not wanted:
            print(f"{source}: does not fail", file=sys.stderr)
            return 1
        smallest = minimize(source.read_bytes(), lambda data: failures(data) >= wanted)
    (corpus / name).write_bytes(smallest)
    print(f"{corpus / name}: {len(smallest)} bytes, {sorted(wanted)}")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
