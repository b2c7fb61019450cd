"""Beat's metrics of deferred checks on a real BeatEngine, real Redis and a
real SQLite store, with an injected clock: per-task pending and overdue
gauges, the start lateness of each dispatched check, and no per-schedule
series for the checks of beat's window."""

from __future__ import annotations

from collections.abc import Iterator
from datetime import datetime, timedelta, timezone
from pathlib import Path

import pytest
import redis
from sqlalchemy import text

from celery_dgs.beat.engine import BeatEngine
from celery_dgs.core.clock import FakeClock
from celery_dgs.core.spec import CheckSpec, PeriodicSpec
from celery_dgs.dispatches import DispatchRecords
from celery_dgs.keys import KeySpace
from celery_dgs.leases.redis import RedisLeases
from celery_dgs.metrics import metrics_registry
from celery_dgs.registry import WorkerInfo, WorkerRegistry
from celery_dgs.settings import DgsSettings
from celery_dgs.status import CachedCheckSummary
from celery_dgs.store.check_types import CheckSummary, NewCheck
from celery_dgs.store.sql import SqlScheduleStore
from tests.beat.conftest import Mono, Recorder
from tests.e2e.harness import wait_for

KEYS = KeySpace("chkm")
NOW = datetime(2026, 3, 1, 12, 0, tzinfo=timezone.utc)
S = timedelta(seconds=1)
ORDER, PAYMENT = "shop.check_order", "shop.check_payment"


def check(task: str, key: str) -> CheckSpec:
    return CheckSpec(task=task, key=key)


@pytest.fixture
def store(tmp_path: Path) -> Iterator[SqlScheduleStore]:
    s = SqlScheduleStore.open(f"sqlite:///{tmp_path / 'dgs.sqlite3'}")
    s.sync([PeriodicSpec(task="t.plain", scheduling_period=timedelta(hours=1))], NOW)
    s.add_checks(
        [
            NewCheck(check(ORDER, "late-90"), NOW - 90 * S),
            NewCheck(check(ORDER, "ahead"), NOW + timedelta(days=3)),
            NewCheck(check(PAYMENT, "late-30"), NOW - 30 * S),
        ],
        NOW - timedelta(hours=1),
    )
    yield s
    s.close()


def test_check_gauges_lateness_and_no_per_schedule_series(
    redis_client: redis.Redis, store: SqlScheduleStore
) -> None:
    registry = WorkerRegistry(redis_client, KEYS, ttl=300)
    registry.register(
        WorkerInfo(name="celery@w1", node="w1", queues=("celery",), slots=4, pool="prefork", pid=1)
    )
    clock = FakeClock(NOW)
    publish = Recorder()
    engine = BeatEngine(
        store=store,
        leases=RedisLeases(redis_client, KEYS, ping_timeout=90, steal_delay=60),
        registry=registry,
        dispatches=DispatchRecords(redis_client, KEYS),
        publish=publish,
        settings=DgsSettings(store_poll_interval=1000),
        clock=clock,
        monotonic=Mono(),
    )
    metrics = metrics_registry(engine, store, clock)
    engine.load()
    assert engine.state.checks == {f"{ORDER}@check:late-90", f"{PAYMENT}@check:late-30"}
    engine.tick()
    assert sorted(o.schedule for o in publish.sent) == [
        f"{ORDER}@check:late-90",
        f"{PAYMENT}@check:late-30",
        "t.plain",
    ]

    def value(name: str, **labels: str) -> float | None:
        return metrics.get_sample_value(name, labels)

    # One observation per check dispatched (the periodic schedule is not one).
    assert value("dgs_check_lateness_seconds_count") == 2
    assert value("dgs_check_lateness_seconds_sum") == pytest.approx(120.0)
    assert value("dgs_check_lateness_seconds_bucket", le="15.0") == 0
    assert value("dgs_check_lateness_seconds_bucket", le="30.0") == 1
    assert value("dgs_check_lateness_seconds_bucket", le="60.0") == 1
    assert value("dgs_check_lateness_seconds_bucket", le="120.0") == 2
    assert value("dgs_dispatch_lateness_seconds_count") == 3  # every dispatch, as before

    assert value("dgs_checks_pending", task=ORDER) == 2
    assert value("dgs_checks_overdue", task=ORDER) == 1
    assert value("dgs_checks_pending", task=PAYMENT) == 1
    assert value("dgs_checks_overdue", task=PAYMENT) == 1

    per_schedule = {
        s.labels["schedule"]
        for family in metrics.collect()
        for s in family.samples
        if "schedule" in s.labels
    }
    assert per_schedule == {"t.plain"}
    classes = sum(
        s.value
        for family in metrics.collect()
        for s in family.samples
        if s.name == "dgs_priority_class_schedules"
    )
    assert classes == 1
    # The store's counts of the kept conditions: the one schedule, no check.
    counted = [
        s.value for family in metrics.collect() for s in family.samples if s.name == "dgs_schedules"
    ]
    assert counted == [1]


def test_the_check_summary_is_read_once_per_ttl(store: SqlScheduleStore) -> None:
    mono = [100.0]
    cached = CachedCheckSummary(lambda: store.check_summary(NOW), 10.0, monotonic=lambda: mono[0])
    first = cached.get()
    assert first is not None
    assert first.total_pending == 3
    store.add_checks([NewCheck(check(ORDER, "new"), NOW - S)], NOW)
    mono[0] += 9.9
    assert cached.get() is first  # within the TTL: not read again
    mono[0] += 0.2
    again = cached.get()
    assert again is not None
    assert (again.total_pending, again.total_overdue) == (4, 3)
    with store.engine.begin() as conn:  # the next read fails: the last summary is served
        conn.execute(text("ALTER TABLE dgs_schedules RENAME TO dgs_schedules_gone"))
    mono[0] += 11
    assert cached.get() is again


def test_a_slow_summary_is_read_again_after_ten_times_its_cost(store: SqlScheduleStore) -> None:
    """The status page's cache: no TTL, but ten times the seconds a read took."""
    mono = [0.0]
    reads = []

    def read() -> CheckSummary:
        reads.append(mono[0])
        mono[0] += 0.8  # the read takes 0.8 s (a million checks)
        return store.check_summary(NOW)

    cached = CachedCheckSummary(read, cost_factor=10.0, monotonic=lambda: mono[0])
    cached.get()
    mono[0] = 7.9
    cached.get()
    assert reads == [0.0]  # fresh until 0 + 10 x 0.8 s
    mono[0] = 8.0
    cached.get()
    assert reads == [0.0, 8.0]
    fast = CachedCheckSummary(lambda: store.check_summary(NOW), cost_factor=10.0)
    first = fast.get()
    store.add_checks([NewCheck(check(ORDER, "new"), NOW - S)], NOW)
    fresh = wait_for(lambda: (s := fast.get()) is not first and s, 5, "a fast re-read")
    assert fresh.total_pending == 4
