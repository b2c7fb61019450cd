"""BeatEngine error paths on a real Redis server and a real SQLite store.

Redis or the store failing part-way through a round must never lose a schedule:
each one stays in exactly one of index / parked / held / pending. To fail a
chosen call the real client is wrapped in :class:`Failing`, which raises on the
named method while ``fail`` is set and otherwise calls the real backend.
"""

from __future__ import annotations

import uuid
from collections.abc import Iterator
from datetime import datetime, timedelta, timezone
from pathlib import Path
from typing import Any

import pytest
import redis

from celery_dgs.beat.engine import BeatEngine
from celery_dgs.beat.leader import BeatLeadership
from celery_dgs.core.clock import SystemClock
from celery_dgs.dispatches import DispatchRecords
from celery_dgs.keys import KeySpace
from celery_dgs.leases.leader import RedisLeader
from celery_dgs.leases.redis import RedisLeases
from celery_dgs.registry import WorkerInfo, WorkerRegistry
from celery_dgs.settings import DgsSettings
from celery_dgs.store.sql import SqlScheduleStore
from tests.beat.conftest import Mono, Recorder, open_store
from tests.leases.helpers import MsClock

KEYS = KeySpace("errs")
WORKER = "celery@w1"


class Failing:
    """The real object, except that ``method`` raises ``error`` while ``fail`` is set."""

    def __init__(self, real: Any, method: str, error: Exception) -> None:
        self._real, self._method, self._error = real, method, error
        self.fail = False
        self.calls = 0

    def __getattr__(self, name: str) -> Any:
        attr = getattr(self._real, name)
        if name != self._method:
            return attr

        def call(*args: Any, **kwargs: Any) -> Any:
            self.calls += 1
            if self.fail:
                raise self._error
            return attr(*args, **kwargs)

        return call


@pytest.fixture
def real_store(tmp_path: Path) -> Iterator[SqlScheduleStore]:
    s = open_store(f"sqlite:///{tmp_path / 'dgs.sqlite3'}", 1, 2, 3)
    yield s
    s.close()


def make_engine(
    client: redis.Redis, store: Any, dispatches: Any, publish: Recorder, slots: int, **settings: Any
) -> BeatEngine:
    registry = WorkerRegistry(client, KEYS, ttl=300)
    registry.register(
        WorkerInfo(name=WORKER, node="w1", queues=("celery",), slots=slots, pool="prefork", pid=1)
    )
    engine = BeatEngine(
        store=store,
        leases=RedisLeases(client, KEYS, ping_timeout=90, steal_delay=60),
        registry=registry,
        dispatches=dispatches,
        publish=publish,
        settings=DgsSettings(**{"store_poll_interval": 1000, **settings}),
        clock=SystemClock(),
        monotonic=Mono(),
    )
    engine.load()
    return engine


def places(engine: BeatEngine, name: str) -> list[str]:
    """Where ``name`` is: exactly one entry unless the engine lost or duplicated it."""
    found = [
        where
        for where, there in (
            ("index", name in engine.ranking.index),
            ("parked", name in engine.state.parked and name not in engine.state.pending),
            ("held", name in engine.state.held),
            ("pending", name in engine.state.pending),
        )
        if there
    ]
    return found


def test_redis_down_while_writing_dispatch_records_re_indexes_the_chosen(
    client: redis.Redis, real_store: SqlScheduleStore
) -> None:
    dispatches = Failing(
        DispatchRecords(client, KEYS), "add_many", redis.ConnectionError("Redis is restarting")
    )
    publish = Recorder()
    engine = make_engine(client, real_store, dispatches, publish, slots=2)
    dispatches.fail = True
    with pytest.raises(redis.ConnectionError):
        engine.tick()  # beat's scheduler logs it and ticks again (test_scheduler_tick_...)
    assert dispatches.calls == 1
    assert publish.names() == []
    for name in ("t.p1", "t.p2", "t.p3"):
        assert places(engine, name) == ["index"], name
    dispatches.fail = False
    engine.tick()
    assert publish.names() == ["t.p1", "t.p2"]  # served at the next tick, in order
    assert places(engine, "t.p1") == ["pending"]


def test_store_down_when_a_parked_schedule_is_freed_keeps_it_parked(
    client: redis.Redis, real_store: SqlScheduleStore
) -> None:
    store = Failing(real_store, "changes_since", RuntimeError("database is locked"))
    dispatches = DispatchRecords(client, KEYS)
    publish = Recorder()
    engine = make_engine(client, store, dispatches, publish, slots=1)
    engine.tick()
    assert publish.names() == ["t.p1"]
    leases = engine.leases
    pend = engine.state.pending["t.p1"]
    assert leases.acquire(
        "t.p1", owner_node="w1", owner_name=WORKER, owner_tag="run-1", dispatch_id=pend.dispatch_id
    ).granted
    engine.tick()  # running: stays parked
    assert places(engine, "t.p1") == ["parked"]
    assert leases.release("t.p1", "run-1")
    store.fail = True
    with pytest.raises(RuntimeError, match="locked"):
        engine.tick()  # freed, but the store cannot be read
    assert places(engine, "t.p1") == ["parked"], "freed before the refresh: lost"
    store.fail = False
    engine.tick()
    assert publish.names() == ["t.p1"]  # re-indexed (never succeeded: due again)
    assert places(engine, "t.p1") == ["pending"]


