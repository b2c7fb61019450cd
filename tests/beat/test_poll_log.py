"""Beat's change poll says what it picked up: one INFO line per poll that read
any row, with the schedules added, removed and changed, those with a new run
and the deferred checks; a DEBUG line when only runs changed rows; nothing
for a poll that read none. Real Redis and SQLite."""

from __future__ import annotations

import logging
import time
from collections.abc import Iterator
from datetime import datetime, timedelta, timezone
from pathlib import Path

import pytest
import redis

from celery_dgs.beat.engine import BeatEngine
from celery_dgs.core.clock import SystemClock
from celery_dgs.core.spec import CheckSpec, PeriodicSpec
from celery_dgs.dispatches import DispatchRecords
from celery_dgs.keys import KeySpace
from celery_dgs.leases.redis import RedisLeases
from celery_dgs.registry import WorkerRegistry
from celery_dgs.settings import DgsSettings
from celery_dgs.store.check_types import NewCheck
from celery_dgs.store.sql import SqlScheduleStore
from tests.beat.conftest import Recorder, open_store
from tests.store.conftest import start

KEYS = KeySpace("polllog")


def scrape(source: str, hours: int = 1) -> PeriodicSpec:
    return PeriodicSpec(
        task="t.scrape",
        configuration=source,
        args=(source,),
        scheduling_period=timedelta(hours=hours),
    )


@pytest.fixture
def store(tmp_path: Path) -> Iterator[SqlScheduleStore]:
    s = open_store(f"sqlite:///{tmp_path / 'dgs.sqlite3'}", 1)
    yield s
    s.close()


def poll_lines(caplog: pytest.LogCaptureFixture, level: int = logging.INFO) -> list[str]:
    return [
        r.getMessage()
        for r in caplog.records
        if "store changes" in r.getMessage() and r.levelno == level
    ]


def test_each_poll_that_changed_anything_logs_its_counts(
    client: redis.Redis, store: SqlScheduleStore, caplog: pytest.LogCaptureFixture
) -> None:
    now = datetime.now(timezone.utc)
    store.upsert_runtime([scrape(f"s{i}") for i in range(3)], now)
    engine = BeatEngine(
        store=store,
        leases=RedisLeases(client, KEYS, ping_timeout=2.0, steal_delay=1.0),
        registry=WorkerRegistry(client, KEYS, ttl=30),
        dispatches=DispatchRecords(client, KEYS),
        publish=Recorder(),
        settings=DgsSettings(store_poll_interval=0.001, capacity=1),
        clock=SystemClock(),
    )
    engine.load()
    caplog.set_level(logging.INFO, logger="celery_dgs.beat")
    caplog.clear()

    store.upsert_runtime([scrape("s3"), scrape("s4"), scrape("s0", hours=2)], now)
    store.remove_runtime(["t.scrape@s1"], now)
    store.add_checks(
        [NewCheck(CheckSpec(task="t.check", key=k), now + timedelta(seconds=5)) for k in "ab"], now
    )
    time.sleep(0.002)
    engine.tick()
    [line] = poll_lines(caplog)
    assert (
        "store changes: 2 added, 1 removed, 1 changed, 0 with a new run, 2 deferred checks"
    ) in line, line

    caplog.clear()
    for _ in range(3):  # polls that read nothing say nothing
        time.sleep(0.002)
        engine.tick()
    assert poll_lines(caplog) == []

    # Runs ending change rows' statistics only: said at DEBUG, not INFO.
    caplog.set_level(logging.DEBUG, logger="celery_dgs.beat")
    caplog.clear()
    for i, name in enumerate(("t.scrape@s2", "t.scrape@s3")):
        start(store, name, f"r{i}", i + 1, now)
        store.record_run_end(run_id=f"r{i}", outcome="success", ended_at=now)
    time.sleep(0.002)
    engine.tick()
    assert poll_lines(caplog) == []
    [line] = poll_lines(caplog, logging.DEBUG)
    assert "0 added, 0 removed, 0 changed, 2 with a new run, 0 deferred checks" in line, line

    caplog.clear()
    assert store.set_paused("t.scrape@s2", True)  # a pause is worth an INFO line
    time.sleep(0.002)
    engine.tick()
    [line] = poll_lines(caplog)
    assert "0 added, 0 removed, 1 changed, 0 with a new run" in line, line

    # A deferred check moved by its run: the run's effect, said at DEBUG.
    caplog.clear()
    check = CheckSpec(task="t.check", key="a").name
    start(store, check, "c1", 1, now)
    store.record_run_end(run_id="c1", outcome="success", ended_at=now, verdict=False)
    time.sleep(0.002)
    engine.tick()
    assert poll_lines(caplog) == []
    [line] = poll_lines(caplog, logging.DEBUG)
    assert "0 with a new run, 1 deferred checks (1 that had run)" in line, line

    # A check's first run: its start, then its failure, change statistics only.
    caplog.clear()
    other = CheckSpec(task="t.check", key="b").name
    start(store, other, "c2", 1, now)
    time.sleep(0.002)
    engine.tick()
    store.record_run_end(run_id="c2", outcome="failure", ended_at=now, error="boom")
    time.sleep(0.002)
    engine.tick()
    assert poll_lines(caplog) == []
    assert len(poll_lines(caplog, logging.DEBUG)) == 2
