"""How often a decode calls chosen functions, per message or per frame, from callgrind.

``valgrind --tool=callgrind`` records every call with its caller. This reads such a profile
(``callgrind.out.*``) and prints, for each function whose name matches a pattern, its
calls per unit (per message or per frame: ``--units``), less those of a baseline profile
(a decode of a small capture: the start, which is not per message), with its chief
callers. Pointed at CPython's allocators and constructors (the default pattern), it says
which Python objects the decode makes per message and which function makes them.

    valgrind --tool=callgrind --callgrind-out-file=lz4.out python -m pwcap.cli decode ...
    python bench/callgrind_calls.py lz4.out --units 160000 --baseline start.out
"""

from __future__ import annotations

import argparse
import re
from collections import Counter
from pathlib import Path

# CPython's object allocators and the constructors a decode calls most.
OBJECTS = (
    r"^(PyObject_Malloc|_PyObject_GC_New|_PyObject_GC_NewVar|PyType_GenericAlloc"
    r"|PyTuple_New|PyList_New|PyDict_New|_PyLong_New|PyLong_From\w+|PyFloat_FromDouble"
    r"|PyUnicode_New|PyBytes_FromStringAndSize|PyByteArray_FromStringAndSize"
    r"|PyMemoryView_\w+|mbuf_add_view|PySlice_New|_PySlice_FromIndices"
    r"|EVP_MD_CTX_new|__Pyx_Generator_Next|__pyx_tp_new\w*)$"
)
_NAMED = re.compile(r"\((\d+)\)(?: (.*))?")


def calls(profile: Path) -> tuple[Counter[str], dict[str, Counter[str]]]:
    """Every function's calls in ``profile``, and the callers they came from. Cython's
    helpers (``__Pyx_...``) are in every module under the same name: theirs carry the
    module's file name."""
    names: dict[tuple[str, str], str] = {}
    total: Counter[str] = Counter()
    callers: dict[str, Counter[str]] = {}
    caller = callee = obj = callee_obj = ""

    def name(kind: str, text: str) -> str:  # callgrind names a thing "(id) name" once
        found = _NAMED.match(text)
        if found is None:
            return text
        if found[2]:
            names[kind, found[1]] = found[2]
        return names.get((kind, found[1]), text)

    def qualified(function: str, where: str) -> str:
        return f"{function} [{Path(where).name}]" if function.startswith("__Pyx") else function

    with profile.open() as lines:
        for line in lines:
            key, _, rest = line.rstrip("\n").partition("=")
            if key == "ob":
                obj = callee_obj = name("ob", rest)
            elif key == "cob":
                callee_obj = name("ob", rest)
            elif key == "fn":
                caller = qualified(name("fn", rest), obj)
                callee_obj = obj
            elif key == "cfn":
                callee = qualified(name("fn", rest), callee_obj)
            elif key == "calls":
                count = int(rest.split()[0])
                total[callee] += count
                callers.setdefault(callee, Counter())[caller] += count
                callee_obj = obj
    return total, callers


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("profile", type=Path)
    parser.add_argument("--units", type=float, required=True, help="messages or frames decoded")
    parser.add_argument("--baseline", type=Path, help="a profile whose calls are subtracted")
    parser.add_argument("--match", default=OBJECTS, help="a regular expression of names")
    parser.add_argument("--callers", type=int, default=4, help="callers shown per function")
    parser.add_argument("--least", type=float, default=0.05, help="smallest count shown")
    args = parser.parse_args()
    total, callers = calls(args.profile)
    base, base_callers = calls(args.baseline) if args.baseline else (Counter(), {})
    wanted = re.compile(args.match)
    print(f"calls per unit ({args.units:,.0f} units), less the baseline's:")
    for function, count in sorted(total.items(), key=lambda item: item[1], reverse=True):
        per = (count - base[function]) / args.units
        if not wanted.search(function) or per < args.least:
            continue
        print(f"{per:8.2f}  {function}")
        less = base_callers.get(function, Counter())
        by = Counter({who: n - less[who] for who, n in callers[function].items()})
        for who, n in by.most_common(args.callers):
            if n / args.units >= args.least:
                print(f"{'':10}{n / args.units:8.2f}  from {who}")


if __name__ == "__main__":
    main()
