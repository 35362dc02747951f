# Two entry points a newcomer needs (see README): `make demo` and `make test`.
# Both build the virtual environment first, so they work on a fresh machine.

PYTHON ?= python3
VENV := .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.installed

.PHONY: setup build demo test lint corpus sanitize fuzz-compiled

# The interpreted modules' bytecode, written here: an editable install writes none, and
# where PYTHONDONTWRITEBYTECODE is set (container images often set it) Python would
# compile every one of them again at each start (30 ms of CPU in every decode).
BYTECODE := $(BIN)/python -m compileall -q pwcap decode tables capture jobs

$(STAMP): pyproject.toml setup.py
	$(PYTHON) -m venv $(VENV)
	$(BIN)/pip install -q --upgrade pip
	$(BIN)/pip install -q -e '.[dev]'
	$(BYTECODE)
	touch $(STAMP)

setup: $(STAMP)

# The compiled hot path again, for the sources edited since the install compiled it (an
# extension older than its source is never imported: see pwcap/engine.py).
build: setup
	$(BIN)/python setup.py -q build_ext --inplace
	$(BYTECODE)

demo: setup
	$(BIN)/pwcap decode sample_pcaps --overwrite -o out/dataset
	$(BIN)/pwcap analyze out/dataset --overwrite -o out/analytics
	$(BIN)/pwcap report out/dataset --analytics out/analytics --overwrite -o out/report.html
	@echo
	@echo "decoded tables:   out/dataset/{frames,messages,connections,anomalies}"
	@echo "analytics tables: out/analytics"
	@echo "report:           out/report.html (open it in a browser)"

lint: setup
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
TARGET ?= pulsar
ARGS ?=
fuzz-compiled: setup
	bash fuzz/sanitize.sh atheris $(TARGET) $(ARGS)
