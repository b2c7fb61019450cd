"""Two projects (two key prefixes) pointed at one schedule store: the first
to store its declarations is recorded, and the other's sync, which would
deactivate them, is refused (``celery dgs sync`` exit 4, beat exit 78)
until it takes the store over. Real SQLite and Redis."""

from __future__ import annotations

import pytest
from celery import Celery

from celery_dgs.beat.scheduler import DeadlineScheduler
from tests.cli.conftest import World, make_app


def project(sqlite_url: str, redis_url: str, prefix: str, task: str) -> Celery:
    app = make_app(sqlite_url, redis_url)
    app.conf.dgs_key_prefix = prefix
    app.conf.dgs_schedules = {task: {"period": 3600}}

    def noop() -> None:
        pass

    app.task(name=task, shared=False)(noop)
    return app


def test_another_projects_sync_is_refused_until_it_takes_over(
    world: World, sqlite_url: str, redis_url: str
) -> None:
    world.app = project(sqlite_url, redis_url, "alpha", "alpha.t")
    assert world.invoke("sync").exit_code == 0
    world.app = project(sqlite_url, redis_url, "beta", "beta.t")
    refused = world.invoke("sync")
    assert refused.exit_code == 4, refused.output
    assert "the schedule store at sqlite:///" in refused.output
    assert (
        "(dgs_database_url) holds the declared schedules of another project "
        "(dgs_key_prefix 'alpha'; this app's is 'beta'): storing this app's would deactivate "
        "them. Give each project its own database; if this app replaces that project, run "
        "celery dgs sync --take-over" in " ".join(refused.output.split())
    )
    assert [s.name for s in world.store.list_schedules()] == ["alpha.t"], "nothing changed"

    # beat of the other project refuses to start the same way (EX_CONFIG)
    with pytest.raises(SystemExit) as stopped:
        DeadlineScheduler(world.app)
    assert stopped.value.code == 78
    assert [s.name for s in world.store.list_schedules()] == ["alpha.t"]

    # a dry run is refused alike, and with --take-over says what taking over would do
    assert world.invoke("sync", "--dry-run").exit_code == 4
    planned = world.invoke("sync", "--dry-run", "--take-over")
    assert planned.exit_code == 0, planned.output
    assert "deactivated: alpha.t" in planned.stdout
    assert world.store.declarations_owner() == "alpha"
    assert [s.name for s in world.store.list_schedules()] == ["alpha.t"]

    taken = world.invoke("sync", "--take-over")
    assert taken.exit_code == 0, taken.output
    assert "deactivated: alpha.t" in taken.stdout
    assert [s.name for s in world.store.list_schedules()] == ["beta.t"]
    assert world.invoke("sync").exit_code == 0, "beta's now"
