# The two commands a new user needs are `make test` and `make demo`; each builds
# its own virtual environment (.venv) from pyproject.toml first.
PYTHON ?= python3
VENV   ?= .venv
BIN    := $(VENV)/bin
STAMP  := $(VENV)/.installed

.PHONY: demo test lint typecheck pytest test-versions clean

$(STAMP): pyproject.toml
	$(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install --quiet --upgrade pip
	$(BIN)/python -m pip install --quiet -e '.[dev]'
	touch $(STAMP)

## demo: the example project's workers and beat on an embedded server; live status until Ctrl-C
demo: $(STAMP)
	$(BIN)/python -m example_project.demo

## test: lint, type-check (the package and benchmarks/), run the whole test suite (real
## Redis/Valkey, SQLite, PostgreSQL; every benchmark at a tiny size, tests/benchmarks), then
## the oldest and newest supported releases (test-versions)
test: lint typecheck pytest test-versions

## lint: ruff's checks, and its formatter's layout (ruff format --check)
LINT_PATHS := celery_dgs tests example_project benchmarks
lint: $(STAMP)
	$(BIN)/ruff check $(LINT_PATHS)
	$(BIN)/ruff format --check $(LINT_PATHS)

typecheck: $(STAMP)
	$(BIN)/mypy

## pytest runs in three processes (pytest-xdist), each test file whole in one of them, the
## longest files first (tests/support/file_order.py); most of the suite waits on servers and
## celery processes, so three keep two cores busier than two do; PYTEST_ARGS="-n 0" runs it in one
PYTEST_ARGS ?= -n 3 --dist loadfile
pytest: $(STAMP) browser redis-tls
	$(BIN)/pytest $(PYTEST_ARGS)

## test-versions: both ends of the supported ranges, each in a virtual environment of its own
## (built once, reused like .venv): Python 3.10 with the oldest supported releases (ci/oldest.txt
## pins pyproject.toml's lower bounds) in .venv-py310, Python 3.13 with the newest in .venv-py313.
## Each runs the unit tests (tests/core, tests/store on SQLite and the in-memory store,
## tests/leases) and the worker's end-to-end tests (tests/e2e/test_worker_e2e.py), in two processes;
## both ends run at once (ci/test-versions), their output printed when both have ended.
## PY310 / PY313 name the interpreters (default: python3.10 / python3.13 on PATH, else pyenv's).
find_python = $(firstword $(foreach p,python$(1) $(wildcard $(HOME)/.pyenv/versions/$(1).*/bin/python$(1)),$(shell $(p) -c '' >/dev/null 2>&1 && echo $(p))))
PY310 ?= $(call find_python,3.10)
PY313 ?= $(call find_python,3.13)
VERSION_TESTS := tests/core tests/store tests/leases tests/e2e/test_worker_e2e.py
VERSION_PYTEST := -p no:cacheprovider -q -n 2 --dist loadfile
VERSION_MARKERS := not postgres
# These two compare next_cron_time with croniter itself, and croniter before 7 finds no
# fire time for a day-of-month that never occurs OR-ed with a weekday ("0 * 31 feb 1-5");
# celery-dgs reads such expressions without croniter.
OLDEST_DESELECT := --deselect tests/core/test_properties.py::test_cron_in_utc_matches_croniter \
	--deselect tests/core/test_properties.py::test_next_cron_time_is_a_later_fire_time

.venv-py310/.installed: pyproject.toml ci/oldest.txt
	@test -n "$(PY310)" || { echo "Python 3.10 not found: set PY310=/path/to/python3.10"; exit 1; }
	$(PY310) -m venv .venv-py310
	.venv-py310/bin/python -m pip install --quiet --upgrade pip
	.venv-py310/bin/python -m pip install --quiet -c ci/oldest.txt -e '.[test]'
	touch $@

.venv-py313/.installed: pyproject.toml
	@test -n "$(PY313)" || { echo "Python 3.13 not found: set PY313=/path/to/python3.13"; exit 1; }
	$(PY313) -m venv .venv-py313
	.venv-py313/bin/python -m pip install --quiet --upgrade pip
	.venv-py313/bin/python -m pip install --quiet --upgrade --upgrade-strategy eager -e '.[test]'
	touch $@

test-versions: .venv-py310/.installed .venv-py313/.installed
	ci/test-versions "$(VERSION_PYTEST)" "$(VERSION_MARKERS)" "$(VERSION_TESTS)" "$(OLDEST_DESELECT)"

## browser: Debian's chromium and chromium-driver for the status page's browser tests (tests/web),
## installed with apt-get when missing (as root, or through sudo); without apt-get they are skipped
## locally and fail under CI=true
.PHONY: browser
CHROMIUM_PACKAGES := chromium chromium-driver
CHROMIUM_BIN ?= /usr/bin/chromium
CHROMEDRIVER_BIN ?= /usr/bin/chromedriver
browser:
	@if [ -x $(CHROMIUM_BIN) ] && [ -x $(CHROMEDRIVER_BIN) ]; then :; \
	elif command -v apt-get >/dev/null 2>&1; then \
		SUDO=$$( [ "$$(id -u)" = 0 ] || echo sudo ); \
		echo "installing $(CHROMIUM_PACKAGES) for the browser tests"; \
		$$SUDO env DEBIAN_FRONTEND=noninteractive apt-get update -q && \
		$$SUDO env DEBIAN_FRONTEND=noninteractive apt-get install -y -q --no-install-recommends \
			$(CHROMIUM_PACKAGES); \
	else echo "no apt-get: install Chromium and chromedriver for the browser tests (tests/web)"; fi

## redis-tls: Debian's redis-server, built with TLS, and openssl (a throwaway CA) for the
## rediss:// tests (tests/leases/test_connection.py), installed with apt-get when missing (as
## root, or through sudo); without them those tests are skipped locally and fail under CI=true
.PHONY: redis-tls
REDIS_TLS_PACKAGES := redis-server openssl
REDIS_TLS_BIN ?= /usr/bin/redis-server
redis-tls:
	@if [ -x $(REDIS_TLS_BIN) ] && command -v openssl >/dev/null 2>&1; then :; \
	elif command -v apt-get >/dev/null 2>&1; then \
		SUDO=$$( [ "$$(id -u)" = 0 ] || echo sudo ); \
		echo "installing $(REDIS_TLS_PACKAGES) for the rediss:// tests"; \
		$$SUDO env DEBIAN_FRONTEND=noninteractive apt-get update -q && \
		$$SUDO env DEBIAN_FRONTEND=noninteractive apt-get install -y -q --no-install-recommends \
			$(REDIS_TLS_PACKAGES); \
	else echo "no apt-get: install openssl and a redis-server built with TLS for the rediss:// tests (tests/leases)"; fi

## bench: performance benchmarks, one table (BENCH_ARGS=--quick for a short run, --full for 1M start-up)
.PHONY: bench
bench: $(STAMP)
	$(BIN)/python -m benchmarks.run $(BENCH_ARGS)

## bench-web: the status page at 1,000,000 schedules in SQLite (BENCH_ARGS="--pg": PostgreSQL): p95 of the overview, the table and a schedule's page, the overview's age
.PHONY: bench-web
bench-web: $(STAMP)
	$(BIN)/python -m benchmarks.web_table $(BENCH_ARGS)

## bench-runtime: runtime schedules on PostgreSQL: upsert_many of 1,000,000 vs raw COPY, beat start-up
## with them, a running beat's change batches and idle tick (BENCH_ARGS=--quick: 50,000)
.PHONY: bench-runtime
bench-runtime: $(STAMP)
	$(BIN)/python -m benchmarks.runtime_scale $(BENCH_ARGS)

## bench-deferred: deferred checks on PostgreSQL: at_many of 1,000,000 vs raw COPY, beat's RSS with
## them pending (due later, and all overdue) vs none, dispatch of 10,000 due vs raw send_task
## (BENCH_ARGS=--quick: 20,000 checks, 1 repeat)
.PHONY: bench-deferred
bench-deferred: $(STAMP)
	nice -n 10 $(BIN)/python -m benchmarks.deferred_checks $(BENCH_ARGS)

## bench-deferred-smoke: that benchmark at 2,000 checks, its table and JSON checked by
## tests/store/test_deferred_bench.py (about 20 s, so not part of `make test`)
.PHONY: bench-deferred-smoke
bench-deferred-smoke: $(STAMP)
	DGS_BENCH_SMOKE=1 $(BIN)/pytest -q tests/store/test_deferred_bench.py

## bench-deferred-countdown: Celery countdown tasks vs celery-dgs deferred checks: worker RSS with 100,000
## of them vs none, and runs more than once when the delay exceeds the Redis visibility_timeout (BENCH_ARGS=--count N)
.PHONY: bench-deferred-countdown bench-deferred-countdown-smoke
bench-deferred-countdown: $(STAMP)
	$(BIN)/python -m benchmarks.deferred_vs_countdown $(BENCH_ARGS)

## bench-deferred-countdown-smoke: that benchmark at a tiny scale (200 tasks or 500 checks, two duplicate
## rounds per kind), checked by tests/e2e/test_countdown_bench_e2e.py (about 75 s, so not part of `make test`)
bench-deferred-countdown-smoke: $(STAMP)
	DGS_BENCH_SMOKE=1 $(BIN)/pytest -q tests/e2e/test_countdown_bench_e2e.py

## bench-quality: scheduling quality of dgs vs Celery beat on simulated workloads
.PHONY: bench-quality
bench-quality: $(STAMP)
	$(BIN)/python -m benchmarks.quality $(BENCH_ARGS)

## bench-revisit: adaptive revisit vs fixed periods on a synthetic upstream (BENCH_ARGS=--quick: seconds)
.PHONY: bench-revisit
bench-revisit: $(STAMP)
	$(BIN)/python -m benchmarks.revisit $(BENCH_ARGS)

## sim-vs-real: the simulator against a real beat and workers for SIM_VS_REAL_SECONDS (1200); figures in benchmarks/sim-vs-real-latest.json
.PHONY: sim-vs-real
SIM_VS_REAL_SECONDS ?= 1200
sim-vs-real: $(STAMP)
	DGS_SIM_VS_REAL_S=$(SIM_VS_REAL_SECONDS) DGS_SIM_VS_REAL_JSON=benchmarks/sim-vs-real-latest.json \
		$(BIN)/pytest -p no:cacheprovider -n 0 -q -s tests/e2e/test_sim_vs_real_e2e.py

## soak: the fault suite's soak mode: random faults for SOAK_SECONDS (120), then the history checker
.PHONY: soak
SOAK_SECONDS ?= 120
soak: $(STAMP)
	SOAK_SECONDS=$(SOAK_SECONDS) $(BIN)/python -m tests.faults.soak $(SOAK_ARGS)

clean:
	rm -rf $(VENV) .venv-py310 .venv-py313 .pytest_cache .mypy_cache .ruff_cache
