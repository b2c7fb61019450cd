"""``celery dgs check`` names schedules that can never be served, that re-run at
once (no cooldown), and that one failure puts in ERROR (retry backoff)."""

from __future__ import annotations

import time

from click.testing import CliRunner

from tests.cli.conftest import World
from tests.cli.test_declare import declare


def test_check_names_a_cron_whose_times_fall_in_its_blackout(world: World) -> None:
    # The demo's former cron: every 5 minutes, 4 minutes to finish, blacked out
    # over lunch in New York: in ERROR about 56 minutes a day at any capacity.
    declare(
        world.app,
        {
            "t.c": {
                "kind": "cron",
                "cron": "*/5 * * * *",
                "within": 240,
                "tz": "America/New_York",
                "blackouts": [("12:00", "13:00")],
            }
        },
    )
    world.app.conf.dgs_retry_backoff = [60]
    result = world.invoke("check")
    assert result.exit_code == 0, result.output
    assert result.stdout.splitlines()[-1] == "1 valid, 0 invalid, 1 warning"
    (line,) = [x for x in result.stderr.splitlines() if "can never be served" in x]
    assert line.startswith(
        "WARNING schedule 't.c' can never be served (cron_times_in_blackout): "
        "12 of its 288 cron times a day fall in or just before a blackout "
        "(12:00-13:00 America/New_York)"
    )
    assert line.endswith("in ERROR about 56 min a day at any worker count"), line


def test_check_names_periodic_schedules_without_cooldown(world: World) -> None:
    world.app.conf.dgs_default_cooldown_fraction = 0
    declare(
        world.app,
        {
            "t.a": {"kind": "periodic", "period": 3600},
            "t.b": {"kind": "periodic", "period": 3600, "cooldown": 60},
        },
    )
    result = world.invoke("check")
    assert result.exit_code == 0, result.output
    assert "WARNING schedule 't.a', field 'cooldown': no cooldown" in result.stderr
    assert "'t.b'" not in result.stderr
    assert result.stdout.splitlines()[-1] == "2 valid, 0 invalid, 1 warning"


def test_check_of_the_example_project_is_clean() -> None:
    from celery.bin.celery import celery

    started = time.monotonic()
    result = CliRunner().invoke(celery, ["-A", "example_project.proj", "dgs", "check"])
    assert result.exit_code == 0, result.output
    lines = result.stdout.splitlines()
    assert lines[-1] == "6 valid, 0 invalid, 0 warnings, 1 deferred check task"
    assert "OK example.check_order (deferred checks)" in lines
    assert time.monotonic() - started < 30


def test_check_warns_about_a_steal_delay_not_longer_than_the_ping_interval(
    world: World,
) -> None:
    declare(world.app, {"t.a": {"kind": "periodic", "period": 3600, "cooldown": 600}})
    world.app.conf.dgs_retry_backoff = [60]
    world.app.conf.worker_prefetch_multiplier = 1
    world.app.conf.dgs_steal_delay = 1.0  # == dgs_ping_interval of the test app
    result = world.invoke("check")
    assert result.exit_code == 0, result.output
    assert result.stdout.splitlines()[-1] == "1 valid, 0 invalid, 1 warning"
    assert "WARNING dgs_steal_delay (1s) is not longer than dgs_ping_interval (1s)" in result.stderr
