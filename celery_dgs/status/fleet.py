"""Status rows: a page of rows read from the store (:func:`build_page`), or
every schedule's row, most urgent first, with the projection and the
priority classes applied over them all (:func:`build_rows`)."""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from datetime import datetime, timedelta
from typing import TYPE_CHECKING

from ..core.elevator import ElevatorState
from ..core.lookahead import DemandBook
from ..core.pool_slots import PoolSlots, overloaded_pools
from ..core.priority import DEFAULT_ELEVATOR_INTERVAL_S
from ..core.timing import DEFAULT_RETRY_LADDER
from ..leases.types import LeaseInfo
from ..settings import DgsSettings
from ..store.records import StoredSchedule
from .priorities import apply_priorities
from .projection import apply_projection
from .queues import queue_loads
from .row import StatusRow, build_row, urgency_key
from .workers import WorkerCheck

if TYPE_CHECKING:
    from ..registry import WorkerInfo


def build_rows(
    schedules: Iterable[StoredSchedule],
    leases: Mapping[str, LeaseInfo],
    now: datetime,
    *,
    retry_ladder: Sequence[timedelta] = DEFAULT_RETRY_LADDER,
    default_pool: str = "celery",
    slots: int | None = None,
    settings: DgsSettings | None = None,
    workers: Sequence[WorkerInfo] | None = None,
    elevator: ElevatorState | None = None,
) -> list[StatusRow]:
    """Every schedule's row, most urgent first (see :func:`urgency_key`).

    With ``slots`` (the live workers' slots), OK schedules projected to start
    late become WARNING ``projected_late`` (:func:`apply_projection`: each
    pool on its own workers' slots when ``workers`` consume several). With
    ``workers`` (the live ones), rows say when no worker can run them. The
    priority classes: from ``elevator`` (the leading beat's) when given, else
    replayed over every row."""
    schedules = list(schedules)
    check = None
    if workers is not None:
        check = WorkerCheck(workers, settings.capacity if settings is not None else None)
    rows = [
        build_row(
            s,
            leases.get(s.name),
            now,
            retry_ladder=retry_ladder,
            default_pool=default_pool,
            workers=check,
        )
        for s in schedules
    ]
    overloaded = False
    if slots is not None:
        # The demand matters to the classes (more than one in use) and to the look-ahead.
        classes = {r.priority for r in rows if r.priority is not None and r.active}
        lookahead = settings is not None and settings.lookahead
        book = DemandBook() if len(classes) > 1 or lookahead else None
        pool_slots = None
        if workers:
            pool_slots = {q.queue: q.slots for q in queue_loads(leases.values(), workers)}
        rows = apply_projection(
            rows,
            schedules,
            leases,
            now,
            slots=slots,
            settings=settings,
            book=book,
            pool_slots=pool_slots,
            default_pool=default_pool,
        )
        if book is not None:
            by_pool = (
                PoolSlots.of_workers(((w.pools, w.slots) for w in workers), default_pool)
                if workers
                else PoolSlots.every_pool(slots, default_pool)
            )
            overloaded = bool(overloaded_pools(book.by_pool(), by_pool))
    interval = settings.elevator_interval if settings is not None else DEFAULT_ELEVATOR_INTERVAL_S
    placed = apply_priorities(rows, now, interval, overloaded=overloaded, elevator=elevator)
    return sorted(placed, key=urgency_key)


def build_page(
    schedules: Iterable[StoredSchedule],
    leases: Mapping[str, LeaseInfo],
    now: datetime,
    *,
    settings: DgsSettings,
    default_pool: str = "celery",
    workers: Sequence[WorkerInfo] | None = None,
    elevator: ElevatorState | None = None,
) -> list[StatusRow]:
    """The rows of ``schedules`` in their order (the store's urgency order),
    each with its live run (``leases``) and holds, and the class beat serves
    each in (``elevator``: the leading beat's classes; without one, each in
    its own class). No projection: that needs every schedule
    (:func:`build_rows`)."""
    check = None if workers is None else WorkerCheck(workers, settings.capacity)
    rows = [
        build_row(
            s,
            leases.get(s.name),
            now,
            retry_ladder=settings.retry_ladder,
            default_pool=default_pool,
            workers=check,
        )
        for s in schedules
    ]
    interval = settings.elevator_interval
    return apply_priorities(rows, now, interval, elevator=elevator, every_row=False)
