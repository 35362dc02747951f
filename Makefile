# Two entry points a newcomer needs (see README): `make demo` and `make test`.
# Both build the virtual environment first, so they work on a fresh machine: the demo
# installs what pwcap needs to run, the tests add the development tools (pytest, ruff,
# the real clients, the browser driver) to the same environment, reusing its build.

PYTHON ?= python3
VENV := .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.installed
DEV_STAMP := $(VENV)/.installed-dev
SAY := @printf '\n== %s\n'

.PHONY: setup build demo test lint corpus sanitize fuzz-compiled

# The interpreted modules' bytecode, written here: an editable install writes none, and
# where PYTHONDONTWRITEBYTECODE is set (container images often set it) Python would
# compile every one of them again at the start of every decode.
BYTECODE := $(BIN)/python -m compileall -q pwcap capture cli decode jobs report tables
# What setup.py needs to compile the hot path, as pyproject.toml's build-system lists it.
BUILD_REQUIRES := $(BIN)/python -c "import tomllib; \
	print(*tomllib.load(open('pyproject.toml', 'rb'))['build-system']['requires'], sep='\n')"

# The compiled modules are built here, in place, visibly and on every core; the editable
# install then builds none (PWCAP_BUILD_EXT=0: see setup.py), and `make build` finds this
# build up to date in build/.
$(STAMP): pyproject.toml setup.py
	$(SAY) "creating $(VENV) with the tools that compile pwcap (Cython, setuptools)"
	$(PYTHON) -m venv $(VENV)
	$(BIN)/pip install -q --upgrade pip
	$(BUILD_REQUIRES) | xargs $(BIN)/pip install -q
	$(SAY) "compiling the decoder's hot path: Cython writes C, then gcc on every core (minutes, once)"
	$(BIN)/python setup.py -q build_ext --inplace
	$(SAY) "installing pwcap and its dependencies from PyPI (PySpark is most of the download)"
	PWCAP_BUILD_EXT=0 $(BIN)/pip install -q --no-build-isolation -e .
	$(BYTECODE)
	touch $(STAMP)

$(DEV_STAMP): $(STAMP)
	$(SAY) "adding the development tools to $(VENV) (pytest, ruff, the real clients)"
	PWCAP_BUILD_EXT=0 $(BIN)/pip install -q --no-build-isolation -e '.[dev]'
	touch $(DEV_STAMP)

setup: $(DEV_STAMP)

# The compiled hot path again, for the sources edited since the install compiled it (an
# extension older than its source is never imported: see decode/engine.py).
build: $(STAMP)
	$(BIN)/python setup.py -q build_ext --inplace
	$(BYTECODE)

demo: $(STAMP)
	$(SAY) "decoding sample_pcaps/ into out/dataset"
	$(BIN)/pwcap decode sample_pcaps --overwrite -o out/dataset
	$(SAY) "running the analytics on Spark into out/analytics (the first run also caches Spark's classes)"
	$(BIN)/pwcap analyze out/dataset --overwrite -o out/analytics
	$(SAY) "writing the report"
	$(BIN)/pwcap report out/dataset --analytics out/analytics --overwrite -o out/report.html
	@echo
	@echo "decoded tables:   out/dataset/{frames,messages,connections,anomalies}"
	@echo "analytics tables: out/analytics"
	@echo "report:           out/report.html (open it in a browser)"

lint: $(DEV_STAMP)
	$(BIN)/ruff check .
	$(BIN)/ruff format --check .

test: lint build
	$(BIN)/pytest -q

# The compiled hot path under ASan and UBSan (gcc), in a scratch copy under build/sanitize:
# the default test suite, then a campaign of SANITIZE_INPUTS mutants (default 100,000).
# Long (it runs under nice). SANITIZE_PYTEST="tests/test_x.py" runs fewer tests.
sanitize: setup
	bash fuzz/sanitize.sh

# Coverage-guided fuzzing of the compiled modules (clang, libFuzzer through atheris):
# make fuzz-compiled TARGET=pulsar ARGS="-max_total_time=600"
# It needs clang and its runtime archives (Debian: apt-get install clang libclang-rt-14-dev);
# atheris comes with `make setup`. SANITIZE_KEEP=1 reuses the instrumented build of the
# previous run (the next TARGET), which otherwise is compiled again from a fresh copy.
TARGET ?= pulsar
ARGS ?=
fuzz-compiled: setup
	bash fuzz/sanitize.sh atheris $(TARGET) $(ARGS)
