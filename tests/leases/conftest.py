"""Fixtures for the lease, dispatch and registry tests (real servers from tests/conftest.py)."""

from __future__ import annotations

import pytest
import redis

from celery_dgs.dispatches import DispatchRecords
from celery_dgs.keys import KeySpace
from celery_dgs.leases import RedisLeases
from celery_dgs.registry import WorkerRegistry
from tests.leases.helpers import PING_TIMEOUT_S, STEAL_DELAY_S, MsClock


@pytest.fixture
def client(redis_client: redis.Redis) -> redis.Redis:
    return redis_client


@pytest.fixture
def keys() -> KeySpace:
    return KeySpace("test-dgs")


@pytest.fixture
def clock() -> MsClock:
    return MsClock()


@pytest.fixture
def leases(client: redis.Redis, keys: KeySpace, clock: MsClock) -> RedisLeases:
    """Leases on the pinned clock: exact boundaries."""
    return RedisLeases(
        client, keys, ping_timeout=PING_TIMEOUT_S, steal_delay=STEAL_DELAY_S, clock_ms=clock
    )


@pytest.fixture
def real_leases(client: redis.Redis, keys: KeySpace) -> RedisLeases:
    """Leases on Redis TIME, as in production."""
    return RedisLeases(client, keys, ping_timeout=PING_TIMEOUT_S, steal_delay=STEAL_DELAY_S)


@pytest.fixture
def dispatches(client: redis.Redis, keys: KeySpace, clock: MsClock) -> DispatchRecords:
    return DispatchRecords(client, keys, clock_ms=clock)


@pytest.fixture
def registry(client: redis.Redis, keys: KeySpace, clock: MsClock) -> WorkerRegistry:
    return WorkerRegistry(client, keys, ttl=0.3, clock_ms=clock)
