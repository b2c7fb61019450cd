"""Shared pieces of the beat tests: a real Redis client, a real store holding
periodic schedules ``t.p<hours>``, a publisher that records what beat sends,
and a settable monotonic clock."""

from __future__ import annotations

import uuid
from collections.abc import Callable, Sequence
from datetime import datetime, timedelta, timezone

import pytest
import redis

from celery_dgs.beat.engine import BeatEngine, DispatchOrder
from celery_dgs.core.clock import FakeClock
from celery_dgs.core.spec import PeriodicSpec
from celery_dgs.dispatches import DispatchRecords
from celery_dgs.keys import KeySpace
from celery_dgs.leases.redis import RedisLeases
from celery_dgs.registry import WorkerInfo, WorkerRegistry
from celery_dgs.settings import DgsSettings
from celery_dgs.store.sql import SqlScheduleStore


@pytest.fixture
def client(redis_client: redis.Redis) -> redis.Redis:
    return redis_client


def sync_periodic(store: SqlScheduleStore, *hours: int) -> None:
    """Declare ``t.p<h>`` with a period of ``h`` hours for each of ``hours``."""
    store.sync(
        [PeriodicSpec(task=f"t.p{h}", scheduling_period=timedelta(hours=h)) for h in hours],
        datetime.now(timezone.utc),
    )


def open_store(url: str, *hours: int) -> SqlScheduleStore:
    store = SqlScheduleStore.open(url)
    if hours:
        sync_periodic(store, *hours)
    return store


class Recorder:
    """Beat's publisher: records what is sent; ``refuse`` names schedules whose
    message "cannot be published", ``raise_error`` makes a whole publish fail."""

    def __init__(self) -> None:
        self.sent: list[DispatchOrder] = []
        self.refuse: set[str] = set()
        self.raise_error: Exception | None = None

    def __call__(self, orders: Sequence[DispatchOrder]) -> list[DispatchOrder]:
        if self.raise_error is not None:
            raise self.raise_error
        self.sent.extend(o for o in orders if o.schedule not in self.refuse)
        return [o for o in orders if o.schedule in self.refuse]

    def names(self) -> list[str]:
        """The schedules sent since the last call."""
        out = [o.schedule for o in self.sent]
        self.sent.clear()
        return out


class Mono:
    """A monotonic clock the test sets (``t``)."""

    def __init__(self) -> None:
        self.t = 1000.0

    def __call__(self) -> float:
        return self.t


def fake_clock_engine(
    store: SqlScheduleStore,
    client: redis.Redis,
    clock: FakeClock,
    publish: Recorder,
    *,
    slots: int,
    monotonic: Callable[[], float] | None = None,
    **settings: object,
) -> BeatEngine:
    """A beat engine on ``clock`` over a real store and Redis (keys of its
    own), one registered worker of ``slots`` slots, polling the store at
    every tick; ``settings``: more :class:`DgsSettings` fields."""
    keys = KeySpace(f"fc{uuid.uuid4().hex[:6]}")
    registry = WorkerRegistry(client, keys, ttl=600)
    worker = WorkerInfo(
        name="celery@a", node="a", queues=("celery",), slots=slots, pool="threads", pid=1
    )
    registry.register(worker)
    extra = {} if monotonic is None else {"monotonic": monotonic}
    return BeatEngine(
        store=store,
        leases=RedisLeases(client, keys, ping_timeout=2.0, steal_delay=1.0),
        registry=registry,
        dispatches=DispatchRecords(client, keys),
        publish=publish,
        settings=DgsSettings(store_poll_interval=0.001, **settings),  # type: ignore[arg-type]
        clock=clock,
        **extra,  # type: ignore[arg-type]
    )
