"""The live workers for beat's rounds, read from the registry only when they
may have changed.

A round's view (:class:`~celery_dgs.leases.types.BeatView`) carries the worker
generation, which the registry's scripts bump when a worker registers,
deregisters or its registration is dropped. The workers read with one
generation stay the round's workers while the generation is the same, no
registration read may have expired since (a heartbeat moves a registration's
expiry on without a bump: the first expiry passed means reading again), and
the read is younger than :data:`MAX_AGE_S`. At a run rate of hundreds a
second that spares a registry round trip in almost every round. While a
worker owns a lease not pinged in time, placement asks for a fresh read each
round: whether the worker is heard from again is its registration's latest
refresh (:mod:`.stalled`).
"""

from __future__ import annotations

import time
from collections.abc import Callable
from datetime import datetime

from ..leases.types import BeatView
from ..registry import RegistryBackend, WorkerInfo

#: The longest beat keeps the workers it read without reading them again.
MAX_AGE_S = 1.0


class LiveWorkers:
    """The registry's live workers as of a round (see the module doc)."""

    def __init__(
        self,
        registry: RegistryBackend,
        *,
        max_age_s: float = MAX_AGE_S,
        monotonic: Callable[[], float] = time.monotonic,
    ) -> None:
        self.registry = registry
        self.max_age_s = max_age_s
        self._monotonic = monotonic
        self._workers: list[WorkerInfo] | None = None
        self._generation = ""
        self._read_at = float("-inf")
        #: The earliest expiry among the workers read (Redis time).
        self._first_expiry: datetime | None = None

    def at(self, view: BeatView, *, fresh: bool = False) -> list[WorkerInfo]:
        """The live workers for the round that read ``view``; ``fresh``: read
        them now (their registrations' latest refresh matters this round)."""
        mono = self._monotonic()
        if fresh or self._workers is None or not self._still_valid(view, mono):
            workers = self.registry.live_workers()
            self._workers, self._generation, self._read_at = workers, view.worker_generation, mono
            expiries = [w.expires_at for w in workers if w.expires_at is not None]
            self._first_expiry = min(expiries, default=None)
        return self._workers

    def _still_valid(self, view: BeatView, mono: float) -> bool:
        if not view.worker_generation or view.worker_generation != self._generation:
            return False
        if mono - self._read_at >= self.max_age_s:
            return False
        return self._first_expiry is None or view.now < self._first_expiry
