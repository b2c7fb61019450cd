"""A broken edit of a live schedule's declaration: the last valid stored version
keeps being served (beat's load, the worker's spec), and ``status``, ``--json``
and the metrics show it in ERROR ``declaration_invalid`` naming the field until
the declaration is fixed."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import uuid
from datetime import timedelta
from pathlib import Path
from typing import Any

from celery import Celery

from celery_dgs.beat.scheduler import DeadlineScheduler
from celery_dgs.core.clock import SystemClock
from celery_dgs.core.spec import PeriodicSpec
from celery_dgs.core.timing import with_default_cooldown
from celery_dgs.dgs import get_dgs
from celery_dgs.metrics import EngineCollector
from celery_dgs.runtime import runtime_for
from celery_dgs.worker.hooks import served_spec, wrap_scheduled_tasks
from tests.cli.conftest import World, make_app, now

ROOT = Path(__file__).resolve().parents[2]

GOOD = {"t.a": {"period": 3600}, "t.b": {"period": 3600}}
BROKEN = {"t.a": {"period": 0}, "t.b": {"period": 3600}}


def declare(app: Celery, schedules: dict[str, dict[str, Any]]) -> None:
    for name in ("t.a", "t.b"):

        def noop() -> None:
            pass

        app.task(name=name, shared=False)(noop)
    app.conf.dgs_schedules = schedules


def deploy(world: World, sqlite_url: str, redis_url: str, schedules: dict[str, Any]) -> None:
    """The next deploy: a new process (app) with these declarations."""
    world.app.close()
    world.app = make_app(sqlite_url, redis_url)
    declare(world.app, schedules)


def beat_tracked(app: Celery) -> Any:
    """Start beat's scheduler as `celery beat` does (sync, then load the index)."""
    sched = DeadlineScheduler(app)
    try:
        assert sched.engine is not None
        store = runtime_for(app, sched.dgs.settings).store
        families = EngineCollector(sched.engine, store, SystemClock()).collect()
        conditions = {
            sample.labels["schedule"]: (sample.labels["reason"], sample.value)
            for family in families
            if family.name == "dgs_schedule_condition"
            for sample in family.samples
        }
        return dict(sched.engine.state.tracked), conditions
    finally:
        sched.close()


def test_a_broken_edit_keeps_the_schedule_served_and_status_shows_why(
    world: World, sqlite_url: str, redis_url: str
) -> None:
    declare(world.app, GOOD)
    assert world.invoke("sync").exit_code == 0
    world.record("t.a", "success", now() - timedelta(minutes=5))
    world.record("t.b", "success", now() - timedelta(minutes=5))
    assert world.invoke("status").exit_code == 0

    deploy(world, sqlite_url, redis_url, BROKEN)
    synced = world.invoke("sync")
    assert synced.exit_code == 1
    assert "ERROR schedule 't.a', field 'period': must be more than zero" in (synced.stderr)
    assert "deactivated" not in synced.stdout
    assert (
        "  kept:        t.a (declaration invalid: its last valid stored version is still served)"
        in synced.stdout.splitlines()
    )
    stored = world.store.get("t.a")
    assert stored.active
    # the last valid declaration (no cooldown given: the default cooldown applies)
    expected = with_default_cooldown(PeriodicSpec(task="t.a", scheduling_period=timedelta(hours=1)))
    assert stored.spec == expected
    assert stored.declaration_error is not None
    assert "'period'" in (stored.declaration_error)

    # Beat, started with the broken declaration, still loads (serves) it.
    tracked, conditions = beat_tracked(world.app)
    assert tracked["t.a"].spec == stored.spec
    assert conditions["t.a"] == ("declaration_invalid", 2.0)
    assert conditions["t.b"] == ("ok", 0.0)

    # A worker of the broken deploy supervises runs of the served version.
    dgs = get_dgs(world.app)
    assert "t.a" in wrap_scheduled_tasks(world.app, dgs)
    assert served_spec(runtime_for(world.app, dgs.settings), "t.a") == stored.spec

    result = world.invoke("status")
    assert result.exit_code == 1, result.output
    assert "2 schedules (1 ERROR, 0 WARNING, 1 OK)" in result.stdout
    row = next(line for line in result.stdout.splitlines() if " t.a " in line)
    assert row.split()[:3] == ["ERROR", "t.a", "declaration_invalid"]
    assert "field 'period'" in result.stdout
    assert "the last valid stored version is served, its condition OK ok" in result.stdout

    doc = json.loads(world.invoke("status", "--json").stdout)
    by_name = {r["name"]: r for r in doc["schedules"]}
    assert by_name["t.a"]["condition"] == "ERROR"
    assert by_name["t.a"]["reason"] == "declaration_invalid"
    assert "field 'period'" in by_name["t.a"]["message"]
    assert by_name["t.a"]["should_start_by"] is not None  # the served version's times

    deploy(world, sqlite_url, redis_url, GOOD)
    fixed = world.invoke("sync")
    assert fixed.exit_code == 0, fixed.output
    assert "  updated:     t.a" in fixed.stdout.splitlines()
    assert world.store.get("t.a").declaration_error is None
    assert world.invoke("status").exit_code == 0


