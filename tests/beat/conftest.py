"""Shared pieces of the beat tests: a real Redis client and a real store holding
periodic schedules ``t.p<hours>``."""

from __future__ import annotations

from datetime import datetime, timedelta, timezone

import pytest
import redis

from celery_dgs.core.spec import PeriodicSpec
from celery_dgs.store.sql import SqlScheduleStore


@pytest.fixture
def client(redis_client: redis.Redis) -> redis.Redis:
    return redis_client


def sync_periodic(store: SqlScheduleStore, *hours: int) -> None:
    """Declare ``t.p<h>`` with a period of ``h`` hours for each of ``hours``."""
    store.sync([PeriodicSpec(task=f"t.p{h}", scheduling_period=timedelta(hours=h))
                for h in hours], datetime.now(timezone.utc))  # fmt: skip


def open_store(url: str, *hours: int) -> SqlScheduleStore:
    store = SqlScheduleStore.open(url)
    if hours:
        sync_periodic(store, *hours)
    return store
