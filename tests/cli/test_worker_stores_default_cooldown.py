"""A run the worker supervises before beat (or ``sync``) stored its schedule
stores the spec exactly as ``sync`` would: a periodic schedule declared without
a cooldown gets the default one there too (real Redis, real SQLite)."""

from __future__ import annotations

from datetime import timedelta

from celery_dgs.core.spec import PeriodicSpec
from celery_dgs.core.timing import with_default_cooldown
from celery_dgs.dgs import get_dgs
from celery_dgs.worker.hooks import wrap_scheduled_tasks
from tests.cli.conftest import World
from tests.cli.test_declare import declare


def test_a_run_before_any_sync_stores_the_default_cooldown(world: World) -> None:
    declare(world.app, {"t.a": {"kind": "periodic", "period": 3600}})
    dgs = get_dgs(world.app)
    assert "t.a" in wrap_scheduled_tasks(world.app, dgs)
    assert world.store.list_schedules() == []
    world.app.tasks["t.a"].apply()  # a supervised run (not a direct call)
    stored = world.store.get("t.a")
    expected = with_default_cooldown(PeriodicSpec(task="t.a", scheduling_period=timedelta(hours=1)))
    assert stored.spec == expected
    assert [r.outcome for r in world.store.runs("t.a")] == ["success"]
