"""Helpers for the lease tests: a pinned Redis clock and a bounded wait."""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import TypeVar

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
    """Poll ``condition`` until it returns something truthy; fail after ``timeout`` s."""
    deadline = time.monotonic() + timeout
    while True:
        value = condition()
        if value:
            return value
        if time.monotonic() > deadline:
            raise AssertionError(f"condition not met within {timeout}s")
        time.sleep(step)
