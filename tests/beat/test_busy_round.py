"""A dispatch round's Redis state on a real server: stalled workers get no new
dispatches, and the dispatch index is re-read only when it changed."""

from __future__ import annotations

import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import redis

from celery_dgs.beat.engine import BeatEngine
from celery_dgs.core.clock import SystemClock
from celery_dgs.dispatches import DispatchRecord, DispatchRecords
from celery_dgs.keys import KeySpace
from celery_dgs.leases.redis import RedisLeases
from celery_dgs.registry import WorkerInfo, WorkerRegistry
from celery_dgs.settings import DgsSettings
from celery_dgs.store.sql import SqlScheduleStore
from tests.beat.conftest import Recorder, open_store, sync_periodic
from tests.leases.helpers import MsClock

KEYS = KeySpace("busy")
PING_TIMEOUT_S, STEAL_DELAY_S, TTL_S = 2.0, 1.0, 30.0


class World:
    def __init__(
        self,
        client: redis.Redis,
        store: SqlScheduleStore,
        settings: DgsSettings | None = None,
    ) -> None:
        self.clock = MsClock(int(time.time() * 1000))
        self.leases = RedisLeases(
            client,
            KEYS,
            ping_timeout=PING_TIMEOUT_S,
            steal_delay=STEAL_DELAY_S,
            clock_ms=self.clock,
        )
        self.registry = WorkerRegistry(client, KEYS, ttl=TTL_S, clock_ms=self.clock)
        self.dispatches = DispatchRecords(client, KEYS, clock_ms=self.clock)
        self.publish = Recorder()
        self.expected: list[int | None] = []  # what each round asked beat_view.lua for
        self.engine = BeatEngine(
            store=store,
            leases=self.leases,
            registry=self.registry,
            dispatches=self.dispatches,
            publish=self.publish,
            settings=settings or DgsSettings(store_poll_interval=0.001),
            clock=SystemClock(),
        )
        real = self.engine.lease_view.read

        def spy(**kw: Any) -> Any:
            self.expected.append(kw.get("expected_dispatches"))
            return real(**kw)

        self.engine.lease_view.read = spy  # type: ignore[method-assign]

    def register(self, name: str, slots: int) -> None:
        self.registry.register(
            WorkerInfo(
                name=name,
                node=name.split("@")[1],
                queues=("celery",),
                slots=slots,
                pool="solo",
                pid=1,
            )
        )

    def sent_to(self) -> list[str]:
        out = [o.worker for o in self.publish.sent]
        self.publish.sent.clear()
        return out


@pytest.fixture
def store(tmp_path: Path) -> Iterator[SqlScheduleStore]:
    s = open_store(f"sqlite:///{tmp_path / 'dgs.sqlite3'}")
    yield s
    s.close()


sync = sync_periodic


def test_a_worker_owning_a_stale_lease_gets_no_new_dispatch_until_heard_from(
    client: redis.Redis, store: SqlScheduleStore
) -> None:
    sync(store, 1)
    w = World(client, store)
    w.register("celery@a", 3)
    w.register("celery@b", 1)
    w.engine.load()
    w.engine.tick()
    assert w.sent_to() == ["celery@a"]  # the most free slots
    pend = w.engine.state.pending["t.p1"]
    assert w.leases.acquire(
        "t.p1",
        owner_node="a",
        owner_name="celery@a",
        owner_tag="run-1",
        dispatch_id=pend.dispatch_id,
    ).granted

    w.clock.advance(int(PING_TIMEOUT_S * 1000) + 1)  # a stops pinging (SIGSTOP)
    w.registry.heartbeat("celery@b")
    sync(store, 1, 2, 3)  # two new schedules fall due
    w.engine.tick()
    assert "celery@a" in w.engine.placement.stalled
    assert w.sent_to() == ["celery@b"], "a has 2 free slots but is stalled"

    w.clock.advance(int(STEAL_DELAY_S * 1000) + 1)  # t.p1 takeable; b takes it over
    assert w.leases.acquire(
        "t.p1", owner_node="b", owner_name="celery@b", owner_tag="run-2"
    ).granted
    w.engine.dispatches.take_back("t.p2", w.engine.state.pending["t.p2"].dispatch_id)
    w.engine.tick()  # a owns nothing stale, but has not been heard from since
    assert "celery@a" in w.engine.placement.stalled
    assert w.sent_to() == [], "b is full; a is still set aside"

    w.clock.advance(10)
    assert w.registry.heartbeat("celery@a")  # resumed: its main process heartbeats
    w.engine.tick()
    assert "celery@a" not in w.engine.placement.stalled
    assert w.sent_to() == ["celery@a", "celery@a"]  # t.p2 (taken back) and t.p3


