"""Value types of the lease backend: what a lease is and what each call returns."""

from __future__ import annotations

import enum
from bisect import bisect_left
from collections.abc import Mapping, Sequence, Set
from dataclasses import dataclass
from datetime import datetime
from typing import ClassVar

from ..errors import MalformedDataError
from .codec import HashReader, HashRecord, datetime_to_ms

#: Written as ``format`` in every lease hash; bump it when the layout changes.
LEASE_FORMAT_VERSION = 1
#: Written as ``format`` in dispatch records (:mod:`celery_dgs.dispatches`); the
#: acquire script reads them.
DISPATCH_FORMAT_VERSION = 1


@dataclass(frozen=True, kw_only=True)
class LeaseInfo(HashRecord):
    """One schedule's lease, as stored. Times are aware UTC datetimes from Redis ``TIME``.

    Read with :meth:`~celery_dgs.leases.codec.HashRecord.from_hash`."""

    schedule: str
    owner_node: str
    owner_name: str
    owner_tag: str
    started_at: datetime
    last_ping_at: datetime
    steal_start_at: datetime | None
    token: int
    progress: float | None
    cancel_requested: bool
    dispatch_id: str | None

    FORMAT_VERSION: ClassVar[int] = LEASE_FORMAT_VERSION
    KIND: ClassVar[str] = "lease"
    NAME_FIELD: ClassVar[str | None] = "schedule"
    NAME_REQUIRED: ClassVar[bool] = False

    @classmethod
    def from_fields(cls, r: HashReader, name: str) -> LeaseInfo:
        return cls(
            schedule=name,
            owner_node=r.get_str("owner_node"),
            owner_name=r.get_str("owner_name"),
            owner_tag=r.get_str("owner_tag"),
            started_at=r.get_time("started_at"),
            last_ping_at=r.get_time("last_ping_at"),
            steal_start_at=r.opt_time("steal_start_at"),
            token=r.get_int("token"),
            progress=r.opt_float("progress"),
            cancel_requested=r.flag("cancel_requested"),
            dispatch_id=r.opt_str("dispatch_id"),
        )


class AcquireStatus(str, enum.Enum):
    """Outcome of :meth:`RedisLeases.acquire`."""

    #: The caller holds the lease now (fresh, taken over, or a retry of its own acquire).
    GRANTED = "GRANTED"
    #: A live owner holds it (pinged within ping_timeout, no steal pending): skip the run.
    HELD = "HELD"
    #: The owner's pings are older than ping_timeout; a steal is marked but the
    #: steal delay has not passed, so the owner may still ping: skip the run.
    STEAL_PENDING = "STEAL_PENDING"
    #: The message's dispatch is no longer the schedule's current one (replaced,
    #: taken back, or already started): drop the message.
    STALE_DISPATCH = "STALE_DISPATCH"
    #: Redis restarted or failed over (its run_id changed, or the data was lost)
    #: less than ping_timeout + steal_delay ago, and its token counter for the
    #: schedule is below the store's floor (it lost a recorded grant): a lease
    #: lost with the data may still have a live owner. Skip the run.
    RECOVERING = "RECOVERING"


@dataclass(frozen=True, kw_only=True)
class AcquireResult:
    status: AcquireStatus
    #: Redis time of the call.
    now: datetime
    #: GRANTED: the fencing token and start of the caller's lease.
    token: int | None = None
    started_at: datetime | None = None
    #: GRANTED by take-over: the abandoned lease it replaced.
    took_over_from: LeaseInfo | None = None
    #: GRANTED for an owner_tag that already held the lease (a retried call).
    renewed: bool = False
    #: HELD / STEAL_PENDING: the current holder.
    holder: LeaseInfo | None = None
    #: STALE_DISPATCH: the schedule's current dispatch id (None: no dispatch pending).
    current_dispatch_id: str | None = None
    #: RECOVERING: when the restart grace ends (Redis time).
    grace_ends_at: datetime | None = None

    @property
    def granted(self) -> bool:
        return self.status is AcquireStatus.GRANTED


class PingStatus(str, enum.Enum):
    """Outcome of :meth:`RedisLeases.ping`."""

    #: Still the owner; a pending steal was cleared.
    OK = "OK"
    #: Still the owner (the ping counted), but an operator asked to cancel: stop the run.
    CANCELLED = "CANCELLED"
    #: The lease is gone or held by another owner_tag (stolen): stop the run.
    NOT_OWNER = "NOT_OWNER"


@dataclass(frozen=True, kw_only=True)
class PingResult:
    status: PingStatus
    #: Redis time of the ping.
    now: datetime
    #: The lease's token (None when NOT_OWNER).
    token: int | None = None
    #: NOT_OWNER: the owner_tag now holding the lease; None when there is no
    #: lease at all (taken over and released since, or lost with Redis's data).
    holder_tag: str | None = None

    @property
    def owner(self) -> bool:
        return self.status is not PingStatus.NOT_OWNER


