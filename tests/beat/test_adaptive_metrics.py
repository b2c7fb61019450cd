"""Beat's metrics of adaptive schedules: how many are never visited,
modified since their last visit, other or disabled, and how far the
earliest freshness target lags real time. Real BeatEngine over real Redis
and SQLite."""

from __future__ import annotations

import uuid
from datetime import datetime, timedelta, timezone
from pathlib import Path

import redis

from celery_dgs.beat.engine import BeatEngine
from celery_dgs.core.clock import FakeClock, SystemClock
from celery_dgs.core.spec import AdaptiveSpec, PeriodicSpec
from celery_dgs.dispatches import DispatchRecords
from celery_dgs.keys import KeySpace
from celery_dgs.leases.redis import RedisLeases
from celery_dgs.metrics import metrics_registry
from celery_dgs.registry import WorkerRegistry
from celery_dgs.settings import DgsSettings
from celery_dgs.store.sql import SqlScheduleStore
from tests.beat.conftest import Mono, Recorder

KEYS = KeySpace("adm")
HOUR = timedelta(hours=1)


def visit(source: str, **kw: object) -> AdaptiveSpec:
    return AdaptiveSpec(task="t.visit", configuration=source, interval_unit=HOUR, **kw)  # type: ignore[arg-type]


def record(store: SqlScheduleStore, name: str, outcome: str, at: datetime, token: int) -> None:
    run_id = uuid.uuid4().hex
    store.record_run_start(
        schedule=name,
        run_id=run_id,
        dispatch_id=None,
        owner_node="n",
        owner_name="w@n",
        owner_tag=run_id,
        token=token,
        started_at=at,
    )
    store.record_run_end(run_id=run_id, outcome=outcome, ended_at=at + timedelta(seconds=1))


def test_adaptive_groups_and_target_drift(redis_client: redis.Redis, tmp_path: Path) -> None:
    now = datetime.now(timezone.utc)
    store = SqlScheduleStore.open(f"sqlite:///{tmp_path / 'dgs.sqlite3'}")
    try:
        born = now - 3 * HOUR
        store.upsert_runtime(
            [visit("new"), visit("seen"), visit("changed"), visit("broken", max_failures=1)], born
        )
        store.sync([PeriodicSpec(task="t.plain", scheduling_period=HOUR)], born)
        for token, name in enumerate(("seen", "changed"), start=1):
            record(store, f"t.visit@{name}", "success", now - 2 * HOUR, token)
        record(store, "t.visit@broken", "failure", now - HOUR, 3)
        store.upsert_runtime([visit("changed")], now, last_modified={"t.visit@changed": now - HOUR})
        engine = BeatEngine(
            store=store,
            leases=RedisLeases(redis_client, KEYS, ping_timeout=90, steal_delay=60),
            registry=WorkerRegistry(redis_client, KEYS, ttl=300),
            dispatches=DispatchRecords(redis_client, KEYS),
            publish=Recorder(),
            settings=DgsSettings(store_poll_interval=1000),
            clock=SystemClock(),
            monotonic=Mono(),
        )
        engine.load()
        samples = {
            (s.name, s.labels.get("group")): s.value
            for family in metrics_registry(engine, store, FakeClock(now)).collect()
            for s in family.samples
            if s.name.startswith("dgs_adaptive")
        }
    finally:
        store.close()
    groups = {g: v for (n, g), v in samples.items() if n == "dgs_adaptive_schedules"}
    assert groups == {"never_visited": 1, "modified_since_visit": 1, "other": 1, "disabled": 1}
    # The earliest target: the new one, registered 3 h ago with a 1 h target.
    assert samples[("dgs_adaptive_target_drift_seconds", None)] == 2 * 3600
