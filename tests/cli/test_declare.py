"""``celery dgs check`` and ``celery dgs sync``."""

from __future__ import annotations

from datetime import timedelta

from celery import Celery

from tests.cli.conftest import World, make_app


def declare(app: Celery, schedules: dict[str, dict[str, object]]) -> None:
    for name in ("t.a", "t.b", "t.c"):

        def noop() -> None:
            pass

        app.task(name=name, shared=False)(noop)  # shared: every later app would get it
    app.conf.dgs_schedules = schedules


GOOD = {
    "t.a": {"kind": "periodic", "period": 3600},
    "t.b@fast": {"kind": "periodic", "period": timedelta(minutes=5), "cooldown": 60},
    "t.c": {"kind": "cron", "cron": "*/5 * * * *", "within": 600},  # warning: overlaps
}


def test_check_valid_declarations_with_a_warning(world: World) -> None:
    declare(world.app, GOOD)
    result = world.invoke("check")
    assert result.exit_code == 0, result.output
    assert result.stdout.splitlines() == [
        "OK t.a (periodic)",
        "OK t.b@fast (periodic)",
        "OK t.c (cron)",
        "3 valid, 0 invalid, 2 warnings",
    ]
    assert "WARNING schedule 't.c', field 'within': 10m is longer" in result.stderr
    # A 5-minute period and the default 5-minute first retry: one failure is an ERROR.
    assert (
        "WARNING schedule 't.b@fast', field 'period': the retry backoff after a "
        "failure (5m, dgs_retry_backoff) is not shorter than its period (5m)" in result.stderr
    )


def test_check_warns_about_unsafe_celery_settings(world: World) -> None:
    declare(world.app, GOOD)
    world.app.conf.worker_prefetch_multiplier = 4
    result = world.invoke("check")
    assert result.exit_code == 0, result.output
    assert "WARNING Celery setting worker_prefetch_multiplier = 4 is unsafe" in result.stderr
    assert "use 1" in result.stderr
    world.app.conf.worker_prefetch_multiplier = 1
    assert "Celery setting" not in world.invoke("check").stderr


def test_check_reports_each_error_with_schedule_and_field(world: World) -> None:
    declare(
        world.app,
        {
            **GOOD,
            "t.a": {"kind": "periodic", "period": -5},
            "t.b@slow": {"kind": "periodic", "period": 60, "cooldown": 120},
            "t.missing": {"kind": "periodic", "period": 60},
        },
    )
    result = world.invoke("check")
    assert result.exit_code == 1
    err = result.stderr
    assert "ERROR schedule 't.a', field 'period': must be more than zero" in err
    assert "ERROR schedule 't.b@slow', field 'cooldown'" in err
    assert (
        "ERROR schedule 't.missing', field 'task': unknown task 't.missing'; is it a Celery "
        "task (@app.task below the @dgs decorator, in a module the app imports)?" in err
    )
    assert result.stdout.splitlines()[-1] == "2 valid, 3 invalid, 2 warnings"


def test_sync_prints_the_report(world: World) -> None:
    declare(world.app, GOOD)
    first = world.invoke("sync")
    assert first.exit_code == 0, first.output
    lines = first.stdout.splitlines()
    assert lines[0].startswith("synced 3 declared schedules to sqlite:///")
    assert lines[1:] == ["  inserted:    t.a, t.b@fast, t.c", "  unchanged:   0"]
    assert [s.name for s in world.store.list_schedules()] == ["t.a", "t.b@fast", "t.c"]
    second = world.invoke("sync")
    assert second.stdout.splitlines()[1:] == ["  nothing changed (3 unchanged)"]


def test_sync_dry_run_says_what_would_change_and_writes_nothing(world: World) -> None:
    declare(world.app, GOOD)
    planned = world.invoke("sync", "--dry-run")
    assert planned.exit_code == 0, planned.output
    lines = planned.stdout.splitlines()
    assert lines[0].startswith("dry run: syncing 3 declared schedules to sqlite:///")
    assert lines[0].endswith(" would change these (nothing written):")
    assert lines[1:] == ["  inserted:    t.a, t.b@fast, t.c", "  unchanged:   0"]
    assert world.store.list_schedules(include_inactive=True) == []
    assert world.store.declarations_owner() is None, "not claimed either"
    assert world.invoke("sync").stdout.splitlines()[1:] == lines[1:]


def test_sync_keeps_the_stored_version_of_an_invalid_declaration_and_fails(
    world: World, sqlite_url: str, redis_url: str
) -> None:
    declare(world.app, GOOD)
    world.invoke("sync")
    # The next deploy (a new process) declares t.a with an invalid zone.
    world.app = make_app(sqlite_url, redis_url)
    declare(world.app, {**GOOD, "t.a": {"kind": "periodic", "period": 3600, "tz": "Mars/Olympus"}})
    result = world.invoke("sync")
    assert result.exit_code == 1
    assert "ERROR schedule 't.a', field 'tz'" in result.stderr
    assert "deactivated" not in result.stdout
    stored = world.store.get("t.a")
    assert stored.active
    assert stored.spec is not None
    assert stored.spec.tz == "UTC"
    assert stored.declaration_error is not None
    assert "field 'tz'" in stored.declaration_error