class CancelStatus(str, enum.Enum):
    """Outcome of :meth:`RedisLeases.request_cancel`."""

    #: The targeted run holds the lease; its next ping returns CANCELLED.
    REQUESTED = "REQUESTED"
    #: The targeted run holds the lease and was already asked to stop.
    ALREADY = "ALREADY"
    #: No lease: the run ended (nothing is running).
    NO_LEASE = "NO_LEASE"
    #: Another run holds the lease (the targeted run ended, a new one started):
    #: nothing changed.
    OTHER_RUN = "OTHER_RUN"


class ReclaimStatus(str, enum.Enum):
    """Outcome of :meth:`RedisLeases.reclaim`."""

    #: The owner was silent past ``ping_timeout`` + ``steal_delay``: the lease is gone.
    RECLAIMED = "RECLAIMED"
    #: Silent past ``ping_timeout``: a steal is marked (the owner may still ping).
    PENDING = "PENDING"
    #: The owner pinged within ``ping_timeout``.
    LIVE = "LIVE"
    #: No lease, or another run's.
    OTHER = "OTHER"


@dataclass(frozen=True, kw_only=True)
class CancelResult:
    status: CancelStatus
    #: The run holding the lease (None when NO_LEASE): the targeted one, or,
    #: when OTHER_RUN, the run that was left alone.
    owner_tag: str | None = None
    token: int | None = None

    @property
    def requested(self) -> bool:
        """The targeted run is (now or already) asked to stop."""
        return self.status in (CancelStatus.REQUESTED, CancelStatus.ALREADY)


@dataclass(frozen=True, kw_only=True)
class RestartGrace:
    """The restart grace in force: the Redis server (its ``run_id``) is new
    since ``since`` (restarted, failed over, or first used), and until
    ``ends_at`` a schedule whose token counter that server lacks (a schedule
    granted a lease before) gets no new lease; ``now``: Redis time of the read."""

    since: datetime
    ends_at: datetime
    now: datetime


@dataclass(frozen=True, kw_only=True)
class LeaseScan:
    """Outcome of :meth:`RedisLeases.scan`: every lease, and the keys that could not be read."""

    leases: list[LeaseInfo]
    malformed: list[MalformedDataError]


@dataclass(frozen=True, kw_only=True)
class BeatView:
    """One dispatch round's snapshot of the leases and dispatch records
    (:meth:`~celery_dgs.leases.base.BeatViewSource.read`), at the backend's
    time ``now``. A read also sweeps: a lease not pinged within
    ``ping_timeout`` gets a steal marked, and is takeable (not running any
    more) once ``steal_delay`` has passed since the mark."""

    now: datetime
    #: Leases whose steal delay has passed: the schedule is not running any more.
    takeable: frozenset[str]
    #: Leases on which this read marked a steal (``steal_start_at`` set).
    marked: frozenset[str]
    #: Schedules holding a lease that is not takeable (foreign data included).
    running: Set[str]
    #: Running leases per worker (``owner_name``).
    running_by_worker: dict[str, int]
    #: Workers (``owner_name``) owning a lease not pinged within ``ping_timeout``,
    #: and the latest ``last_ping_at`` among those leases.
    stale_workers: dict[str, datetime]
    #: Per worker (``owner_name``), the last pings (ms) of its leases, sorted,
    #: as of the last read of the owners (takeable leases included).
    owner_pings: Mapping[str, Sequence[int]]
    #: Per worker, the last pings (as in ``owner_pings``) of its takeable leases.
    takeable_pings: Mapping[str, Sequence[int]]
    #: Schedule -> what is wrong with the data under its lease key (those read now).
    malformed: dict[str, str]
    dispatch_count: int
    #: The dispatch index's members; ``None`` when not read because
    #: ``dispatch_count`` was the expected one.
    dispatch_names: frozenset[str] | None
    #: Whether every owner was read this round (the lease generation changed).
    owners_read: bool
    #: The worker generation (bumped when a worker registers, deregisters or
    #: expires); ``""`` when unknown: the live workers must be read.
    worker_generation: str = ""

    def running_pinged_before(self, worker: str, before: datetime) -> int:
        """How many of ``worker``'s running leases (not takeable) were last
        pinged before ``before``, by the pings of the last read of the owners.
        A ping since that read only moves a lease later, so a lease counted
        here had no ping at or after ``before`` by then."""
        cut = datetime_to_ms(before)
        pinged = bisect_left(self.owner_pings.get(worker, ()), cut)
        if not pinged:
            return 0
        return pinged - sum(1 for ms in self.takeable_pings.get(worker, ()) if ms < cut)
