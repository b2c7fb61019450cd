"""Beat and status with an adaptive runtime schedule: beat dispatches it when
its ladder says so, holds it while disabled and serves it again after an
upsert; ``status`` (rows and ``--json``) shows its index, interval, next
target and why it is disabled. Real SQLite store, real Redis registry,
leases and dispatch records, and a fake clock."""

from __future__ import annotations

import uuid
from collections.abc import Sequence
from datetime import datetime, timedelta, timezone

import redis
from celery import Celery

from celery_dgs.beat.engine import BeatEngine, DispatchOrder
from celery_dgs.cli.render import status_row_json
from celery_dgs.core.adaptive import fudge_factor
from celery_dgs.core.clock import FakeClock
from celery_dgs.dgs import DGS
from celery_dgs.dispatches import DispatchRecords
from celery_dgs.leases.redis import RedisLeases
from celery_dgs.ops.timetext import iso
from celery_dgs.registry import WorkerInfo, WorkerRegistry
from celery_dgs.runtime_schedules import RuntimeSchedules
from celery_dgs.status import HOLD_DISABLED, build_row
from celery_dgs.store.sql import SqlScheduleStore

NOW = datetime(2026, 3, 2, 10, 0, tzinfo=timezone.utc)
NAME = "t.visit@src"


def _noop(*args: object, **kwargs: object) -> None:
    pass


def _run(
    store: SqlScheduleStore, token: int, outcome: str, at: datetime, eventful: bool | None = None
) -> None:
    run_id = uuid.uuid4().hex
    store.record_run_start(
        schedule=NAME,
        run_id=run_id,
        dispatch_id=None,
        owner_node="n1",
        owner_name="celery@n1",
        owner_tag=run_id,
        token=token,
        started_at=at,
    )
    store.record_run_end(
        run_id=run_id, outcome=outcome, ended_at=at + timedelta(seconds=1), eventful=eventful
    )


def test_beat_follows_the_ladder_holds_disabled_and_status_shows_it(
    sqlite_url: str, redis_client: redis.Redis
) -> None:
    app = Celery("adaptive-engine", broker="memory://", set_as_current=False)
    app.conf.dgs_key_prefix = f"ad{uuid.uuid4().hex[:6]}"
    app.task(name="t.visit", shared=False)(_noop)
    dgs = DGS(app, install_worker_hooks=False)
    settings = dgs.settings
    store = SqlScheduleStore.open(sqlite_url)
    clock = FakeClock(NOW - timedelta(hours=1))
    api = RuntimeSchedules(store, clock=clock)
    unit = {"kind": "adaptive", "interval_unit": 60, "max_failures": 3}
    assert api.upsert(NAME, **unit) == "inserted"
    # An eventful good run at NOW - 60 s: index 4 -> 2, two minutes (fudged).
    _run(store, 1, "success", NOW - timedelta(seconds=60), eventful=True)
    target = NOW - timedelta(seconds=60) + timedelta(seconds=120) * fudge_factor(NAME, 1)
    keys = settings.keyspace()
    registry = WorkerRegistry(redis_client, keys, ttl=600)
    registry.register(
        WorkerInfo(name="celery@n1", node="n1", queues=("celery",), slots=4, pool="prefork", pid=1)
    )
    published: list[str] = []

    def publish(orders: Sequence[DispatchOrder]) -> list[DispatchOrder]:
        published.extend(o.schedule for o in orders)
        return []

    clock.set(NOW)
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
        row = build_row(store.get(NAME), None, clock.now())
        assert (row.interval_index, row.interval) == (2, timedelta(minutes=2))
        assert row.next_target_at == row.error_at == target
        # Eligible a tenth of the interval (12 s) before should_start_by
        # (the target less the 1 s run): never much before its target.
        assert row.can_start_by == target - timedelta(seconds=1 + 12)
        engine.tick()
        assert published == []
        clock.set(target - timedelta(seconds=12))
        engine.tick()
        assert published == [NAME]
        # Three failures: disabled, held by beat, shown with its reason.
        engine.state.pending.clear()
        for token in (2, 3, 4):
            _run(store, token, "failure", clock.now() + timedelta(seconds=token))
        stored = store.get(NAME)
        assert stored.disabled_reason is not None
        clock.set(NOW + timedelta(hours=1))
        engine.loader.refresh()
        assert NAME in engine.state.held
        engine.tick()
        assert published == [NAME]
        row = build_row(stored, None, clock.now())
        assert [h.reason for h in row.holds] == [HOLD_DISABLED]
        assert row.may_run_at is None
        shown = status_row_json(row, clock.now())
        assert shown["disabled_reason"] == stored.disabled_reason
        assert (shown["interval_index"], shown["interval_s"]) == (2, 120.0)
        assert shown["next_target_at"] == iso(target)
        # The lister's next upsert enables it: beat serves it again.
        assert api.upsert(NAME, **unit) == "updated"
        engine.loader.refresh()
        assert NAME not in engine.state.held
        engine.tick()
        assert published == [NAME, NAME]
    finally:
        store.close()
