"""The values the beat engine passes around: orders, tracked schedules,
pending dispatches. A round's lease and dispatch state is a
:class:`~celery_dgs.leases.types.BeatView`."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import Any, Protocol

from ..core.spec import ScheduleSpec
from ..core.stats import ScheduleStats
from ..store.records import StoredSchedule

#: Pseudo-worker used when no worker has registered and dgs_capacity is set.
ANY_WORKER = "*"


@dataclass(frozen=True)
class DispatchOrder:
    schedule: str
    task: str
    args: tuple[Any, ...]
    kwargs: dict[str, Any]
    dispatch_id: str
    worker: str  # Celery node name, or ANY_WORKER (publish to the pool queue)
    queue: str | None  # the schedule's pool (None: the default queue)
    expires_s: float
    should_start_by: float


class Publisher(Protocol):
    def __call__(self, orders: Sequence[DispatchOrder]) -> list[DispatchOrder]:
        """Send the messages; return the orders that could NOT be published, and
        those whose publication is not known to have happened (a broker pipeline
        that failed part-way): beat takes back their dispatch records."""
        ...


@dataclass(slots=True)
class Tracked:
    """A tracked schedule as of its stored row. Replaced when it changes,
    never changed in place: a :class:`~celery_dgs.beat.snapshot.BeatSnapshot`
    shares it with the metrics' thread."""

    spec: ScheduleSpec
    stats: ScheduleStats
    run_requested_at: datetime | None = None
    #: Set while the declaration is invalid (``spec``: the last valid version).
    declaration_error: str | None = None
    #: Set while an adaptive schedule is disabled (held, not indexed).
    disabled_reason: str | None = None
    #: The class a pending run request is served in (``None``: 0).
    run_requested_priority: int | None = None


def tracked_of(row: StoredSchedule, spec: ScheduleSpec) -> Tracked:
    """The tracked schedule of a stored row (``spec``: the row's, checked not ``None``)."""
    return Tracked(
        spec,
        row.stats,
        row.run_requested_at,
        row.declaration_error,
        row.disabled_reason,
        row.run_requested_priority,
    )


@dataclass
class Pending:
    dispatch_id: str
    worker: str
    since: float  # monotonic seconds
    #: The worker's instance (its first registration, Redis time) as the
    #: round that sent it read the workers (an adopted dispatch: the next
    #: round's); ``None`` until then.
    instance: datetime | None = None
