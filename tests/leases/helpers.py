"""Helpers for the lease tests: a pinned Redis clock and a bounded wait."""

from __future__ import annotations

from collections.abc import Callable
from datetime import timedelta
from typing import TypeVar

from celery_dgs.errors import MalformedDataError
from celery_dgs.leases.codec import text
from celery_dgs.leases.redis import RedisLeases
from tests.support.waiting import wait_for as poll

T = TypeVar("T")

PING_TIMEOUT_S = 0.3
STEAL_DELAY_S = 0.3
T0_MS = 1_800_000_000_000  # an arbitrary Redis-time origin for the pinned clock


class MsClock:
    """A pinned Redis time in ms, handed to the scripts instead of TIME."""

    def __init__(self, start_ms: int = T0_MS) -> None:
        self.ms = start_ms

    def __call__(self) -> int:
        return self.ms

    def advance(self, ms: int) -> int:
        self.ms += ms
        return self.ms


def wait_for(condition: Callable[[], T | None], *, timeout: float = 5.0, step: float = 0.01) -> T:
    """Poll ``condition`` every ``step`` s until it returns something truthy;
    fail after ``timeout`` s."""
    return poll(condition, timeout, "the condition", interval=step)


def running_names(leases: RedisLeases) -> set[str]:
    """The schedules whose lease is live: held and not takeable (a pending steal
    still counts: its owner may ping), foreign data included. Read-only: unlike
    beat's view it marks no steal, so a test can look without changing state."""
    now = leases.now()
    ping_timeout = timedelta(milliseconds=int(leases.ping_timeout_ms))
    steal_delay = timedelta(milliseconds=int(leases.steal_delay_ms))
    names = [text(n) for n in leases.client.zrange(leases.keys.lease_index(), 0, -1)]
    live = set()
    for name, found in leases.get_many(names).items():
        if isinstance(found, MalformedDataError):
            live.add(name)
        elif found is not None:
            stale = now - found.last_ping_at > ping_timeout
            steal = found.steal_start_at
            if not (stale and steal is not None and now - steal > steal_delay):
                live.add(name)
    return live
