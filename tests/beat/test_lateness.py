"""Dispatch lateness (now - should_start_by) on a real BeatEngine, real Redis and a
real SQLite store, with an injected clock: the log line, the histogram
observation and the drift gauge carry the schedule's real lateness."""

from __future__ import annotations

import logging
from collections.abc import Iterator
from datetime import datetime, timedelta, timezone
from pathlib import Path

import pytest
import redis
from prometheus_client import CollectorRegistry

from celery_dgs.beat.engine import BeatEngine
from celery_dgs.core.clock import FakeClock
from celery_dgs.core.spec import PeriodicSpec
from celery_dgs.dispatches import DispatchRecords
from celery_dgs.keys import KeySpace
from celery_dgs.leases.redis import RedisLeases
from celery_dgs.metrics import metrics_registry
from celery_dgs.registry import WorkerInfo, WorkerRegistry
from celery_dgs.settings import DgsSettings
from celery_dgs.store.sql import SqlScheduleStore
from tests.beat.conftest import Mono, Recorder

KEYS = KeySpace("late")
H = timedelta(hours=1)
#: Both schedules were registered (never run) at T0: t.h1 should have started
#: by T0 + 1 h, t.h2 by T0 + 2 h. Beat's clock reads T0 + 1 h + 3 min 23 s.
T0 = datetime(2026, 3, 1, 12, 0, tzinfo=timezone.utc)
NOW = T0 + H + timedelta(minutes=3, seconds=23)
LATE_S = 203.0  # t.h1: 3m23s after its should_start_by
EARLY_S = -(H - timedelta(minutes=3, seconds=23)).total_seconds()  # t.h2: -3397 s


@pytest.fixture
def store(tmp_path: Path) -> Iterator[SqlScheduleStore]:
    s = SqlScheduleStore.open(f"sqlite:///{tmp_path / 'dgs.sqlite3'}")
    s.sync(
        [
            PeriodicSpec(task="t.h1", scheduling_period=H),
            PeriodicSpec(task="t.h2", scheduling_period=2 * H),
        ],
        T0,
    )
    yield s
    s.close()


def make_engine(
    client: redis.Redis, store: SqlScheduleStore, publish: Recorder, slots: int
) -> tuple[BeatEngine, CollectorRegistry]:
    registry = WorkerRegistry(client, KEYS, ttl=300)
    registry.register(
        WorkerInfo(
            name="celery@w1", node="w1", queues=("celery",), slots=slots, pool="prefork", pid=1
        )
    )
    clock = FakeClock(NOW)
    engine = BeatEngine(
        store=store,
        leases=RedisLeases(client, KEYS, ping_timeout=90, steal_delay=60),
        registry=registry,
        dispatches=DispatchRecords(client, KEYS),
        publish=publish,
        settings=DgsSettings(store_poll_interval=1000),
        clock=clock,
        monotonic=Mono(),
    )
    metrics = metrics_registry(engine, store, clock)
    engine.load()
    return engine, metrics


def sample(metrics: CollectorRegistry, name: str, **labels: str) -> float | None:
    return metrics.get_sample_value(name, labels)


def test_a_dispatch_logs_and_observes_its_real_lateness(
    redis_client: redis.Redis, store: SqlScheduleStore, caplog: pytest.LogCaptureFixture
) -> None:
    publish = Recorder()
    engine, metrics = make_engine(redis_client, store, publish, slots=2)
    with caplog.at_level(logging.INFO, logger="celery_dgs.beat"):
        engine.tick()
    assert sorted(o.schedule for o in publish.sent) == ["t.h1", "t.h2"]
    should = {o.schedule: o.should_start_by for o in publish.sent}
    assert should == {"t.h1": (T0 + H).timestamp(), "t.h2": (T0 + 2 * H).timestamp()}
    lines = [r.getMessage() for r in caplog.records if "dispatched" in r.getMessage()]
    assert any("t.h1" in line and "lateness +203.0s" in line for line in lines), lines
    assert any("t.h2" in line and "lateness -3397.0s" in line for line in lines), lines
    hist = "dgs_dispatch_lateness_seconds"
    assert sample(metrics, f"{hist}_count") == 2
    # t.h2 (-3397 s) in le=-600 but not le=-3600; t.h1 (+203 s) in le=300, not le=60.
    assert sample(metrics, f"{hist}_bucket", le="-3600.0") == 0
    assert sample(metrics, f"{hist}_bucket", le="-600.0") == 1
    assert sample(metrics, f"{hist}_bucket", le="60.0") == 1
    assert sample(metrics, f"{hist}_bucket", le="300.0") == 2


def test_a_run_request_is_measured_against_its_real_should_start_by(
    redis_client: redis.Redis, store: SqlScheduleStore, caplog: pytest.LogCaptureFixture
) -> None:
    """The index orders a run request by a priority key far in the past: neither
    the lateness nor the drift gauge may read that key as the schedule's time."""
    store.request_run("t.h2", NOW - timedelta(seconds=30))
    publish = Recorder()
    engine, metrics = make_engine(redis_client, store, publish, slots=0)
    engine.tick()  # no slot: t.h2 (requested) is the most urgent eligible schedule
    assert not publish.sent
    assert sample(metrics, "dgs_most_urgent_drift_seconds") == pytest.approx(EARLY_S)
    engine.registry.register(
        WorkerInfo(name="celery@w1", node="w1", queues=("celery",), slots=1, pool="prefork", pid=1)
    )
    with caplog.at_level(logging.INFO, logger="celery_dgs.beat"):
        engine.tick()
    assert [o.schedule for o in publish.sent] == ["t.h2"]
    assert publish.sent[0].should_start_by == (T0 + 2 * H).timestamp()
    hist = "dgs_dispatch_lateness_seconds"
    assert sample(metrics, f"{hist}_count") == 1
    assert sample(metrics, f"{hist}_bucket", le="-600.0") == 1  # not le=0: not "on time"
    assert sample(metrics, f"{hist}_bucket", le="-3600.0") == 0
    assert any(
        "t.h2" in r.getMessage() and "lateness -3397.0s" in r.getMessage() for r in caplog.records
    )
    # t.h1 is the most urgent now: 203 s behind its should_start_by.
    assert sample(metrics, "dgs_most_urgent_drift_seconds") == pytest.approx(LATE_S)
