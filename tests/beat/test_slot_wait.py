"""A pool whose workers are all busy, with more eligible schedules ahead
than a round looks past, keeps no other pool's free slot idle: beat sets
its backlog aside until one of its slots frees, then serves it most urgent
first. Real Redis and SQLite; an injected clock."""

from __future__ import annotations

from datetime import timedelta
from pathlib import Path

import pytest
import redis

from celery_dgs.beat.engine import BeatEngine
from celery_dgs.core.clock import FakeClock
from celery_dgs.core.slot_wait import WAIT_BOUND_MIN
from celery_dgs.metrics import metrics_registry
from celery_dgs.registry import WorkerInfo
from celery_dgs.store.sql import SqlScheduleStore
from tests.beat import test_unserved
from tests.beat.conftest import Recorder
from tests.beat.test_schedule_window import NOW, H, make_engine, run_now

#: The gpu pool's schedules, more than a plan looks past; the store holds
#: them (the most urgent) and 10 of the default pool's, less urgent.
BACKLOG = test_unserved.BLOCKED
#: The fixtures: the injected clock, and that store.
clock, store = test_unserved.clock, test_unserved.store


def tick(engine: BeatEngine, clock: FakeClock) -> None:
    clock.advance(timedelta(seconds=2))
    engine.tick()


@pytest.mark.parametrize("window", [None, 20])
def test_a_busy_pools_backlog_keeps_no_other_pools_slot_idle(
    store: SqlScheduleStore, redis_client: redis.Redis, clock: FakeClock, window: int | None
) -> None:
    publish = Recorder()
    engine = make_engine(store, redis_client, clock, publish, slots=20, schedule_window_size=window)
    engine.registry.register(
        WorkerInfo(name="celery@g", node="g", queues=("gpu",), slots=1, pool="threads", pid=2)
    )
    engine.load()
    tick(engine, clock)
    sent = publish.names()
    assert sent[0] == "t.job@b0000"
    assert sorted(sent[1:]) == [f"t.job@c{i:04d}" for i in range(10)], "none left idle"
    waiting = engine.ranking.waiting
    # Every busy one past the plan's depth; with a window, at most the
    # window's size past a quarter more (64 at least), the rest let go of.
    bound = WAIT_BOUND_MIN + WAIT_BOUND_MIN // 4
    assert len(waiting) == BACKLOG - 1 if window is None else 20 <= len(waiting) <= bound
    assert not engine.state.unserved, "a busy pool is served"
    samples = [s for f in metrics_registry(engine, store, clock).collect() for s in f.samples]
    holds = [
        s
        for s in samples
        if s.name == "dgs_schedule_held" and s.labels["schedule"].startswith("t.job@b")
    ]
    assert holds == [], "waiting for a slot is not held"
    [gauge] = [s for s in samples if s.name == "dgs_schedules_waiting_for_slot"]
    assert gauge.value == len(waiting)

    tick(engine, clock)  # the gpu slot is still busy: nothing more
    assert publish.names() == []

    waiting_before = len(waiting)
    run_now(engine, store, "t.job@b0000", clock.now())  # the gpu run ends
    tick(engine, clock)
    assert publish.names() == ["t.job@b0001"], "the most urgent of the backlog"
    if window is None:  # (with one, the wait is trimmed and read again as it runs low)
        assert len(waiting) == waiting_before - 1, "those released and not sent wait again"
    index = engine.ranking.index
    if window is None:  # (b0000 ran: indexed again, due in 6 h)
        assert not any(f"t.job@b{i:04d}" in index for i in range(2, BACKLOG))
    tracked = set(engine.state.tracked)
    if window is None:
        assert all(f"t.job@b{i:04d}" in tracked for i in range(BACKLOG)), "none forgotten"


def test_a_paused_schedule_leaves_the_wait(
    store: SqlScheduleStore, redis_client: redis.Redis, clock: FakeClock
) -> None:
    publish = Recorder()
    engine = make_engine(store, redis_client, clock, publish, slots=20)
    engine.registry.register(
        WorkerInfo(name="celery@g", node="g", queues=("gpu",), slots=1, pool="threads", pid=2)
    )
    engine.load()
    tick(engine, clock)
    publish.names()
    waiting = engine.ranking.waiting
    assert "t.job@b0001" in waiting
    store.set_paused("t.job@b0001", True)
    engine.loader.refresh()
    assert "t.job@b0001" not in waiting
    assert "t.job@b0001" in engine.state.held
    run_now(engine, store, "t.job@b0000", clock.now())
    tick(engine, clock)
    assert publish.names() == ["t.job@b0002"], "the paused one is not sent"


def test_with_a_window_a_busy_pools_backlog_is_bounded_and_served_in_deadline_order(
    tmp_path: Path, redis_client: redis.Redis
) -> None:
    """1,500 eligible schedules of a pool whose one slot is busy, no other
    work, a window of 50: beat holds a bounded part of the backlog (what a
    plan looks past, and at most the window's size waiting, the rest let go
    of), reads the rest again as its wait runs low, and serves the backlog
    most urgent first, none skipped."""
    clock = FakeClock(NOW)
    store = SqlScheduleStore.open(f"sqlite:///{tmp_path / 'dgs.sqlite3'}", clock=clock)
    try:
        store.upsert_runtime(test_unserved.specs("b", BACKLOG, pool="gpu"), NOW - 5 * H)
        publish = Recorder()
        engine = make_engine(store, redis_client, clock, publish, slots=20, schedule_window_size=50)
        engine.registry.register(
            WorkerInfo(name="celery@g", node="g", queues=("gpu",), slots=1, pool="threads", pid=2)
        )
        engine.load()
        sent: list[str] = []
        most = 0
        for _ in range(60):
            tick(engine, clock)
            names = publish.names()
            sent += names
            for name in names:  # the gpu run ends: its slot is free for the next round
                run_now(engine, store, name, clock.now())
            most = max(most, len(engine.state.tracked))
            assert len(engine.ranking.waiting) <= WAIT_BOUND_MIN + WAIT_BOUND_MIN // 4
    finally:
        store.close()
    assert sent == [f"t.job@b{i:04d}" for i in range(60)], "in deadline order, none skipped"
    # a plan's depth (1,000), the wait and a read, not the backlog
    assert most <= 1_000 + 2 * WAIT_BOUND_MIN, most
