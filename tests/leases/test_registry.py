"""The worker registry: register, heartbeat, expiry, deregister."""

from __future__ import annotations

import dataclasses
import logging
from datetime import datetime, timedelta, timezone

import pytest
import redis

from celery_dgs.keys import KeySpace
from celery_dgs.leases.codec import ms_to_datetime
from celery_dgs.registry import WorkerInfo, WorkerRegistry
from tests.leases.helpers import T0_MS, MsClock, wait_for


def worker(name: str = "celery@host1", slots: int = 4, **kw: object) -> WorkerInfo:
    return WorkerInfo(
        name=name,
        node=name.split("@")[-1],
        queues=("celery", "dgs.w1"),
        slots=slots,
        pool="prefork",
        **{"pid": 1234, **kw},
    )  # type: ignore[arg-type]


def test_register_and_list(registry: WorkerRegistry) -> None:
    stored = registry.register(worker())
    assert stored.started_at == ms_to_datetime(T0_MS)
    assert stored.expires_at == ms_to_datetime(T0_MS + 300)
    registry.register(worker("celery@host2", slots=2))
    live = {w.name: w for w in registry.live_workers()}
    assert set(live) == {"celery@host1", "celery@host2"}
    assert live["celery@host1"] == stored
    assert live["celery@host1"].queues == ("celery", "dgs.w1")
    assert registry.total_slots() == 6


def test_re_registering_keeps_started_at_of_the_same_process(
    registry: WorkerRegistry, clock: MsClock
) -> None:
    registry.register(worker())
    clock.advance(100)
    again = registry.register(worker(slots=8))
    assert again.started_at == ms_to_datetime(T0_MS)
    assert again.expires_at == ms_to_datetime(T0_MS + 400)
    assert registry.total_slots() == 8
    given = datetime(2030, 1, 1, tzinfo=timezone.utc)
    assert registry.register(worker(started_at=given)).started_at == given


def test_expiry_and_heartbeat(
    registry: WorkerRegistry, clock: MsClock, client: redis.Redis, keys: KeySpace
) -> None:
    registry.register(worker("celery@a"))
    registry.register(worker("celery@b"))
    clock.advance(200)
    assert registry.heartbeat("celery@a") is True
    clock.advance(99)
    assert {w.name for w in registry.live_workers()} == {"celery@a", "celery@b"}
    clock.advance(1)  # b expires exactly now
    assert {w.name for w in registry.live_workers()} == {"celery@a"}
    assert client.zscore(keys.worker_index(), "celery@b") is None
    assert registry.heartbeat("celery@b") is False  # expired: must register again
    assert registry.total_slots() == 4
    clock.advance(200)
    assert registry.live_workers() == []


def test_deregister(registry: WorkerRegistry) -> None:
    registry.register(worker())
    assert registry.is_registered("celery@host1")
    assert not registry.is_registered("celery@host2")
    assert registry.deregister("celery@host1") is True
    assert not registry.is_registered("celery@host1")
    assert registry.deregister("celery@host1") is False
    assert registry.live_workers() == []
    assert registry.heartbeat("celery@host1") is False


def test_registration_expires_on_redis_time(client: redis.Redis, keys: KeySpace) -> None:
    registry = WorkerRegistry(client, keys, ttl=0.3)
    registry.register(worker())
    assert [w.name for w in registry.live_workers()] == ["celery@host1"]
    assert 0 < client.pttl(keys.worker("celery@host1")) <= 300
    wait_for(lambda: registry.live_workers() == [], timeout=3)
    assert client.exists(keys.worker("celery@host1")) == 0


def test_foreign_worker_data_is_skipped(
    registry: WorkerRegistry, client: redis.Redis, keys: KeySpace, caplog: pytest.LogCaptureFixture
) -> None:
    registry.register(worker("celery@ok"))
    registry.register(worker("celery@bad"))
    client.hset(keys.worker("celery@bad"), "queues", "{not json")
    with caplog.at_level(logging.ERROR):
        assert [w.name for w in registry.live_workers()] == ["celery@ok"]
    assert "queues" in caplog.text
    assert keys.worker("celery@bad") in caplog.text


def test_registered_at_is_kept_by_the_same_instance_and_new_for_a_restart(
    registry: WorkerRegistry, clock: MsClock
) -> None:
    """An instance is a pid and a started_at: its refreshes keep the Redis time
    of its first registration; a restart under the same name (a new pid, or
    the same pid with a new started_at, as in a container) gets a new one."""
    started = datetime(2030, 1, 1, tzinfo=timezone.utc)
    first = registry.register(worker(started_at=started))
    assert first.registered_at == ms_to_datetime(T0_MS)
    clock.advance(100)
    assert registry.register(worker(started_at=started)).registered_at == first.registered_at
    [live] = registry.live_workers()
    assert live.registered_at == first.registered_at
    clock.advance(100)
    restarted = registry.register(worker(started_at=started + timedelta(seconds=5)))
    assert restarted.registered_at == ms_to_datetime(T0_MS + 200)
    clock.advance(100)
    other_pid = registry.register(
        dataclasses.replace(worker(started_at=started + timedelta(seconds=5)), pid=99)
    )
    assert other_pid.registered_at == ms_to_datetime(T0_MS + 300)
    clock.advance(100)
    assert registry.register(worker(pid=99)).registered_at == other_pid.registered_at


def test_a_worker_registers_the_tasks_it_has(
    registry: WorkerRegistry, client: redis.Redis, keys: KeySpace, caplog: pytest.LogCaptureFixture
) -> None:
    tasks = frozenset({"proj.scrape", "proj.sync"})
    stored = registry.register(worker("celery@new", tasks=tasks))
    registry.register(worker("celery@old"))  # an older version's: no tasks field
    live = {w.name: w for w in registry.live_workers()}
    assert live["celery@new"] == stored
    assert live["celery@new"].tasks == tasks
    assert live["celery@new"].has_task("proj.sync")
    assert not live["celery@new"].has_task("proj.other")
    assert client.hget(keys.worker("celery@old"), "tasks") == b""
    assert live["celery@old"].tasks is None
    assert live["celery@old"].has_task("proj.other")
    client.hset(keys.worker("celery@new"), "tasks", '{"not": "a list"}')
    with caplog.at_level(logging.ERROR):
        assert [w.name for w in registry.live_workers()] == ["celery@old"]
    assert "field 'tasks' is not a JSON list of strings" in caplog.text
