"""A dispatch sent to a worker that leaves before it starts the run (it
deregistered after the round that chose it read the workers, as a worker's
shutdown races a round): its message waits in that worker's own queue, so
beat takes it back at its next round rather than after
``dgs_dispatch_timeout``, and the schedule goes to a live worker. Real
Redis and SQLite; an injected clock."""

from __future__ import annotations

import dataclasses
import time
from collections.abc import Iterator
from datetime import timedelta
from pathlib import Path

import pytest
import redis

from celery_dgs.core.clock import FakeClock
from celery_dgs.core.spec import PeriodicSpec
from celery_dgs.registry import WorkerInfo
from celery_dgs.store.sql import SqlScheduleStore
from tests.beat.conftest import Recorder
from tests.beat.test_schedule_window import NOW, H, make_engine
from tests.support.waiting import wait_for


@pytest.fixture
def clock() -> FakeClock:
    return FakeClock(NOW)


@pytest.fixture
def store(tmp_path: Path, clock: FakeClock) -> Iterator[SqlScheduleStore]:
    s = SqlScheduleStore.open(f"sqlite:///{tmp_path / 'dgs.sqlite3'}", clock=clock)
    s.upsert_runtime(
        [PeriodicSpec(task="t.job", configuration="only", scheduling_period=6 * H)], NOW - 7 * H
    )
    yield s
    s.close()


def test_a_dispatch_to_a_worker_that_left_is_taken_back_at_the_next_round(
    store: SqlScheduleStore, redis_client: redis.Redis, clock: FakeClock
) -> None:
    publish = Recorder()
    engine = make_engine(store, redis_client, clock, publish, slots=1, dispatch_timeout=300)
    engine.load()
    engine.tick()
    [sent] = publish.sent
    assert sent.worker == "celery@a"
    publish.sent.clear()
    engine.registry.deregister("celery@a")  # it leaves; its message waits in its own queue
    engine.registry.register(
        WorkerInfo(name="celery@b", node="b", queues=("celery",), slots=1, pool="threads", pid=2)
    )
    for _ in range(3):  # well within dispatch_timeout (300 s)
        clock.advance(timedelta(seconds=2))
        engine.tick()
    [again] = publish.sent
    assert (again.schedule, again.worker) == ("t.job@only", "celery@b")
    assert again.dispatch_id != sent.dispatch_id
    current = engine.dispatches.current("t.job@only")
    assert current is not None
    assert current.dispatch_id == again.dispatch_id, "the first record was taken back"


def test_a_dispatch_to_a_live_worker_set_aside_as_stalled_is_left_pending(
    store: SqlScheduleStore, redis_client: redis.Redis, clock: FakeClock
) -> None:
    """A worker set aside because a lease of its looks unpinged (paused, or
    the Redis clock stepped) is still registered: its pending dispatch waits
    for it (or dispatch_timeout), and is not taken back as a leaver's."""
    store.upsert_runtime(
        [PeriodicSpec(task="t.job", configuration="other", scheduling_period=6 * H)], NOW - 7 * H
    )
    publish = Recorder()
    engine = make_engine(store, redis_client, clock, publish, slots=2, dispatch_timeout=300)
    engine.load()
    engine.tick()
    sent = {o.schedule: o for o in publish.sent}
    assert set(sent) == {"t.job@only", "t.job@other"}
    granted = engine.leases.acquire(
        "t.job@only",
        owner_node="a",
        owner_name="celery@a",
        owner_tag="run-1",
        dispatch_id=sent["t.job@only"].dispatch_id,
    )
    assert granted.granted

    def set_aside() -> bool:  # its lease unpinged past ping_timeout (2 s, Redis's clock)
        clock.advance(timedelta(seconds=2))
        engine.tick()
        return "celery@a" in engine.placement.stalled

    wait_for(set_aside, 10, "the worker set aside as stalled")
    current = engine.dispatches.current("t.job@other")
    assert current is not None
    assert current.dispatch_id == sent["t.job@other"].dispatch_id


def test_a_dispatch_to_a_worker_that_restarted_since_is_taken_back_at_once(
    store: SqlScheduleStore, redis_client: redis.Redis, clock: FakeClock
) -> None:
    """The worker is killed just after the round that chose it and comes back
    under its name before its registration expires: the message died with
    the earlier process, or waits in its queue. Its new instance (a later
    first registration) has the dispatch taken back at the next round, not
    after ``dgs_dispatch_timeout``, and sent again, to the new instance."""
    publish = Recorder()
    engine = make_engine(store, redis_client, clock, publish, slots=1, dispatch_timeout=300)
    engine.load()
    engine.tick()
    [sent] = publish.sent
    publish.sent.clear()
    (before,) = engine.registry.live_workers()  # restarted before beat's next round
    time.sleep(0.01)  # a later Redis millisecond for the new instance
    engine.registry.register(dataclasses.replace(before, pid=before.pid + 1, started_at=None))
    (after,) = engine.registry.live_workers()
    assert after.registered_at is not None
    assert before.registered_at is not None
    assert after.registered_at > before.registered_at, "a new instance"
    for _ in range(2):  # taken back, then sent again (well within dispatch_timeout)
        clock.advance(timedelta(seconds=2))
        engine.tick()
    [again] = publish.sent
    assert (again.schedule, again.worker) == ("t.job@only", sent.worker)
    assert again.dispatch_id != sent.dispatch_id
    current = engine.dispatches.current("t.job@only")
    assert current is not None
    assert current.dispatch_id == again.dispatch_id, "the first record was taken back"
