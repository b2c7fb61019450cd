"""One schedule's status row: :class:`StatusRow`, built from what the store
and Redis hold and ``now`` (:func:`build_row`), its condition, and the order
rows are listed in (most urgent first)."""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from datetime import datetime, timedelta

from ..core.condition import (
    Condition,
    Level,
    RunningState,
    condition,
    declaration_invalid,
)
from ..core.spec import ScheduleSpec
from ..core.stats import ScheduleStats
from ..core.timing import DEFAULT_RETRY_LADDER, start_times
from ..leases.types import LeaseInfo
from ..store.records import StoredSchedule
from .adaptive import adaptive_fields
from .holds import INVALID_SPEC, Hold, holds_of, may_run_at
from .workers import WorkerCheck


@dataclass(frozen=True, kw_only=True)
class StatusRow:
    """One schedule as ``celery dgs status`` shows it."""

    name: str
    task: str
    configuration: str
    kind: str
    #: The queue whose workers may run it (the default queue when the spec has none).
    pool: str
    active: bool
    paused: bool
    level: Level
    #: A :class:`~celery_dgs.core.condition.Reason` value, or :data:`INVALID_SPEC`.
    reason: str
    message: str
    can_start_by: datetime | None
    should_start_by: datetime | None
    error_at: datetime | None
    last_good_start_at: datetime | None
    last_good_end_at: datetime | None
    last_start_at: datetime | None
    last_end_at: datetime | None
    average_duration: timedelta | None
    failure_count: int | None
    run_requested_at: datetime | None
    current_token: int | None
    #: The live run's lease, if one is held.
    running: LeaseInfo | None
    #: What holds it back, most blocking first (empty: nothing).
    holds: tuple[Hold, ...] = ()
    #: When beat may dispatch it: ``can_start_by`` unless it is running or a hold
    #: without an end applies (then ``None``). In the past: it may run now.
    may_run_at: datetime | None = None
    #: Adaptive schedules (else None): the ladder's index and its interval, the
    #: freshness target being served (``error_at``), the lister's last change,
    #: and why it is disabled (None: enabled).
    interval_index: int | None = None
    interval: timedelta | None = None
    next_target_at: datetime | None = None
    upstream_modified_at: datetime | None = None
    disabled_reason: str | None = None
    #: Its spec's priority (0-99, lower first; ``None``: invalid spec), and the
    #: class beat serves it in now: higher once the elevator has moved it up
    #: (:func:`apply_priorities`; a run request is served in class 0).
    priority: int | None = None
    effective_priority: int | None = None
    #: The class a pending run request is served in (``None``: 0).
    run_requested_priority: int | None = None
    #: The item counts of the last good or partially failed run (``None``: none).
    last_items_ok: int | None = None
    last_items_failed: int | None = None
    #: Its spec (``None``: the stored one is invalid).
    spec: ScheduleSpec | None = None

    @property
    def condition(self) -> str:
        """``OK``, ``WARNING`` or ``ERROR``."""
        return self.level.name


def schedule_condition(
    name: str,
    spec: ScheduleSpec,
    stats: ScheduleStats,
    lease: LeaseInfo | None,
    now: datetime,
    *,
    declaration_error: str | None = None,
) -> Condition:
    """A schedule's condition at ``now`` as ``status`` and the metrics show it:
    the core rule with its live run (``lease``), or ERROR ``declaration_invalid``
    while the deployed declaration is invalid."""
    running = RunningState(started_at=lease.started_at) if lease is not None else None
    cond = condition(spec, stats, running, now)
    if declaration_error is not None:
        cond = declaration_invalid(name, declaration_error, cond)
    return cond


def build_row(
    schedule: StoredSchedule,
    lease: LeaseInfo | None,
    now: datetime,
    *,
    retry_ladder: Sequence[timedelta] = DEFAULT_RETRY_LADDER,
    default_pool: str = "celery",
    workers: WorkerCheck | None = None,
) -> StatusRow:
    """The status of one stored schedule at ``now``. With ``workers`` (over the
    live ones), a schedule no live worker can run gets a :data:`HOLD_NO_WORKER`
    hold; ``workers=None`` skips that check."""
    spec, stats = schedule.spec, schedule.stats
    if spec is None:
        pool, level, reason = default_pool, Level.ERROR, INVALID_SPEC
        message = (
            f"{schedule.name}: the stored spec is invalid, beat cannot schedule it: "
            f"{schedule.spec_error}"
        )
        can = should = deadline = None
    else:
        cond = schedule_condition(
            schedule.name, spec, stats, lease, now, declaration_error=schedule.declaration_error
        )
        times = start_times(spec, stats, now, retry_ladder=retry_ladder)
        pool, level = spec.pool or default_pool, cond.level
        reason, message = cond.reason.value, cond.message
        can, should, deadline = times.can_start_by, times.should_start_by, cond.error_at
    ladder = adaptive_fields(spec, stats, deadline)
    holds = holds_of(
        schedule, lease, now, retry_ladder=retry_ladder, default_pool=default_pool, workers=workers
    )
    return StatusRow(
        name=schedule.name,
        task=schedule.task,
        configuration=schedule.configuration,
        kind=schedule.kind,
        pool=pool,
        active=schedule.active,
        paused=schedule.paused,
        level=level,
        reason=reason,
        message=message,
        can_start_by=can,
        should_start_by=should,
        error_at=deadline,
        last_good_start_at=stats.last_good_start_at,
        last_good_end_at=stats.last_good_end_at,
        last_start_at=stats.last_start_at,
        last_end_at=stats.last_end_at,
        average_duration=stats.average_good_duration,
        failure_count=stats.failure_count,
        run_requested_at=schedule.run_requested_at,
        current_token=schedule.current_token,
        running=lease,
        holds=holds,
        may_run_at=may_run_at(can, lease, holds, schedule.run_requested_at),
        disabled_reason=schedule.disabled_reason,
        last_items_ok=stats.last_items_ok,
        last_items_failed=stats.last_items_failed,
        **ladder,
        priority=None if spec is None else spec.priority,
        run_requested_priority=schedule.run_requested_priority,
        spec=spec,
    )


_FAR = datetime.max.replace(tzinfo=None)


def urgency_key(row: StatusRow) -> tuple[int, bool, datetime, str]:
    """ERROR first, then WARNING, then OK; within ERROR the oldest ``error_at``
    first (the longest overdue), otherwise the earliest ``should_start_by`` (the
    order beat dispatches in); then by name. Rows without times come first in
    their level (an invalid spec is the most urgent to fix)."""
    moment = row.error_at if row.level is Level.ERROR else row.should_start_by
    naive = _FAR if moment is None else moment.replace(tzinfo=None)
    return (-int(row.level), moment is not None, naive, row.name)


def any_error(rows: Iterable[StatusRow]) -> bool:
    """Whether any row is in ERROR (the health check's exit status)."""
    return any(r.level is Level.ERROR for r in rows)


def count_levels(rows: Iterable[StatusRow]) -> dict[str, int]:
    """``{"ERROR": n, "WARNING": n, "OK": n}``."""
    counts = {level.name: 0 for level in sorted(Level, reverse=True)}
    for row in rows:
        counts[row.condition] += 1
    return counts
