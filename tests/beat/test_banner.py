"""The scheduler's line in Celery's beat banner. Celery prints the banner from
a scheduler it builds with ``lazy=True`` and never sets up, before the one
that runs loads the store: that line must not claim 0 schedules. A loaded
scheduler names what it loaded. Real Redis and SQLite."""

from __future__ import annotations

from datetime import datetime, timedelta, timezone
from pathlib import Path

import redis
from celery import Celery

from celery_dgs.beat.engine import BeatEngine
from celery_dgs.beat.scheduler import DeadlineScheduler
from celery_dgs.core.clock import SystemClock
from celery_dgs.core.spec import CheckSpec, PeriodicSpec
from celery_dgs.dgs import DGS
from celery_dgs.dispatches import DispatchRecords
from celery_dgs.keys import KeySpace
from celery_dgs.leases.redis import RedisLeases
from celery_dgs.registry import WorkerRegistry
from celery_dgs.settings import DgsSettings
from celery_dgs.store.check_types import NewCheck
from tests.beat.conftest import Recorder, open_store

KEYS = KeySpace("banner")


def lazy_scheduler() -> DeadlineScheduler:
    app = Celery("banner", broker="redis://127.0.0.1:1/0", set_as_current=False)
    app.conf.dgs_database_url = "sqlite:///:memory:"
    DGS(app, install_worker_hooks=False)
    return DeadlineScheduler(app, lazy=True)


def test_the_banner_of_a_scheduler_not_set_up_says_the_count_follows() -> None:
    info = lazy_scheduler().info
    assert " 0 schedules" not in info
    assert info == (
        "celery-dgs deadline scheduler: loads the stored schedules after this banner "
        "and logs how many at INFO (-l info)"
    )


def test_a_loaded_scheduler_names_the_schedules_and_checks_it_loaded(
    client: redis.Redis, tmp_path: Path
) -> None:
    store = open_store(f"sqlite:///{tmp_path / 'dgs.sqlite3'}", 1, 2)
    now = datetime.now(timezone.utc)
    try:
        store.upsert_runtime(
            [
                PeriodicSpec(task="t.s", configuration=c, scheduling_period=timedelta(hours=1))
                for c in "abc"
            ],
            now,
        )
        store.add_checks([NewCheck(CheckSpec(task="t.check", key="k"), now)], now)
        engine = BeatEngine(
            store=store,
            leases=RedisLeases(client, KEYS, ping_timeout=2.0, steal_delay=1.0),
            registry=WorkerRegistry(client, KEYS, ttl=30),
            dispatches=DispatchRecords(client, KEYS),
            publish=Recorder(),
            settings=DgsSettings(capacity=1),
            clock=SystemClock(),
        )
        engine.load()
        sched = lazy_scheduler()
        sched.engine = engine
        assert sched.info == (
            "celery-dgs deadline scheduler: 5 schedules and 1 deferred checks loaded"
        )
    finally:
        store.close()
