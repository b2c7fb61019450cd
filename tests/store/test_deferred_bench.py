"""``python -m benchmarks.deferred_checks`` at 2,000 checks: every figure is
measured beside its baseline and printed in the table and the JSON file."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest

from benchmarks import deferred_checks
from tests.conftest import IN_CI
from tests.support.postgres import postgres_available

pytestmark = [
    pytest.mark.postgres,
    # About 20 s: run by `make bench-deferred-smoke`, not by `make test`.
    pytest.mark.skipif(
        os.environ.get("DGS_BENCH_SMOKE") != "1",
        reason="a benchmark smoke: make bench-deferred-smoke",
    ),
    pytest.mark.timeout(300),
]


@pytest.fixture
def postgres_binaries() -> None:
    """The benchmark starts its own PostgreSQL server: without the binaries it
    is skipped locally and fails under CI (``CI=true``)."""
    if postgres_available():
        return
    if IN_CI:
        pytest.fail("PostgreSQL binaries (initdb, pg_ctl, postgres) are required in CI")
    pytest.skip("PostgreSQL is not installed")


def test_small_deferred_checks_benchmark(
    postgres_binaries: None, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    out = tmp_path / "deferred.json"
    argv = [
        "--n",
        "2000",
        "--batch",
        "500",
        "--due",
        "300",
        "--window-size",
        "400",
        "--catch-up",
        "1000",
        "--repeats",
        "1",
        "--json",
        str(out),
    ]
    assert deferred_checks.main(argv) == 0
    text = capsys.readouterr().out
    assert "| DeferredChecks.at_many: 2,000 new checks into PostgreSQL, 500 per call" in text
    assert "| beat dispatch: 300 checks due at once among 2,000 pending" in text
    assert "| beat RSS with 2,000 pending checks, due later than the window" in text
    assert "| beat RSS with 2,000 pending checks, all overdue: catch-up" in text
    figures = json.loads(out.read_text())
    assert len(figures["results"]) == 4
    for result in figures["results"]:
        assert result["median"] > 0
        assert result["baseline"] > 0
    assert [r["met"] in (True, False) for r in figures["results"]] == [False, True, True, True]
    overdue = figures["memory_overdue"][0]
    assert overdue["ended"] >= 1000  # caught up: dispatched, ended, the next window read
    assert overdue["sent"] >= 1000
    assert overdue["held_after_load"] == 400  # the window, not every overdue check
    assert figures["memory_later"][0]["held"] == 0  # nothing due within the window
