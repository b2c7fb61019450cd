"""Shared pieces of the beat tests: a real Redis client, a real store holding
periodic schedules ``t.p<hours>``, a publisher that records what beat sends,
and a settable monotonic clock."""

from __future__ import annotations

from collections.abc import Sequence
from datetime import datetime, timedelta, timezone

import pytest
import redis

from celery_dgs.beat.engine import DispatchOrder
from celery_dgs.core.spec import PeriodicSpec
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