def test_a_failing_bookkeeping_call_loses_no_published_order(
    client: redis.Redis, real_store: SqlScheduleStore, caplog: pytest.LogCaptureFixture
) -> None:
    real_store.request_run("t.p3", datetime.now(timezone.utc))  # first in line
    store = Failing(real_store, "clear_run_request", RuntimeError("database is locked"))
    dispatches = Failing(
        DispatchRecords(client, KEYS), "take_back", redis.ConnectionError("Redis is restarting")
    )
    publish = Recorder()
    publish.refuse = {"t.p2"}
    engine = make_engine(client, store, dispatches, publish, slots=3)
    store.fail = dispatches.fail = True
    engine.tick()  # contained: logged, not raised
    assert publish.names() == ["t.p3", "t.p1"]
    assert places(engine, "t.p3") == ["pending"]
    assert places(engine, "t.p1") == ["pending"], "booked after the failing clear"
    assert places(engine, "t.p2") == ["index"], "not published: schedulable again"
    assert store.calls == 1
    assert dispatches.calls == 1
    assert "clearing the run request of 't.p3' failed" in caplog.text
    assert "taking back unpublished dispatch" in caplog.text


def test_a_publisher_that_raises_re_indexes_and_takes_back_every_order(
    client: redis.Redis, real_store: SqlScheduleStore
) -> None:
    dispatches = DispatchRecords(client, KEYS)
    publish = Recorder()
    publish.raise_error = OSError("broker unreachable")
    engine = make_engine(client, real_store, dispatches, publish, slots=2)
    engine.tick()
    for name in ("t.p1", "t.p2", "t.p3"):
        assert places(engine, name) == ["index"], name
    assert dispatches.pending_names() == set()
    publish.raise_error = None
    engine.tick()
    assert publish.names() == ["t.p1", "t.p2"]


def test_scheduler_tick_logs_an_engine_error_and_backs_off(
    caplog: pytest.LogCaptureFixture,
) -> None:
    from celery_dgs.beat.scheduler import TICK_ERROR_BACKOFF_S, DeadlineScheduler

    class Broken:
        def tick(self) -> float:
            raise redis.ConnectionError("Redis is restarting")

    sched = DeadlineScheduler.__new__(DeadlineScheduler)
    sched.engine = Broken()  # type: ignore[assignment]
    sched.leadership = None
    sched.max_interval = 300
    assert sched.tick() == TICK_ERROR_BACKOFF_S
    assert "beat tick failed" in caplog.text


def run_once(store: SqlScheduleStore, leases: RedisLeases, name: str, dispatch_id: str) -> None:
    """A worker's whole run: lease, start row, success row, release (outcome first)."""
    tag = uuid.uuid4().hex
    got = leases.acquire(
        name, owner_node="w1", owner_name=WORKER, owner_tag=tag, dispatch_id=dispatch_id
    )
    assert got.granted
    assert got.token is not None
    run_id = uuid.uuid4().hex
    now = datetime.now(timezone.utc)
    store.record_run_start(
        schedule=name,
        run_id=run_id,
        dispatch_id=dispatch_id,
        owner_node="w1",
        owner_name=WORKER,
        owner_tag=tag,
        token=got.token,
        started_at=now,
    )
    store.record_run_end(run_id=run_id, outcome="success", ended_at=now + timedelta(seconds=1))
    assert leases.release(name, tag)


def leader_beat(
    name: str,
    client: redis.Redis,
    store: SqlScheduleStore,
    registry: WorkerRegistry,
    leader_clock: MsClock,
) -> tuple[BeatEngine, Recorder, Mono]:
    """A loaded beat competing for the leader lease (3 s) on the shared Redis and store."""
    publish, mono = Recorder(), Mono()
    settings = DgsSettings(beat_leader_timeout=3.0, store_poll_interval=30)
    leadership = BeatLeadership(
        RedisLeader(client, KEYS, timeout=3.0, clock_ms=leader_clock),
        node=name,
        pid=1,
        store_poll_interval=settings.store_poll_interval,
        monotonic=mono,
    )
    engine = BeatEngine(
        store=store,
        leases=RedisLeases(client, KEYS, ping_timeout=90, steal_delay=60),
        registry=registry,
        dispatches=DispatchRecords(client, KEYS),
        publish=publish,
        settings=settings,
        clock=SystemClock(),
        monotonic=mono,
        leadership=leadership,
    )
    engine.load()
    return engine, publish, mono


