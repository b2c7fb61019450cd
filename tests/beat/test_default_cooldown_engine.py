"""Beat with free slots does not re-run a periodic schedule declared without a
cooldown before its default cooldown (``dgs_default_cooldown_fraction`` of the
time from its last good end to its should_start_by) has passed; one declared
with ``cooldown=0`` is re-sent at once (seed 000's rule). Real SQLite store,
real Redis registry, leases and dispatch records, and a fake clock; specs
come from ``DGS.all_declarations`` as in beat."""

from __future__ import annotations

import uuid
from collections.abc import Sequence
from datetime import datetime, timedelta, timezone

import redis
from celery import Celery

from celery_dgs.beat.engine import BeatEngine, DispatchOrder
from celery_dgs.core.clock import FakeClock
from celery_dgs.dgs import DGS
from celery_dgs.dispatches import DispatchRecords
from celery_dgs.leases.redis import RedisLeases
from celery_dgs.registry import WorkerInfo, WorkerRegistry
from celery_dgs.store.sql import SqlScheduleStore

NOW = datetime(2026, 3, 2, 10, 0, tzinfo=timezone.utc)


def test_free_slots_do_not_rerun_before_the_default_cooldown(
    sqlite_url: str, redis_client: redis.Redis
) -> None:
    app = Celery("cooldown-engine", broker="memory://", set_as_current=False)
    app.conf.dgs_key_prefix = f"cd{uuid.uuid4().hex[:6]}"
    for name in ("t.polite", "t.eager"):
        app.task(name=name, shared=False)(_noop)
    app.conf.dgs_schedules = {
        # Default cooldown 0.5: half the 580 s from its end (NOW - 90 s) to its
        # should_start_by (start + 600 s - 10 s of run time): eligible at NOW + 200 s.
        "t.polite": {"kind": "periodic", "period": 600},
        "t.eager": {"kind": "periodic", "period": 600, "cooldown": 0},
    }
    dgs = DGS(app, install_worker_hooks=False)
    settings = dgs.settings
    store = SqlScheduleStore.open(sqlite_url)
    store.sync(list(dgs.all_declarations().specs.values()), NOW - timedelta(hours=1))
    for name in ("t.polite", "t.eager"):  # a good 10-second run ended 90 s ago
        run_id = uuid.uuid4().hex
        store.record_run_start(
            schedule=name,
            run_id=run_id,
            dispatch_id=None,
            owner_node="n1",
            owner_name="celery@n1",
            owner_tag=run_id,
            token=1,
            started_at=NOW - timedelta(seconds=100),
        )
        store.record_run_end(run_id=run_id, outcome="success", ended_at=NOW - timedelta(seconds=90))
    keys = settings.keyspace()
    registry = WorkerRegistry(redis_client, keys, ttl=600)
    registry.register(
        WorkerInfo(name="celery@n1", node="n1", queues=("celery",), slots=4, pool="prefork", pid=1)
    )
    published: list[str] = []

    def publish(orders: Sequence[DispatchOrder]) -> list[DispatchOrder]:
        published.extend(o.schedule for o in orders)
        return []

    clock = FakeClock(NOW)
    engine = BeatEngine(
        store=store,
        leases=RedisLeases(redis_client, keys, ping_timeout=90, steal_delay=60),
        registry=registry,
        dispatches=DispatchRecords(redis_client, keys),
        publish=publish,
        settings=settings,
        clock=clock,
    )
    try:
        engine.load()
        engine.tick()
        assert published == ["t.eager"]  # 4 free slots: only the one without a cooldown
        clock.set(NOW + timedelta(seconds=199))
        engine.tick()
        assert published == ["t.eager"]
        clock.set(NOW + timedelta(seconds=201))
        engine.tick()
        assert published == ["t.eager", "t.polite"]
    finally:
        store.close()
        app.close()


def _noop() -> None:
    pass
