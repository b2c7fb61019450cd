"""Schedules no live worker may run (no worker consumes their pool, none has
their task, or their nodes are all excluded) keep neither the other pools'
free slots idle nor beat's memory growing: beat sets them aside until the
live workers change, and a window's eligible part passes over them. Real
Redis and SQLite; an injected clock."""

from __future__ import annotations

from collections.abc import Iterator
from datetime import timedelta
from pathlib import Path

import pytest
import redis

from celery_dgs.beat.engine import BeatEngine
from celery_dgs.core.clock import FakeClock
from celery_dgs.core.spec import PeriodicSpec
from celery_dgs.metrics import metrics_registry
from celery_dgs.registry import WorkerInfo
from celery_dgs.store.sql import SqlScheduleStore
from tests.beat.conftest import Recorder
from tests.beat.test_schedule_window import NOW, H, make_engine, schedules

#: More than a plan looks past (``plan_dispatches``' ``max_skips``).
BLOCKED = 1500


def specs(prefix: str, n: int, pool: str | None = None) -> list[PeriodicSpec]:
    return [
        PeriodicSpec(
            task="t.job", configuration=f"{prefix}{i:04d}", scheduling_period=6 * H, pool=pool
        )
        for i in range(n)
    ]


@pytest.fixture
def clock() -> FakeClock:
    return FakeClock(NOW)


@pytest.fixture
def store(tmp_path: Path, clock: FakeClock) -> Iterator[SqlScheduleStore]:
    s = SqlScheduleStore.open(f"sqlite:///{tmp_path / 'dgs.sqlite3'}", clock=clock)
    # The most urgent are in a pool no live worker consumes; the default
    # pool's, less urgent, have a worker with free slots.
    s.upsert_runtime(specs("b", BLOCKED, pool="gpu"), NOW - 5 * H)
    s.upsert_runtime(specs("c", 10), NOW - 4 * H)
    yield s
    s.close()


def ticks(engine: BeatEngine, clock: FakeClock, n: int) -> None:
    for _ in range(n):
        clock.advance(timedelta(seconds=2))
        engine.tick()


def join_gpu_worker(engine: BeatEngine) -> None:
    engine.registry.register(
        WorkerInfo(name="celery@g", node="g", queues=("gpu",), slots=2, pool="threads", pid=2)
    )


def test_a_pool_without_workers_keeps_no_other_pools_slot_idle(
    store: SqlScheduleStore, redis_client: redis.Redis, clock: FakeClock
) -> None:
    publish = Recorder()
    engine = make_engine(store, redis_client, clock, publish, slots=4)
    engine.load()
    ticks(engine, clock, 1)
    assert publish.names() == [f"t.job@c{i:04d}" for i in range(4)]
    assert len(engine.state.unserved) == BLOCKED
    assert engine.ranking.index.peek(clock.now().timestamp()) == "t.job@c0004"
    holds = {
        s.labels["reason"]
        for family in metrics_registry(engine, store, clock).collect()
        for s in family.samples
        if s.name == "dgs_schedule_held" and s.labels["schedule"] == "t.job@b0000"
    }
    assert holds == {"no_worker"}, "set aside, not paused"

    join_gpu_worker(engine)  # a worker of the pool joins: they are served again
    ticks(engine, clock, 1)
    assert publish.names() == ["t.job@b0000", "t.job@b0001"]
    assert not engine.state.unserved


def test_a_window_holds_no_pool_without_workers_backlog(
    store: SqlScheduleStore, redis_client: redis.Redis, clock: FakeClock
) -> None:
    publish = Recorder()
    engine = make_engine(store, redis_client, clock, publish, slots=4, schedule_window_size=20)
    engine.load()
    ticks(engine, clock, 20)
    assert publish.names() == [f"t.job@c{i:04d}" for i in range(4)]
    # The certainty rule's room (11 windows) at most, not the pool's backlog.
    assert len(schedules(engine)) <= 11 * 20

    join_gpu_worker(engine)
    ticks(engine, clock, 1)
    assert publish.names() == ["t.job@b0000", "t.job@b0001"]


@pytest.mark.parametrize("window", [None, 20], ids=["all-in-memory", "window"])
def test_a_worker_joining_serves_a_fleet_wholly_set_aside(
    tmp_path: Path, redis_client: redis.Redis, clock: FakeClock, window: int | None
) -> None:
    """Every schedule set aside leaves nothing eligible in the index: the
    worker joining must still start a round (which sees the live workers
    change), not wait for a store change."""
    store = SqlScheduleStore.open(f"sqlite:///{tmp_path / 'only-gpu.sqlite3'}", clock=clock)
    try:
        store.upsert_runtime(specs("b", 30, pool="gpu"), NOW - 5 * H)
        publish = Recorder()
        settings = {} if window is None else {"schedule_window_size": window}
        engine = make_engine(store, redis_client, clock, publish, slots=4, **settings)
        engine.load()
        ticks(engine, clock, 3)
        assert publish.names() == []
        assert engine.ranking.index.peek(clock.now().timestamp()) is None

        join_gpu_worker(engine)
        ticks(engine, clock, 1)
        assert publish.names() == ["t.job@b0000", "t.job@b0001"]
    finally:
        store.close()
