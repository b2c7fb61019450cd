"""``celery dgs simulate`` with the app's settings that change outcomes: the
retry backoff (``dgs_retry_backoff``, or a workload file's ``retry_backoff``)
sets when a failed run is retried."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from celery import Celery
from celery.bin.base import CLIContext
from click.testing import CliRunner, Result

from celery_dgs.cli import dgs as dgs_group
from celery_dgs.cli.simulate import simulate
from tests.cli.conftest import World, make_app

#: One hourly schedule whose every run fails after 10 s, for 6 hours: the
#: retries are its runs.
FAILING: dict[str, Any] = {
    "horizon": 6 * 3600,
    "warmup": 0,
    "warm_start": False,
    "slots": 1,
    "schedules": [
        {
            "task": "t.a",
            "period": 3600,
            "cooldown_duration": 0,
            "duration": 10,
            "duration_sigma": 0,
            "failure_rate": 1.0,
        }
    ],
}


def runs(result: Any) -> int:
    assert result.exit_code == 1, result.output  # always failing: ERROR
    (row,) = json.loads(result.stdout)
    return int(row["runs"])


def invoke(app: Celery, *args: str) -> Result:
    obj = CLIContext(app=app, no_color=True, workdir=None)
    return CliRunner().invoke(dgs_group, list(args), obj=obj)


def backoff_60(sqlite_url: str, redis_url: str) -> Celery:
    """An app whose retry backoff is the example project's: 60 s."""
    app = make_app(sqlite_url, redis_url)
    app.conf.dgs_retry_backoff = [60]
    return app


def write(tmp_path: Path, doc: dict[str, Any]) -> str:
    path = tmp_path / "workload.json"
    path.write_text(json.dumps(doc))
    return str(path)


def test_the_apps_retry_backoff_sets_the_retry_times(
    world: World, tmp_path: Path, sqlite_url: str, redis_url: str
) -> None:
    path = write(tmp_path, FAILING)
    args = ("simulate", "--workload", path, "--policy", "dgs", "--json")
    # Beat's default ladder: retries after 5 min, 1 h, then every 4 h.
    assert runs(world.invoke(*args)) == 4
    # A run every 70 s (10 s run, 60 s backoff).
    app = backoff_60(sqlite_url, redis_url)
    assert runs(invoke(app, *args)) == 6 * 3600 // 70 + 1
    text = invoke(app, "simulate", "--workload", path, "--policy", "dgs")
    assert ", retries after 1m; dgs order:" in text.stdout.splitlines()[0]
    app.close()


def test_a_workload_files_retry_backoff(tmp_path: Path, sqlite_url: str, redis_url: str) -> None:
    path = write(tmp_path, {**FAILING, "retry_backoff": [120, 600]})
    args = ["--workload", path, "--policy", "dgs", "--json"]
    # Without an app: 1 + 1 retry after 120 s, then every 600 s (+ 10 s runs).
    assert runs(CliRunner().invoke(simulate, args)) == 2 + (6 * 3600 - 260) // 610 + 1
    # The file's backoff wins over the app's.
    app = backoff_60(sqlite_url, redis_url)
    assert runs(invoke(app, "simulate", *args)) == 2 + (6 * 3600 - 260) // 610 + 1
    app.close()
    for bad in ([], [600, 60], "60", [-1]):
        path = write(tmp_path, {**FAILING, "retry_backoff": bad})
        result = CliRunner().invoke(simulate, ["--workload", path])
        assert result.exit_code == 2, (bad, result.output)
        assert "field 'retry_backoff'" in result.output
