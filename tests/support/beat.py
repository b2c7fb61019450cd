"""A :class:`~celery_dgs.beat.engine.BeatEngine` on real parts, as the beat
process builds it: the test's store, and leases, a worker registry and dispatch
records on a real Redis client with the timings of ``settings``."""

from __future__ import annotations

import uuid
from collections.abc import Sequence
from typing import Any

import redis

from celery_dgs.beat.engine import BeatEngine
from celery_dgs.beat.types import DispatchOrder, Publisher
from celery_dgs.core.clock import Clock, SystemClock
from celery_dgs.dispatches import DispatchRecords
from celery_dgs.keys import KeySpace
from celery_dgs.leases.redis import RedisLeases
from celery_dgs.registry import WorkerInfo, WorkerRegistry
from celery_dgs.settings import DgsSettings
from celery_dgs.store.base import ScheduleStore


def with_one_worker(client: redis.Redis, prefix: str, slots: int = 4) -> KeySpace:
    """Keys of their own (``prefix`` and a random tag) with one live worker
    registered there for an hour: ``slots`` thread slots on the default
    queue, what a beat needs to dispatch."""
    keys = KeySpace(f"{prefix}{uuid.uuid4().hex[:6]}")
    WorkerRegistry(client, keys, ttl=3600).register(
        WorkerInfo(
            name="celery@w", node="w", queues=("celery",), slots=slots, pool="threads", pid=1
        )
    )
    return keys


def publish_nothing(orders: Sequence[DispatchOrder]) -> list[DispatchOrder]:
    """A publisher that sends nothing and refuses nothing."""
    return []


def beat_engine(
    store: ScheduleStore,
    client: redis.Redis,
    keys: KeySpace,
    *,
    settings: DgsSettings | None = None,
    publish: Publisher = publish_nothing,
    clock: Clock | None = None,
    **options: Any,
) -> BeatEngine:
    """A beat engine (not loaded) on ``store`` and Redis ``client`` under ``keys``;
    ``options`` are the engine's own (``monotonic``, ``max_interval``, ``leadership``...)."""
    settings = settings or DgsSettings()
    return BeatEngine(
        store=store,
        leases=RedisLeases(
            client, keys, ping_timeout=settings.ping_timeout, steal_delay=settings.steal_delay
        ),
        registry=WorkerRegistry(client, keys, ttl=settings.worker_ttl),
        dispatches=DispatchRecords(client, keys),
        publish=publish,
        settings=settings,
        clock=clock or SystemClock(),
        **options,
    )
