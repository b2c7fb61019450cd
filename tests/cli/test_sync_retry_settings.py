"""``celery dgs sync`` with changed retry settings rewrites the failing
schedules' kept start times, as beat does when it starts, and says so."""

from __future__ import annotations

from datetime import timedelta

from celery_dgs.core.timing import RetryLadder
from tests.cli.conftest import World, make_app, now


def deploy(world: World, sqlite_url: str, redis_url: str, backoff: int) -> None:
    """The next deploy: a new process (app) with this ``dgs_retry_backoff``."""
    world.app.close()
    world.app = make_app(sqlite_url, redis_url)
    for name in ("t.flaky", "t.fine"):

        def noop() -> None:
            pass

        world.app.task(name=name, shared=False)(noop)
    world.app.conf.update(
        dgs_schedules={"t.flaky": {"period": 3600}, "t.fine": {"period": 3600}},
        dgs_retry_backoff=(backoff,),
        dgs_retry_duration_fraction=0.0,
    )


def test_sync_rewrites_the_failing_schedules_for_new_retry_settings(
    world: World, sqlite_url: str, redis_url: str
) -> None:
    deploy(world, sqlite_url, redis_url, 3600)
    first = world.invoke("sync")
    assert first.exit_code == 0, first.output
    assert "kept start times" not in first.output  # nothing failing yet: nothing to say
    # The workers' store writes with the same settings.
    world.store.adopt_retry_ladder(RetryLadder((timedelta(hours=1),), 0.0))
    ended = now() - timedelta(minutes=1)
    world.record("t.flaky", "failure", ended - timedelta(seconds=1))
    world.record("t.fine", "success", ended - timedelta(seconds=1))
    kept = world.store.kept_times("t.flaky")
    assert kept is not None
    assert kept.next_can_start_at == ended + timedelta(hours=1)
    fine = world.store.kept_times("t.fine")

    deploy(world, sqlite_url, redis_url, 30)
    changed = world.invoke("sync")

    assert changed.exit_code == 0, changed.output
    assert (
        "kept start times of 1 failing schedules rewritten for "
        "dgs_retry_backoff=(30,), dgs_retry_duration_fraction=0" in changed.output
    ), changed.output
    kept = world.store.kept_times("t.flaky")
    # The 30 s step ended a minute ago: it can start now, not in an hour.
    assert kept is not None
    assert kept.next_can_start_at is not None
    assert kept.next_can_start_at <= now()
    assert world.store.kept_times("t.fine") == fine
    again = world.invoke("sync")
    assert again.exit_code == 0, again.output
    assert "kept start times" not in again.output