def test_a_new_schedule_with_an_invalid_declaration_is_named_and_not_stored(
    world: World, sqlite_url: str, redis_url: str
) -> None:
    declare(world.app, {"t.a": {"period": 3600}, "t.b": {"perod": 60}})
    result = world.invoke("sync")
    assert result.exit_code == 1
    assert (
        "ERROR schedule 't.b', field 'perod': is not a field of a periodic schedule; "
        "did you mean 'period'?" in result.stderr
    )
    assert "  skipped:     t.b (declaration invalid: not stored)" in result.stdout.splitlines()
    assert [s.name for s in world.store.list_schedules(include_inactive=True)] == ["t.a"]
    # The store cannot count it: status names it from the app's declarations.
    status = world.invoke("status")
    assert status.exit_code == 1, status.output
    assert "1 schedule (0 ERROR, 0 WARNING, 1 OK)" in status.stdout
    assert (
        "ERROR 1 declaration is invalid and not stored (beat skips them): t.b (perod: is not "
        "a field of a periodic schedule; did you mean 'period'?); celery dgs check lists "
        "every one" in status.stdout.splitlines()
    )
    doc = json.loads(world.invoke("status", "--json").stdout)
    assert [i["name"] for i in doc["invalid_declarations"]] == ["t.b"]
    assert doc["invalid_declarations"][0]["field"] == "perod"
    deploy(world, sqlite_url, redis_url, {"t.a": {"period": 3600}, "t.b": {"period": 60}})
    assert world.invoke("status").exit_code == 0, "fixed: nothing skipped"


def decl_env(sqlite_url: str, redis_url: str) -> dict[str, str]:
    """The environment of a ``tests.cli.decl_proj`` process on these servers,
    under a key prefix of its own."""
    return {
        **os.environ,
        "PYTHONPATH": str(ROOT),
        "DECL_REDIS_URL": redis_url,
        "DECL_DATABASE_URL": sqlite_url,
        "DECL_PREFIX": f"decl{uuid.uuid4().hex[:6]}",
    }


def run_dgs(env: dict[str, str], *args: str) -> subprocess.CompletedProcess[str]:
    script = Path(sys.executable).with_name("celery")
    celery = [str(script)] if script.exists() else [sys.executable, "-m", "celery"]
    return subprocess.run(
        [*celery, "-A", "tests.cli.decl_proj", "dgs", *args],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
        timeout=60,
    )


def test_status_in_another_process_shows_the_invalid_declaration(
    sqlite_url: str, redis_url: str
) -> None:
    env = decl_env(sqlite_url, redis_url)
    good = run_dgs({**env, "DECL_PERIOD": "3600"}, "sync")
    assert good.returncode == 0, good.stderr
    assert "  inserted:    decl.a" in good.stdout.splitlines()

    broken = run_dgs({**env, "DECL_PERIOD": "0"}, "sync")
    assert broken.returncode == 1, broken.stderr
    assert "  kept:        decl.a (declaration invalid" in broken.stdout

    status = run_dgs({**env, "DECL_PERIOD": "0"}, "status", "--json")
    assert status.returncode == 1, status.stderr
    [row] = json.loads(status.stdout)["schedules"]
    assert (row["name"], row["condition"], row["reason"]) == (
        "decl.a",
        "ERROR",
        "declaration_invalid",
    )
    assert "field 'period': must be more than zero" in row["message"]
    text = run_dgs({**env, "DECL_PERIOD": "0"}, "status")
    assert text.returncode == 1
    assert "declaration_invalid" in text.stdout

    fixed = run_dgs({**env, "DECL_PERIOD": "3600"}, "sync")
    assert fixed.returncode == 0, fixed.stderr
    after = run_dgs({**env, "DECL_PERIOD": "3600"}, "status", "--json")
    assert after.returncode == 0, after.stderr
    assert json.loads(after.stdout)["schedules"][0]["reason"] == "ok"


def test_check_in_another_process_prints_each_invalid_declaration_once(
    sqlite_url: str, redis_url: str
) -> None:
    """The declaration's error is shown by ``check`` alone, not also when the
    project is imported (before Celery has set up logging)."""
    env = {**decl_env(sqlite_url, redis_url), "DECL_PERIOD": "0"}
    result = run_dgs(env, "check")
    assert result.returncode == 1, result.stderr
    lines = [line for line in result.stderr.splitlines() if "must be more than zero" in line]
    assert lines == ["ERROR schedule 'decl.a', field 'period': must be more than zero, got 0s"]


def test_an_invalid_deferred_declaration_is_checks_error_and_the_project_still_imports(
    sqlite_url: str, redis_url: str
) -> None:
    env = {**decl_env(sqlite_url, redis_url), "DECL_PERIOD": "3600", "DECL_CHECK_WITHIN": "0"}
    result = run_dgs(env, "check")
    assert result.returncode == 1, result.stderr
    assert "Traceback" not in result.stderr
    lines = [line for line in result.stderr.splitlines() if "decl.check" in line]
    assert lines == [
        "ERROR deferred check task 'decl.check', field 'within': must be more than zero, got 0s"
    ]
    assert result.stdout.splitlines()[-1] == "1 valid, 1 invalid, 0 warnings"
    good = run_dgs({**env, "DECL_CHECK_WITHIN": "60"}, "check")
    assert good.returncode == 0, good.stderr
    assert good.stdout.splitlines()[-1] == "1 valid, 0 invalid, 0 warnings, 1 deferred check task"
