"""The lease backend interface: what beat, the worker hooks and the CLI call.

:class:`~celery_dgs.leases.redis.RedisLeases` implements :class:`LeaseBackend`
and :class:`~celery_dgs.leases.view.BeatViewReader` implements
:class:`BeatViewSource`. The values they return are in
:mod:`celery_dgs.leases.types`. Every datetime in and out is an aware UTC
datetime of the backend's clock (Redis ``TIME``), never of the caller's.
"""

from __future__ import annotations

import logging
from abc import ABC, abstractmethod
from collections.abc import Mapping, Sequence
from datetime import datetime

from ..errors import MalformedDataError
from .types import (
    AcquireResult,
    BeatView,
    CancelResult,
    LeaseInfo,
    LeaseScan,
    PingResult,
    ReclaimStatus,
    RestartGrace,
)

log = logging.getLogger(__name__)


class BeatViewSource(ABC):
    """Reads beat's per-round :class:`~celery_dgs.leases.types.BeatView`; may keep
    what it read last (the owners of the leases) between reads."""

    @abstractmethod
    def read(self, *, expected_dispatches: int | None = None) -> BeatView:
        """Sweep and read the round's state.

        ``expected_dispatches``: how many dispatch records the caller believes
        are pending; when that is the count, ``dispatch_names`` is ``None``
        (not read). ``None``: always read them.
        """


class LeaseBackend(ABC):
    """One lease per schedule, held by the run that executes it.

    A lease is *stale* when ``now - last_ping_at > ping_timeout`` and
    *takeable* when ``now - steal_start_at > steal_delay``; at exactly the
    boundary it is still the owner's.
    """

    #: ``ping_timeout`` in milliseconds: a lease not pinged for longer is stale.
    ping_timeout_ms: int

    # -- transitions ----------------------------------------------------------
    @abstractmethod
    def acquire(
        self,
        schedule: str,
        *,
        owner_node: str,
        owner_name: str,
        owner_tag: str,
        dispatch_id: str | None = None,
        min_token: int = 0,
    ) -> AcquireResult:
        """Take the lease of ``schedule`` if it is free or abandoned and
        ``dispatch_id`` (``None``: an ad-hoc run) is the schedule's current
        dispatch; the new fencing token is above ``min_token``."""

    @abstractmethod
    def ping(self, schedule: str, owner_tag: str, progress: float | None = None) -> PingResult:
        """Heartbeat of the owner ``owner_tag``; ``progress`` in [0, 1] is stored if given."""

    @abstractmethod
    def release(self, schedule: str, owner_tag: str) -> bool:
        """The run ended (its outcome written): delete the lease if ``owner_tag``
        holds it, and signal the leading beat. False if not the owner."""

    def yield_lease(self, schedule: str, owner_tag: str) -> bool:
        """Warm shutdown: free the lease at once for another worker. False if not
        the owner. A release; the caller records that the run was interrupted."""
        return self.release(schedule, owner_tag)

    @abstractmethod
    def reclaim(self, schedule: str, owner_tag: str) -> ReclaimStatus:
        """Free the lease ``owner_tag`` holds if its owner is silent, by the
        steal protocol of a taker: past ``ping_timeout`` a steal is marked,
        ``steal_delay`` later the lease is deleted (for beat's reaper, when no
        taker comes)."""

    @abstractmethod
    def request_cancel(
        self, schedule: str, *, owner_tag: str | None = None, token: int | None = None
    ) -> CancelResult:
        """Ask the run named by ``owner_tag`` and/or ``token`` to stop; it sees
        CANCELLED at its next ping. A cancel aimed at a run that has ended never
        reaches the run that holds the lease now."""

    # -- beat's round ---------------------------------------------------------
    @abstractmethod
    def beat_view_reader(self) -> BeatViewSource:
        """A reader of beat's per-round view (one per beat: it keeps state)."""

    def beat_view(self, *, expected_dispatches: int | None = None) -> BeatView:
        """One :class:`~celery_dgs.leases.types.BeatView` read by a fresh reader."""
        return self.beat_view_reader().read(expected_dispatches=expected_dispatches)

    # -- reads ----------------------------------------------------------------
    @abstractmethod
    def now(self) -> datetime:
        """The backend's time."""

    @abstractmethod
    def restart_grace(self) -> RestartGrace | None:
        """The restart grace in force, or ``None`` (over, or not started: no
        grant or beat round has seen the server yet)."""

    @abstractmethod
    def lacks_tokens(self, tokens: Mapping[str, int]) -> bool:
        """Whether the token counter of any of these schedules is below the
        token recorded for it (``tokens``): the server lost their data, and
        the restart grace holds them."""

    @abstractmethod
    def get(self, schedule: str) -> LeaseInfo | None:
        """The schedule's lease; ``None`` if it has none. Foreign data raises
        :class:`~celery_dgs.errors.MalformedDataError`."""

    @abstractmethod
    def get_many(
        self, schedules: Sequence[str]
    ) -> dict[str, LeaseInfo | MalformedDataError | None]:
        """:meth:`get` of each schedule: ``None`` where there is no lease, the
        error (not raised) where its data is foreign."""

    @abstractmethod
    def scan(self) -> LeaseScan:
        """Every lease, and the ones whose data could not be read."""

    def all(self) -> list[LeaseInfo]:
        """Every readable lease; foreign data is logged at error level and skipped."""
        result = self.scan()
        for exc in result.malformed:
            log.error("skipping a lease: %s", exc)
        return result.leases
