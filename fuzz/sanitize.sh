#!/usr/bin/env bash
# The compiled hot path under AddressSanitizer and UndefinedBehaviorSanitizer.
#
#   fuzz/sanitize.sh                       (make sanitize) the test suite, then the campaign
#   fuzz/sanitize.sh atheris TARGET [ARG]  (make fuzz-compiled) coverage-guided fuzzing of
#                                          the compiled modules, ARGs libFuzzer's
#
# A scratch copy of the checkout (build/sanitize/<kind>/src: the tracked files and the new
# ones, as they are now) has its extension modules compiled with the sanitizers; the normal
# build in the checkout is never touched. The project's .venv runs it with the scratch copy
# first on the import path, the ASan runtime preloaded (an instrumented module dlopened by
# Python needs it loaded first) and PYTHONMALLOC=malloc, so every Python object gets ASan's
# red zones too, not only the C buffers.
#
# `make sanitize` (gcc): the test suite (SANITIZE_PYTEST: pytest's arguments, default the
# default suite), then the mutation campaign (SANITIZE_INPUTS mutants, default 100,000; 0
# skips it) with its failing inputs in build/sanitize/gcc/found.
#
# `make fuzz-compiled` (clang): the extensions are also instrumented for libFuzzer's
# coverage (-fsanitize=fuzzer-no-link), and libFuzzer is preloaded with the ASan runtime
# as one library made from clang's own archives, which atheris then drives ("Using
# preloaded libfuzzer") so the counters of the extensions guide it; see fuzz/atheris_run.py.
#
# A sanitizer report stops the process that made it (halt_on_error): a test fails, a
# campaign worker dies and the campaign pins the input. Every report is also written to
# build/sanitize/<kind>/reports and listed at the end. Leak checking is off: CPython keeps
# its interned objects and module state to the end by design, so every run would report them.
set -euo pipefail
cd "$(dirname "$0")/.."

ROOT=$PWD
PYTHON=${PYTHON:-$ROOT/.venv/bin/python}
MODE=${1:-sanitize}
case $MODE in
sanitize) KIND=gcc CC=gcc FLAGS="-fsanitize=address,undefined" ;;
atheris) KIND=clang CC=clang FLAGS="-fsanitize=address,undefined,fuzzer-no-link" ;;
*) echo "usage: $0 [atheris TARGET [libFuzzer arguments]]" >&2 && exit 2 ;;
esac
SAN=${SANITIZE_DIR:-$ROOT/build/sanitize}/$KIND
INPUTS=${SANITIZE_INPUTS:-100000}
JOBS=${SANITIZE_JOBS:-2}
# By default the default suite, but for the two files whose tests hold a decode to 400 MB
# of RSS: under ASan its shadow memory and quarantine count too (the campaign below keeps
# its other checks with a wider memory limit).
read -r -a PYTEST_ARGS <<<"${SANITIZE_PYTEST:---ignore=tests/test_hostile_memory.py --ignore=tests/test_fuzz_campaign.py}"
command -v "$CC" >/dev/null || { echo "sanitize: $CC is needed (apt-get install $CC)" >&2 && exit 2; }
if [ "$MODE" = atheris ]; then
    # libFuzzer and ASan's archives: Debian's clang only recommends the package holding them.
    for archive in libclang_rt.fuzzer_no_main-x86_64.a libclang_rt.asan-x86_64.a; do
        [ -f "$(clang -print-file-name=$archive)" ] || {
            major=$(clang -dumpversion | cut -d. -f1)
            echo "sanitize: clang's $archive is missing (apt-get install libclang-rt-$major-dev)" >&2
            exit 2
        }
    done
    "$PYTHON" -c 'import atheris' 2>/dev/null ||
        { echo "sanitize: atheris is needed (make setup, or pip install atheris)" >&2 && exit 2; }
fi

# SANITIZE_KEEP=1 runs again on the instrumented copy an earlier run built.
if [ "${SANITIZE_KEEP:-0}" != 1 ] || [ ! -d "$SAN/src" ]; then
    echo "sanitize: copying the checkout to $SAN/src" >&2
    rm -rf "$SAN/src"
    mkdir -p "$SAN/src"
    git ls-files -z --cached --others --exclude-standard |
        while IFS= read -r -d '' path; do [ -e "$path" ] && printf '%s\0' "$path"; done |
        tar --null -T - -cf - | tar -xpf - -C "$SAN/src"
    # The installed layout (pwcap.capture is capture/ ...) by links, as the editable install maps it.
    for folder in capture cli decode jobs report tables; do
        ln -s "../$folder" "$SAN/src/pwcap/$folder"
    done
    # Cython's C as the normal build wrote it, times kept: C no older than its source is not
    # written again, only compiled again (with the sanitizers).
    [ -d build/cython ] && mkdir -p "$SAN/src/build" && cp -a build/cython "$SAN/src/build/"

    echo "sanitize: compiling the hot path with $CC $FLAGS" >&2
    (
        cd "$SAN/src"
        # UBSan's reports stop the process (no recovery); -O1 keeps the stacks readable
        # (SANITIZE_OPT=-O0 builds quicker and runs slower: CI's short run).
        export CC LDSHARED="$CC -shared"
        export CFLAGS="$FLAGS -fno-sanitize-recover=undefined -fno-omit-frame-pointer ${SANITIZE_OPT:--O1} -g"
        export LDFLAGS="$FLAGS"
        nice -n 10 "$PYTHON" setup.py -q build_ext --inplace >"$SAN/build.log" 2>&1 ||
            { tail -n 30 "$SAN/build.log" >&2 && exit 1; }
    )
