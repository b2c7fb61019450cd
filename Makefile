# The two commands a new user needs are `make test` and `make demo`; each builds
# its own virtual environment (.venv) from pyproject.toml first.
PYTHON ?= python3
VENV   ?= .venv
BIN    := $(VENV)/bin
STAMP  := $(VENV)/.installed

.PHONY: demo test lint typecheck pytest clean

$(STAMP): pyproject.toml
	$(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install --quiet --upgrade pip
	$(BIN)/python -m pip install --quiet -e '.[dev]'
	touch $(STAMP)

## demo: the example project's workers and beat on an embedded server; live status until Ctrl-C
demo: $(STAMP)
	$(BIN)/python -m example_project.demo

## test: lint, type-check and run the whole test suite (real Redis/Valkey, SQLite, PostgreSQL)
test: lint typecheck pytest

lint: $(STAMP)
	$(BIN)/ruff check celery_dgs tests example_project benchmarks

typecheck: $(STAMP)
	$(BIN)/mypy

pytest: $(STAMP)
	$(BIN)/pytest $(PYTEST_ARGS)

## bench: performance benchmarks, one table (BENCH_ARGS=--quick for a short run, --full for 1M start-up)
.PHONY: bench
bench: $(STAMP)
	$(BIN)/python -m benchmarks.run $(BENCH_ARGS)

## bench-quality: scheduling quality of dgs vs Celery beat on simulated workloads
.PHONY: bench-quality
bench-quality: $(STAMP)
	$(BIN)/python -m benchmarks.quality $(BENCH_ARGS)

## soak: the fault suite's soak mode: random faults for SOAK_SECONDS (120), then the history checker
.PHONY: soak
SOAK_SECONDS ?= 120
soak: $(STAMP)
	SOAK_SECONDS=$(SOAK_SECONDS) $(BIN)/python -m tests.faults.soak $(SOAK_ARGS)

clean:
	rm -rf $(VENV) .pytest_cache .mypy_cache .ruff_cache