def test_all_workers_stalled_is_not_no_worker(client: redis.Redis, store: SqlScheduleStore) -> None:
    """With dgs_capacity, no registered worker means 'publish to the pool queue';
    registered workers that are all stalled must not fall back to that."""
    sync(store, 1, 2)
    w = World(client, store, DgsSettings(store_poll_interval=0.001, capacity=5))
    w.register("celery@a", 3)
    w.engine.load()
    w.engine.tick()
    assert w.sent_to() == ["celery@a", "celery@a"]
    for name in ("t.p1",):
        assert w.leases.acquire(
            name,
            owner_node="a",
            owner_name="celery@a",
            owner_tag=name,
            dispatch_id=w.engine.state.pending[name].dispatch_id,
        ).granted
    w.dispatches.take_back("t.p2", w.engine.state.pending["t.p2"].dispatch_id)
    w.clock.advance(int(PING_TIMEOUT_S * 1000) + 1)
    w.engine.tick()
    assert w.sent_to() == []


def test_the_dispatch_index_is_read_only_when_it_changed(
    client: redis.Redis, store: SqlScheduleStore
) -> None:
    sync(store, 1, 2, 3)
    w = World(client, store)
    w.register("celery@a", 3)
    w.engine.load()
    w.engine.tick()
    assert len(w.sent_to()) == 3
    w.engine.tick()
    w.engine.tick()
    assert w.expected[-1] == 3, "unchanged: only the size is compared"
    started = "t.p2"
    assert w.leases.acquire(
        started,
        owner_node="a",
        owner_name="celery@a",
        owner_tag="r",
        dispatch_id=w.engine.state.pending[started].dispatch_id,
    ).granted
    w.engine.tick()  # the size differs: names read, the start seen
    assert set(w.engine.state.pending) == {"t.p1", "t.p3"}
    assert w.engine.state.parked == {"t.p1", "t.p2", "t.p3"}
    w.engine.tick()
    assert w.expected[-1] == 2

    # A record beat did not write (another writer): the size alone would hide a start.
    w.dispatches.add_many(
        [DispatchRecord(schedule="t.foreign", dispatch_id="f", worker="celery@a")], ttl=60
    )
    w.engine.tick()
    assert w.expected[-1] == 2
    assert w.leases.acquire(
        "t.p1",
        owner_node="a",
        owner_name="celery@a",
        owner_tag="r1",
        dispatch_id=w.engine.state.pending["t.p1"].dispatch_id,
    ).granted
    w.engine.tick()  # 2 records again (t.p3, t.foreign): beat must not trust the size
    assert w.expected[-1] is None
    assert set(w.engine.state.pending) == {"t.p3"}


def test_a_worker_whose_main_process_heartbeats_is_back_after_one_refresh(
    client: redis.Redis, store: SqlScheduleStore
) -> None:
    """One prefork child stuck: its lease goes stale but the worker's main process
    still refreshes the registration, so the worker is only set aside until that
    refresh (its other children must be able to take the run over)."""
    sync(store, 1)
    w = World(client, store)
    w.register("celery@a", 2)
    w.engine.load()
    w.engine.tick()
    assert w.sent_to() == ["celery@a"]
    assert w.leases.acquire(
        "t.p1",
        owner_node="a",
        owner_name="celery@a",
        owner_tag="run-1",
        dispatch_id=w.engine.state.pending["t.p1"].dispatch_id,
    ).granted
    sync(store, 1, 2)
    w.clock.advance(int(PING_TIMEOUT_S * 1000) + 1)  # the child stops pinging
    w.engine.tick()
    assert "celery@a" in w.engine.placement.stalled
    assert w.sent_to() == []
    w.clock.advance(10)
    assert w.registry.heartbeat("celery@a")  # the main process is alive
    w.engine.tick()
    assert "celery@a" not in w.engine.placement.stalled
    assert w.sent_to() == ["celery@a"]
    w.clock.advance(int(STEAL_DELAY_S * 1000))
    w.engine.tick()  # still owns the stale lease, but has been heard from since
    assert "celery@a" not in w.engine.placement.stalled
