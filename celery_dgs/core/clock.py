"""The clock is injected, never patched: the beat, the simulator and the tests
each hand the code the clock they want."""

from __future__ import annotations

import time
from datetime import datetime, timedelta, timezone
from typing import Protocol


class Clock(Protocol):
    def now(self) -> datetime:
        """The current time as an aware UTC datetime."""
        ...


class SystemClock:
    def now(self) -> datetime:
        return datetime.now(timezone.utc)


class MonotonicClock:
    """Seconds from an arbitrary origin that never go backwards (for timeouts)."""

    def __call__(self) -> float:
        return time.monotonic()


class FakeClock:
    """A clock that moves only when told to (tests and the simulator)."""

    def __init__(self, start: datetime) -> None:
        if start.tzinfo is None:
            raise ValueError("FakeClock needs an aware datetime")
        self._now = start.astimezone(timezone.utc)

    def now(self) -> datetime:
        return self._now

    def advance(self, delta: timedelta | float) -> datetime:
        self._now += delta if isinstance(delta, timedelta) else timedelta(seconds=delta)
        return self._now

    def set(self, moment: datetime) -> None:
        self._now = moment.astimezone(timezone.utc)
