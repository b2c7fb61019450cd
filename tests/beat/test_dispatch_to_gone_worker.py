"""A dispatch sent to a worker that leaves before it starts the run (it
deregistered after the round that chose it read the workers, as a worker's
shutdown races a round): its message waits in that worker's own queue, so
beat takes it back at its next round rather than after
``dgs_dispatch_timeout``, and the schedule goes to a live worker. Real
Redis and SQLite; an injected clock."""

from __future__ import annotations

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
