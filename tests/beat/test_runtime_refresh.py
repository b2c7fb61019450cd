"""A running beat engine picks runtime schedules up from its store poll alone:
inserts, changes and removals are re-indexed one row each (no reload), an
unchanged upsert costs nothing, and a removed schedule is never dispatched.
Real Redis and SQLite."""

from __future__ import annotations

import time
from collections.abc import Iterator
from datetime import datetime, timedelta, timezone
from pathlib import Path

import pytest
import redis

from celery_dgs.beat.engine import BeatEngine
from celery_dgs.core.clock import SystemClock
from celery_dgs.core.spec import PeriodicSpec
from celery_dgs.dispatches import DispatchRecords
from celery_dgs.keys import KeySpace
from celery_dgs.leases.redis import RedisLeases
from celery_dgs.registry import WorkerInfo, WorkerRegistry
from celery_dgs.settings import DgsSettings
from celery_dgs.store.sql import SqlScheduleStore
from tests.beat.conftest import Recorder, open_store

KEYS = KeySpace("rtbeat")


def scrape(source: str, arg: str = "") -> PeriodicSpec:
    return PeriodicSpec(
        task="t.scrape",
        configuration=source,
        args=(arg or source,),
        scheduling_period=timedelta(hours=1),
        cooldown_duration=timedelta(minutes=50),
    )


@pytest.fixture
def store(tmp_path: Path) -> Iterator[SqlScheduleStore]:
    s = open_store(f"sqlite:///{tmp_path / 'dgs.sqlite3'}", 1)  # one declared: t.p1
    yield s
    s.close()


def test_runtime_changes_reach_a_running_engine_one_row_each(
    client: redis.Redis, store: SqlScheduleStore
) -> None:
    publish = Recorder()
    registry = WorkerRegistry(client, KEYS, ttl=30)
    registry.register(
        WorkerInfo(name="celery@a", node="a", queues=("celery",), slots=100, pool="threads", pid=1)
    )
    engine = BeatEngine(
        store=store,
        leases=RedisLeases(client, KEYS, ping_timeout=2.0, steal_delay=1.0),
        registry=registry,
        dispatches=DispatchRecords(client, KEYS),
        publish=publish,
        settings=DgsSettings(store_poll_interval=0.001),
        clock=SystemClock(),
    )
    engine.load()
    engine.tick()
    assert publish.names() == ["t.p1"]
    reloads: list[int] = []
    real_load = engine.load
    engine.load = lambda: reloads.append(1) or real_load()  # type: ignore[method-assign,func-returns-value]

    now = datetime.now(timezone.utc)
    store.upsert_runtime([scrape(f"s{i}") for i in range(5)], now)
    store.remove_runtime(["t.scrape@s4"], now)  # removed before beat saw it dispatched
    time.sleep(0.002)
    engine.tick()
    assert sorted(publish.names()) == [f"t.scrape@s{i}" for i in range(4)]
    assert engine.state.tracked.keys() == {"t.p1", *(f"t.scrape@s{i}" for i in range(4))}

    # An unchanged upsert: nothing for the poll to read.
    store.upsert_runtime([scrape(f"s{i}") for i in range(4)], now)
    assert engine.loader.refresh() == 0
    # A change: one row, re-read with its new args.
    store.upsert_runtime([scrape("s1", "new")], now)
    assert engine.loader.refresh() == 1
    assert engine.state.tracked["t.scrape@s1"].spec.args == ("new",)
    # A removal: one row, gone from beat; a run request cannot bring it back.
    store.remove_runtime(["t.scrape@s2"], now)
    store.request_run("t.scrape@s2", now)
    assert engine.loader.refresh() == 1, "one row, changed twice"
    assert "t.scrape@s2" not in engine.state.tracked
    store.request_run("t.scrape@s3", now)
    for name in ("t.scrape@s2", "t.scrape@s3"):
        record = engine.state.pending.get(name)
        if record is not None:
            engine.dispatches.take_back(name, record.dispatch_id)
    time.sleep(0.002)
    engine.tick()
    time.sleep(0.002)
    engine.tick()
    assert publish.names() == ["t.scrape@s3"], "the removed one is never dispatched"
    assert reloads == [], "no full reload"
