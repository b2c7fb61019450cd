"""``python -m benchmarks.deferred_vs_countdown`` at a tiny scale: real valkey, real
``celery worker`` processes, the printed table and the JSON figures.

The tiny runs start real workers (and, for the ``dgs`` kind, celery-dgs's beat)
and wait out real countdowns and check times (about 75 s for both kinds), so
they run only with ``DGS_BENCH_SMOKE=1``
(``make bench-deferred-countdown-smoke``); the other tests here run in the suite.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from benchmarks import deferred_vs_countdown as bench

pytestmark = [pytest.mark.e2e, pytest.mark.timeout(120)]
SMOKE = pytest.mark.skipif(
    os.environ.get("DGS_BENCH_SMOKE") != "1",
    reason="a benchmark smoke: make bench-deferred-countdown-smoke",
)


@SMOKE
def test_tiny_run_prints_one_row_per_kind_beside_its_baseline(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    out = tmp_path / "deferred.json"
    assert (
        bench.main(
            [
                "--kinds",
                "countdown",
                "--count",
                "200",
                "--tasks",
                "20",
                "--visibility-timeout",
                "2",
                "--scenarios",
                "below-vt,above-vt",
                "--json",
                str(out),
            ]
        )
        == 0
    )
    text = capsys.readouterr().out
    rows = [line for line in text.splitlines() if line.startswith("| [")]
    assert len(rows) == 2, text
    assert rows[0].startswith("| [countdown] worker RSS holding future tasks (prefork -c 2) ")
    assert "| 200 " in rows[0]
    assert "MiB (the same worker, 0 future tasks)" in rows[0]
    assert rows[1].startswith(
        "| [countdown] duplicate executions: countdown 6 s, visibility_timeout 2 s, 1 worker, "
        "restore scan every 1 s "
    )
    assert "runs (countdown 1 s < visibility_timeout)" in rows[1]
    assert "[dgs]" not in text

    figures = json.loads(out.read_text())
    (memory,) = figures["memory"]
    assert memory["kind"] == "countdown"
    assert memory["held"] == 200  # inspect().scheduled() of the worker
    assert memory["idle"]["children"] == memory["loaded"]["children"] == 2
    assert 0 < memory["idle"]["main_rss"] <= memory["loaded"]["main_rss"]
    below, above = figures["duplicates"]
    assert below["scenario"]["name"] == "below-vt"
    assert above["scenario"]["name"] == "above-vt"
    for figure in (below, above):
        histogram = {int(k): v for k, v in figure["histogram"].items()}
        assert sum(histogram.values()) == figure["tasks"] == 20  # every task ran
        assert sum(k * v for k, v in histogram.items()) == figure["executions"]
        assert figure["duplicated"] == sum(v for k, v in histogram.items() if k > 1)
        assert figure["extra"] == figure["executions"] - figure["tasks"]
    assert below["duplicated"] == 0  # acked 1 s after delivery, 1 s before the timeout
    assert [r["name"] for r in figures["results"]] == [
        rows[0][2:].split(" | ")[0].strip(),
        rows[1][2:].split(" | ")[0].strip(),
    ]


@SMOKE
@pytest.mark.timeout(300)
def test_tiny_run_of_celery_dgs_checks_beside_its_baseline(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    out = tmp_path / "deferred.json"
    assert (
        bench.main(
            [
                "--kinds",
                "dgs",
                "--count",
                "500",
                "--tasks",
                "20",
                "--visibility-timeout",
                "2",
                "--scenarios",
                "below-vt,two-workers",
                "--json",
                str(out),
            ]
        )
        == 0
    )
    text = capsys.readouterr().out
    rows = [line for line in text.splitlines() if line.startswith("| [")]
    assert len(rows) == 4, text
    assert rows[0].startswith("| [dgs] worker RSS with pending checks in the store (prefork -c 2) ")
    assert "MiB (the same worker, 0 pending checks)" in rows[0]
    assert rows[1].startswith(
        "| [dgs] beat RSS with pending checks due in 1 h, running while they were added "
    )
    assert rows[2].startswith(
        "| [dgs] beat RSS with pending checks due in 1 h, started with them pending "
    )
    for row in rows[:3]:
        assert "| 500 " in row
    assert "< +300 MiB" in rows[1]
    assert rows[3].startswith(
        "| [dgs] duplicate executions: checks due in 6 s, visibility_timeout 2 s, 2 workers, "
        "restore scan every 1 s "
    )
    assert "runs (checks due in 1 s < visibility_timeout)" in rows[3]
    assert "[countdown]" not in text

    figures = json.loads(out.read_text())
    (memory,) = figures["memory"]
    assert memory["kind"] == "dgs"
    assert memory["held"] == 0  # inspect().scheduled(): beat dispatches a check when due
    assert memory["beat_start_checks"] == 0  # none due within beat's window
    assert memory["idle"]["children"] == memory["loaded"]["children"] == 2
    for state in ("beat_idle", "beat_loaded", "beat_restarted"):
        assert memory[state]["main_rss"] > 0
    below, two = figures["duplicates"]
    assert (below["scenario"]["name"], two["scenario"]["name"]) == ("below-vt", "two-workers")
    for figure in (below, two):
        histogram = {int(k): v for k, v in figure["histogram"].items()}
        assert sum(histogram.values()) == figure["tasks"] == 20  # every check ran
        assert sum(k * v for k, v in histogram.items()) == figure["executions"]
        assert figure["extra"] == figure["executions"] - figure["tasks"]
        assert sum(figure["check_outcomes"].values()) == 20  # every check ended
        assert sum(figure["run_outcomes"].values()) >= 20


def test_beats_start_up_line_gives_the_checks_it_read() -> None:
    line = (
        "[2026-11-24 12:00:00,000: INFO/MainProcess] celery-dgs beat: loaded 0 schedules "
        "and 1234 deferred checks (cursor 7)"
    )
    assert bench.BEAT_LOADED in line
    assert bench.beat_checks_loaded(line) == 1234


def test_a_kind_without_a_measurement_is_refused() -> None:
    with pytest.raises(ValueError, match="scheduler kind 'sideways'"):
        bench.worker_memory("sideways", None, 1)  # type: ignore[arg-type]
    with pytest.raises(ValueError, match="scheduler kind 'sideways'"):
        bench.duplicate_executions("sideways", None, bench.scenarios(1, 1)["above-vt"])  # type: ignore[arg-type]
    assert set(bench.MEMORY_KINDS) == set(bench.DUPLICATE_KINDS) == {"countdown", "dgs"}
    with pytest.raises(SystemExit):
        bench.main(["--kinds", "sideways"])
    with pytest.raises(SystemExit):
        bench.main(["--scenarios", "above-vt,sideways"])


def test_tree_memory_sums_the_main_process_and_its_children() -> None:
    child = subprocess.Popen(
        [sys.executable, "-c", "import sys; sys.stdin.read()"], stdin=subprocess.PIPE
    )
    try:
        memory = bench.tree_memory(os.getpid())
        assert child.pid in bench.child_pids(os.getpid())
        assert memory.children >= 1
        assert memory.children_rss > 0
        assert memory.rss == memory.main_rss + memory.children_rss
        assert 0 < memory.pss <= memory.rss
    finally:
        assert child.stdin is not None
        child.stdin.close()
        child.wait(10)
