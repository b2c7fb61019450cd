"""Every benchmark runs, at a tiny size, as ``make bench*`` runs it:
``python -m benchmarks.<name>`` in a process of its own, on the real servers
it starts itself (valkey, PostgreSQL, celery workers and beat). Each must exit
with status 0 and print its table; the figures are not checked (a few
seconds of work on a shared machine say nothing), only that the benchmark
still runs against the code it measures. ``make typecheck`` checks the types
of its wrappers of the store and the Redis parts.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path

import pytest

from tests.support.postgres import postgres_available

ROOT = Path(__file__).resolve().parents[2]
BENCHMARKS = ROOT / "benchmarks"
IN_CI = os.environ.get("CI", "").lower() in {"1", "true", "yes"}

pytestmark = pytest.mark.timeout(300)


@dataclass(frozen=True)
class Smoke:
    args: tuple[str, ...]
    #: A line the benchmark prints once it has measured (a row of its table).
    prints: str
    postgres: bool = False
    #: The JSON file it writes, under the test's directory (None: it writes none).
    writes: str | None = None


#: Each benchmark with a ``__main__``, at its smallest useful size.
SMOKES = {
    # decision, engine (idle/busy tick, dispatch) and start-up steps: `make bench`
    "run": Smoke(
        ("--smoke", "--json", "{tmp}/run.json"),
        "| dispatch: BeatEngine rounds, 200 due, index of 2,000",
        writes="run.json",
    ),
    "bench_worker_overhead": Smoke(
        ("--runs", "20"), "outcomes of the measured runs: {'success': 20}"
    ),
    "deferred_checks": Smoke(
        (
            *("--n", "300", "--batch", "100", "--due", "50", "--window-size", "100"),
            *("--catch-up", "150", "--repeats", "1", "--json", "{tmp}/deferred.json"),
        ),
        "| beat dispatch: 50 checks due at once among 300 pending",
        postgres=True,
        writes="deferred.json",
    ),
    "beat_window": Smoke(
        (
            *("--pg-schedules", "2000", "--sqlite-schedules", "2000", "--batch", "1000"),
            *("--window", "100", "--mix-window", "200", "--whole-max", "2000"),
        ),
        "| SQLite 2,000 seed 001, window 200: first dispatch",
        postgres=True,
    ),
    "blackout_start": Smoke(
        ("--schedules", "2000", "--window", "100"),
        "| SQLite, 2,000 in a blackout begun since, window 100: longest tick",
        postgres=True,
    ),
    # The celery-dgs kind (worker and beat memory, duplicate runs); the countdown
    # kind runs plain Celery only, in the same harness.
    "deferred_vs_countdown": Smoke(
        (
            *("--kinds", "dgs", "--count", "20", "--tasks", "3"),
            *("--visibility-timeout", "1", "--scenarios", "below-vt", "--json", "{tmp}/dvc.json"),
        ),
        "| [dgs] duplicate executions: checks due in 0.5 s, visibility_timeout 1 s",
        writes="dvc.json",
    ),
    "certainty_cost": Smoke(("--sizes", "2000", "--repeats", "1"), "| 2,000 | "),
    "busy_pool": Smoke(("--backlogs", "1500", "--other", "100", "--rounds", "5"), "| 1,500 | "),
    "fleet_scale": Smoke(
        (
            *("--pg-schedules", "2000", "--sqlite-schedules", "1000", "--batch", "500"),
            *("--requests", "3", "--json-seconds", "5", "--decision-sizes", "2000"),
            *("--window", "1000", "--quick"),
        ),
        "| PostgreSQL seed 001: `celery dgs status` |",
        postgres=True,
    ),
    "lookahead": Smoke(
        (
            *("--loads", "0.9", "--seeds", "1", "--policies", "dgs", "--schedules", "50"),
            *("--slots", "4", "--days", "0.5", "--json", "{tmp}/lookahead.json"),
        ),
        "load  0.9 seed 1: ERROR",
        writes="lookahead.json",
    ),
    "overload": Smoke(
        ("--labels", "mixed 2.0", "--seeds", "1", "--floors", "5"),
        "mixed 2.0  seed 1  fewest floor 5",
    ),
    "quality": Smoke(
        (
            *("--schedules", "20", "--slots", "2", "--slots-per-worker", "1", "--seeds", "1"),
            *("--policies", "dgs", "--json", "{tmp}/quality.json"),
        ),
        "seed 1 prio onset: dgs top class",
        writes="quality.json",
    ),
    # prefork: the worker's CPU per run is its pool processes' too
    "refill": Smoke(
        ("--smoke", "--pool", "prefork"), "| runs/s, 4 prefork slots, 50 ms runs, 40 all eligible |"
    ),
    "run_records": Smoke(
        ("--runs", "20", "--repeats", "1", "--fleet", "20"),
        "| SQLite file | a run (the three calls) |",
    ),
    "revisit": Smoke(
        (
            *("--quick", "--sources", "200", "--days", "10", "--warmup-days", "3"),
            *("--json", "{tmp}/revisit.json"),
        ),
        "| 1.5d | adaptive |",
        writes="revisit.json",
    ),
    "runtime_scale": Smoke(
        ("--n", "2000", "--batch", "200", "--repeats", "1", "--json", "{tmp}/runtime.json"),
        "| running beat: change batch of 200 applied (refresh)",
        postgres=True,
        writes="runtime.json",
    ),
    "status_scale": Smoke(
        ("--schedules", "1000", "--project-max", "1000"),
        "| celery dgs status --project --limit 100 |",
    ),
    "condition_tally": Smoke(
        ("--schedules", "2000", "--repeats", "2"),
        "| PostgreSQL | 2,000 |",
        postgres=True,
    ),
    "status_filters": Smoke(
        ("--schedules", "2000", "--tasks", "10", "--pools", "3"),
        "a word in all 10 tasks' names, indexed: 2,000 selected",
    ),
    "window_quality": Smoke(
        ("--quick", "--labels", "load 0.9", "--mixes", "synthetic"),
        "| synthetic load 0.9, window 15 | deadline |",
    ),
    "window_late": Smoke(
        ("--schedules", "60", "--slots", "2", "--labels", "load 0.9", "--mixes", "synthetic"),
        "| synthetic load 0.9, window 3, late 3 | + late, E 60 s |",
    ),
    "web_table": Smoke(
        ("--schedules", "600", "--requests", "12"),
        "GET /schedules at 600 schedules, ",
    ),
}

#: Entry points that only another benchmark starts, as its child process, and
#: the benchmark whose smoke runs them.
CHILDREN = {"startup": "run"}


def _has_main(path: Path) -> bool:
    return 'if __name__ == "__main__":' in path.read_text()


def test_every_benchmark_has_a_smoke_run() -> None:
    with_main = {p.stem for p in BENCHMARKS.glob("*.py") if _has_main(p)}
    assert with_main == set(SMOKES) | set(CHILDREN)
    assert set(CHILDREN.values()) <= set(SMOKES)
    assert SECOND_FILE.issubset(SMOKES)


#: The smokes run by ``test_bench_smoke_more.py``: the make test's processes
#: take each file whole, so the longest smokes are split over two files.
SECOND_FILE = frozenset(
    {
        "bench_worker_overhead",
        "deferred_vs_countdown",
        "fleet_scale",
        "lookahead",
        "quality",
        "revisit",
        "runtime_scale",
        "web_table",
        "window_late",
    }
)


@pytest.mark.parametrize("name", sorted(set(SMOKES) - SECOND_FILE))
def test_the_benchmark_runs_at_a_tiny_size(name: str, tmp_path: Path) -> None:
    run_smoke(name, tmp_path)


def run_smoke(name: str, tmp_path: Path) -> None:
    """``python -m benchmarks.NAME`` with its smoke arguments: exit status 0,
    its table's line printed, its JSON file written."""
    smoke = SMOKES[name]
    if smoke.postgres and not postgres_available():
        if IN_CI:
            pytest.fail("PostgreSQL binaries (initdb, pg_ctl, postgres) are required in CI")
        pytest.skip("PostgreSQL binaries not found")
    args = [a.format(tmp=tmp_path) for a in smoke.args]
    done = subprocess.run(
        [sys.executable, "-m", f"benchmarks.{name}", *args],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=240,
        check=False,
    )
    output = f"{done.stdout}\n{done.stderr}"
    assert done.returncode == 0, output[-6000:]
    assert smoke.prints in done.stdout, output[-6000:]
    if smoke.writes is not None:
        assert json.loads((tmp_path / smoke.writes).read_text())