def test_a_new_leader_reads_the_store_before_dispatching(
    client: redis.Redis, real_store: SqlScheduleStore
) -> None:
    """A run that ended just before a take-over is not dispatched again at once."""
    leader_clock = MsClock()
    registry = WorkerRegistry(client, KEYS, ttl=300)
    registry.register(
        WorkerInfo(name=WORKER, node="w1", queues=("celery",), slots=1, pool="prefork", pid=1)
    )
    a, a_pub, _ = leader_beat("a", client, real_store, registry, leader_clock)
    b, b_pub, b_mono = leader_beat("b", client, real_store, registry, leader_clock)
    a.tick()
    assert a_pub.names() == ["t.p1"]
    b.tick()  # standby: index warm, stats as loaded (t.p1 never ran)
    run_once(real_store, a.leases, "t.p1", a.state.pending["t.p1"].dispatch_id)
    # a stops; b takes over within its poll interval (30 s): its stats are old.
    leader_clock.advance(3001)
    b_mono.t += 1
    b.tick()
    assert b.leadership is not None
    assert b.leadership.leading
    assert b_pub.names() == ["t.p2"], "t.p1 ran a second ago and must not run again"
    assert b.state.tracked["t.p1"].stats.last_good_start_at is not None


def test_redis_down_while_taking_back_an_expired_dispatch_keeps_it_pending(
    client: redis.Redis, real_store: SqlScheduleStore
) -> None:
    dispatches = Failing(
        DispatchRecords(client, KEYS), "take_back", redis.ConnectionError("Redis is restarting")
    )
    publish = Recorder()
    engine = make_engine(client, real_store, dispatches, publish, slots=1, dispatch_timeout=10)
    engine.tick()
    assert publish.names() == ["t.p1"]
    first = engine.state.pending["t.p1"].dispatch_id
    mono = engine.monotonic
    assert isinstance(mono, Mono)
    mono.t += 11  # not started within dispatch_timeout
    dispatches.fail = True
    with pytest.raises(redis.ConnectionError):
        engine.tick()
    assert places(engine, "t.p1") == ["pending"], "dropped from pending, record still there"
    dispatches.fail = False
    engine.tick()  # taken back now, and dispatched again (the slot is free)
    assert publish.names() == ["t.p1"]
    assert engine.state.pending["t.p1"].dispatch_id != first


def test_a_row_that_cannot_be_applied_is_held_and_the_rest_of_the_batch_applied(
    client: redis.Redis,
    real_store: SqlScheduleStore,
    caplog: pytest.LogCaptureFixture,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    engine = make_engine(client, real_store, DispatchRecords(client, KEYS), Recorder(), slots=0)
    real_reindex = engine.ranking.reindex

    def reindex(name: str, batch: Any = None) -> None:
        if name == "t.p2":
            raise OverflowError("date value out of range")
        real_reindex(name, batch)

    monkeypatch.setattr(engine.ranking, "reindex", reindex)
    now = datetime.now(timezone.utc)
    for name in ("t.p1", "t.p2", "t.p3"):
        real_store.request_run(name, now)
    assert engine.loader.refresh() == 3
    assert places(engine, "t.p2") == ["held"]
    assert "'t.p2': cannot apply its stored row" in caplog.text
    for name in ("t.p1", "t.p3"):  # applied after the failing row
        assert engine.state.tracked[name].run_requested_at is not None, name
        assert places(engine, name) == ["index"]


def test_a_beat_elected_again_reads_the_store_before_dispatching(
    client: redis.Redis, real_store: SqlScheduleStore
) -> None:
    """The same on a beat's second term: it ran rounds before (its load-time
    refresh is spent) and its stats of a run made under the other leader are old."""
    leader_clock = MsClock()
    registry = WorkerRegistry(client, KEYS, ttl=300)

    def slots(n: int) -> None:
        registry.register(
            WorkerInfo(name=WORKER, node="w1", queues=("celery",), slots=n, pool="prefork", pid=1)
        )

    slots(1)
    a, a_pub, a_mono = leader_beat("a", client, real_store, registry, leader_clock)
    b, b_pub, b_mono = leader_beat("b", client, real_store, registry, leader_clock)
    a.tick()
    assert a_pub.names() == ["t.p1"]
    run_once(real_store, a.leases, "t.p1", a.state.pending["t.p1"].dispatch_id)
    slots(0)
    a_mono.t += 0.1
    a.tick()  # a round: t.p1 freed (store read), nothing parked, no slot
    assert not a.state.parked
    b.tick()  # standby
    leader_clock.advance(3001)  # a stops; b takes over
    slots(1)
    b_mono.t += 1
    b.tick()
    assert b_pub.names() == ["t.p2"]
    a_mono.t += 1.5  # a resumes; its renewal is due: b leads, a stands by
    a.tick()
    assert a.leadership is not None
    assert not a.leadership.leading
    run_once(real_store, b.leases, "t.p2", b.state.pending["t.p2"].dispatch_id)
    slots(0)
    b_mono.t += 0.1
    b.tick()  # t.p2 freed under b
    leader_clock.advance(3001)  # b stops; a is elected again, within its poll interval
    slots(1)
    a_mono.t += 1
    a.tick()
    assert a.leadership.leading
    assert a_pub.names() == ["t.p3"], "t.p2 ran just before the take-over"