fi

if [ "$MODE" = atheris ]; then
    # libFuzzer and the ASan runtime as one preloaded library (a shared library may not
    # carry ASan's .preinit_array: that object is left out, the preload does its work).
    runtime=$(dirname "$(clang -print-file-name=libclang_rt.asan-x86_64.so)")
    rm -rf "$SAN/runtime" && mkdir -p "$SAN/runtime/objects"
    (cd "$SAN/runtime/objects" && ar x "$runtime/libclang_rt.asan-x86_64.a" && rm -f asan_preinit.*)
    clang++ -shared -o "$SAN/runtime/asan_with_fuzzer.so" "$SAN"/runtime/objects/*.o \
        -Wl,--whole-archive "$runtime/libclang_rt.fuzzer_no_main-x86_64.a" -Wl,--no-whole-archive \
        -lpthread -ldl -lrt -lm
    PRELOAD=$SAN/runtime/asan_with_fuzzer.so
else
    # With the C++ runtime: ASan finds the __cxa_throw it intercepts when it starts, or
    # the first C++ exception thrown in the process (greenlet's, under Playwright) stops
    # it with "CHECK failed: ... real___cxa_throw".
    PRELOAD="$(gcc -print-file-name=libasan.so) $(gcc -print-file-name=libstdc++.so)"
fi

rm -rf "$SAN/reports"
mkdir -p "$SAN/reports"
# The JVM (Spark) is no place for ASan: its own SIGSEGV handling is how it checks for
# null, which ASan would report. Nor is procps's ps, which Spark's launcher runs (`ps -o
# stat= -p $$`) and which hangs at its start with gcc's ASan runtime preloaded (on a lock
# in textdomain): every Spark session of the suite waited on it forever. The java and ps
# found on the PATH drop the preload; the Python workers Spark starts (PYSPARK_PYTHON)
# take it back.
rm -rf "$SAN/bin" && mkdir -p "$SAN/bin"
for tool in java ps; do
    if found=$(command -v "$tool"); then
        printf '#!/bin/sh\nunset LD_PRELOAD\nexec %s "$@"\n' "$(readlink -f "$found")" >"$SAN/bin/$tool"
        chmod +x "$SAN/bin/$tool"
    fi
done
printf '#!/bin/sh\nexport LD_PRELOAD="%s"\nexec %s "$@"\n' "$PRELOAD" "$PYTHON" >"$SAN/bin/python"
chmod +x "$SAN/bin/python"
export PATH=$SAN/bin:$PATH PYSPARK_PYTHON=$SAN/bin/python
unset JAVA_HOME
export LD_PRELOAD="$PRELOAD"
export ASAN_OPTIONS=detect_leaks=0:allocator_may_return_null=1:log_path=$SAN/reports/asan
export UBSAN_OPTIONS=halt_on_error=1:print_stacktrace=1:log_path=$SAN/reports/ubsan
export PYTHONMALLOC=malloc
export PYTHONPATH=$SAN/src${PYTHONPATH:+:$PYTHONPATH}
export PYTHONDONTWRITEBYTECODE=1
cd "$SAN/src"

list_reports() {
    local reports=("$SAN"/reports/*)
    [ -e "${reports[0]}" ] || return 0
    echo "sanitize: ${#reports[@]} sanitizer reports:" >&2
    for report in "${reports[@]}"; do
        echo "== $report" >&2
        head -n 60 "$report" >&2
    done
    return 1
}

if [ "$MODE" = atheris ]; then
    shift
    status=0
    nice -n 10 "$PYTHON" -m fuzz.atheris_run --compiled --work "$ROOT/fuzz/work/compiled" "$@" ||
        status=$?
    list_reports || status=1
    exit $status
fi

# Never a silent fallback: the run is worth something only on the instrumented modules.
"$PYTHON" - <<'EOF'
import importlib, sys
from pwcap.decode.engine import PROBE, activate, engine
activate()
where = importlib.import_module(PROBE).__file__
if engine() != "compiled" or "/build/sanitize/" not in where:
    sys.exit(f"sanitize: the instrumented build is not what runs: {engine()}, {where}")
with open(where, "rb") as extension:
    if b"__asan_report" not in extension.read():
        sys.exit(f"sanitize: {where} is not instrumented")
print(f"sanitize: running the instrumented build ({where})", file=sys.stderr)
EOF

status=0
echo "sanitize: the test suite" >&2
nice -n 10 "$PYTHON" -m pytest -q -p no:cacheprovider "${PYTEST_ARGS[@]}" || status=1

if [ "$INPUTS" -gt 0 ]; then
    echo "sanitize: the mutation campaign, $INPUTS inputs" >&2
    rm -rf "$SAN/found"
    # ASan's shadow memory and quarantine are not pwcap's, and instrumented code is slower:
    # the memory and time promises are checked on the normal build; here a decode only has
    # to stay within the machine's means.
    nice -n 10 "$PYTHON" -m fuzz.campaign --inputs "$INPUTS" --jobs "$JOBS" \
        --found "$SAN/found" --memory-mb 2000 --time-factor 10 || status=1
fi

list_reports || status=1
exit $status
