"""Celery's own ``beat_schedule``, which the deadline scheduler does not run:
``celery dgs check`` names each entry with the ``dgs_schedules`` entry that
declares it (celery_dgs/beat_schedule_entries.py); beat logs the same line
at its start (tests/e2e/test_startup_e2e.py)."""

from __future__ import annotations

import json
from datetime import timedelta
from types import SimpleNamespace

from celery.schedules import crontab, schedule

from celery_dgs.beat_schedule_entries import beat_schedule_warning, schedule_fields
from tests.cli.conftest import World, make_app


def warnings_counted(output: str) -> int:
    """The number of warnings ``check``'s summary line counts."""
    summary = output.strip().splitlines()[-1]  # "N valid, N invalid, N warning(s)..."
    return int(summary.split(", ")[2].split()[0])


def test_check_names_each_entry_with_its_declaration(world: World) -> None:
    result = world.invoke("check")
    assert "beat_schedule" not in result.output
    before = warnings_counted(result.stdout)
    world.app.conf.beat_schedule = {
        "every-10s": {"task": "proj.sync", "schedule": 10.0, "args": ("eu",)},
        "nightly": {"task": "proj.backup", "schedule": crontab(minute=0, hour=3)},
    }
    result = world.invoke("check")
    assert result.exit_code == 0, result.output  # a warning, not an invalid declaration
    [line] = [x for x in result.stderr.splitlines() if "beat_schedule" in x]
    assert line == (
        "WARNING beat_schedule has 2 entries that celery-dgs does not run: declare each task "
        "in dgs_schedules (or with @dgs.periodic / @dgs.cron), e.g. "
        """'every-10s' -> "proj.sync": {"kind": "periodic", "period": 10.0, "args": ["eu"]}; """
        """'nightly' -> "proj.backup": {"kind": "cron", "cron": "0 3 * * *", "within": 86400}"""
    )
    assert warnings_counted(result.stdout) == before + 1


#: A schedule of another kind (as Celery's ``solar``): no period, no expression.
SUNSET = SimpleNamespace(is_due=lambda last_run_at: (False, 60.0))


def test_each_kind_of_schedule_and_what_has_no_equivalent() -> None:
    assert schedule_fields(timedelta(minutes=5)) == {"kind": "periodic", "period": 300.0}
    assert schedule_fields(schedule(timedelta(hours=1))) == {"kind": "periodic", "period": 3600.0}
    assert schedule_fields(crontab(minute="*/15", day_of_week="mon-fri")) == {
        "kind": "cron",
        "cron": "*/15 * * * mon-fri",
    }
    assert schedule_fields(SUNSET) is None
    assert schedule_fields(0) is None
    conf = SimpleNamespace(
        timezone="Europe/Paris",
        beat_schedule={f"e{i}": {"task": "t", "schedule": crontab(minute=i)} for i in range(7)}
        | {"sun": {"task": "t.sun", "schedule": SUNSET}, "bad": {}},
    )
    text = beat_schedule_warning(conf)
    assert text is not None
    assert text.startswith("beat_schedule has 9 entries")
    assert """'bad' (no task)""" in text
    assert (
        """'e0' -> "t": {"kind": "cron", "cron": "0 * * * *", "tz": "Europe/Paris", """
        """"within": 3600}"""
    ) in text
    assert text.endswith("; and 4 more")  # five shown
    assert beat_schedule_warning(SimpleNamespace(beat_schedule={})) is None


def test_the_suggestion_is_a_valid_declaration_and_declared_tasks_are_not_named(
    world: World, sqlite_url: str, redis_url: str
) -> None:
    """A crontab's suggestion carries the within a cron schedule requires and
    the entry's queue as its pool: pasted into dgs_schedules it is valid,
    and the entry is not named again once its task is declared."""
    legacy = {
        "nightly": {
            "task": "proj.backup",
            "schedule": crontab(minute=0, hour=3),
            "options": {"queue": "slow"},
        }
    }

    def backup() -> None:
        pass

    world.app.conf.beat_schedule = legacy
    world.app.task(name="proj.backup", shared=False)(backup)
    line = next(x for x in world.invoke("check").stderr.splitlines() if "beat_schedule" in x)
    suggested = json.loads("{" + line.split(" -> ", 1)[1] + "}")
    assert suggested == {
        "proj.backup": {"kind": "cron", "cron": "0 3 * * *", "within": 86400, "pool": "slow"}
    }
    world.app = make_app(sqlite_url, redis_url)  # the next deploy, with the suggestion
    world.app.conf.beat_schedule = legacy
    world.app.conf.dgs_schedules = suggested
    world.app.task(name="proj.backup", shared=False)(backup)
    result = world.invoke("check")
    assert result.exit_code == 0, result.output
    assert "beat_schedule" not in result.output, "its task is declared now"
    assert "OK proj.backup (cron)" in result.stdout
