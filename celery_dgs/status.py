"""Status rows for ``celery dgs status`` and ``celery dgs leases``.

Pure functions of what the store and Redis hold (:class:`StoredSchedule`,
:class:`LeaseInfo`) and ``now``: each schedule's condition (core
:func:`~celery_dgs.core.condition.condition`), its start times (core
:func:`~celery_dgs.core.timing.start_times`), its statistics and who runs it.
No Celery, no I/O: the CLI reads the state and formats the rows.

Decisions:

* A paused schedule's condition is computed as for any other one: pausing
  stops dispatch, it does not make stale data fresh. The row says it is paused.
* A stored spec that no longer validates is ERROR with reason
  ``invalid_spec`` (beat cannot schedule it) and no times.
* A schedule whose declaration is invalid (``declaration_error``) is ERROR
  ``declaration_invalid`` naming the field: beat serves the last valid stored
  version, whose times are shown.
* A schedule with a lease is running (whatever its steal state), as for beat's
  metrics: the condition then uses the lease's ``started_at``.
* Given the worker slots, an OK schedule that the projection of beat's greedy
  order over the live state (:mod:`~celery_dgs.core.projection`) starts after
  its ``should_start_by`` is WARNING ``projected_late``.
* Each row says when beat may dispatch it (``may_run_at``) and what holds it
  back (``holds``, most blocking first): an invalid spec, inactive, paused,
  no live worker able to run it (none consumes its pool, or
  ``dont_run_on_nodes`` excludes every one that does), a retry backoff after
  failures, a blackout window. ``may_run_at`` is ``None`` while it runs or
  while a hold without an end (paused, no worker, ...) applies; otherwise it
  is ``can_start_by`` (past: it may run now). A pending run request (``celery
  dgs run``) is dispatched at once, ahead of backoff and blackouts as beat
  does: ``may_run_at`` is then the request's time.
"""

from __future__ import annotations

import dataclasses
import fnmatch
import logging
import math
import re
import threading
import time
from collections.abc import Callable, Collection, Iterable, Mapping, Sequence
from dataclasses import dataclass, replace
from datetime import datetime, timedelta, timezone
from typing import TYPE_CHECKING, Any

from .core import adaptive
from .core.blackout import blackout_containing
from .core.condition import (
    Condition,
    Level,
    Reason,
    RunningState,
    condition,
    declaration_invalid,
)
from .core.lookahead import DemandBook
from .core.priority import (
    DEFAULT_ELEVATOR_INTERVAL_S,
    demand_exceeds,
    effective_priority,
    level_classes,
    short_after_s,
)
from .core.projection import Waiting, project_starts
from .core.schedule_names import CHECK_CONFIGURATION_PREFIX, split_schedule_name
from .core.spec import AdaptiveSpec, ScheduleSpec
from .core.spec_values import AD_HOC_PRIORITY
from .core.stats import ScheduleStats
from .core.timing import (
    DEFAULT_RETRY_LADDER,
    expected_duration,
    retry_at,
    start_margin,
    start_times,
)
from .leases.types import LeaseInfo
from .settings import DgsSettings
from .store.check_types import CheckSummary
from .store.records import StoredSchedule

logger = logging.getLogger("celery_dgs.status")

if TYPE_CHECKING:
    from .registry import WorkerInfo

#: Reason code of a schedule whose stored spec no longer validates.
INVALID_SPEC = "invalid_spec"

#: Steal states of a lease (``celery dgs leases``).
STEAL_NONE = "none"  # pinged within ping_timeout
STEAL_STALE = "stale"  # no ping for ping_timeout; no sweep has marked a steal yet
STEAL_PENDING = "pending"  # steal marked; the owner may still ping within steal_delay
STEAL_TAKEABLE = "takeable"  # steal delay over: beat treats it as not running


#: Hold codes: why beat will not dispatch a schedule now (``StatusRow.holds``).
HOLD_INVALID_SPEC = INVALID_SPEC  # until its stored spec is fixed
HOLD_INACTIVE = "inactive"  # removed (runtime) or no longer declared
HOLD_PAUSED = "paused"  # until resumed
HOLD_NO_WORKER = "no_worker"  # until a live worker can run it
HOLD_BACKOFF = "backoff"  # until the retry step after its last failure ends
HOLD_BLACKOUT = "blackout"  # until the blackout window it is in ends
HOLD_DISABLED = "disabled"  # adaptive, too many failures: until an upsert enables it
HOLD_LOOKAHEAD = "lookahead"  # dgs_lookahead: until a long run ends or shorter work allows


#: The :data:`HOLD_NO_WORKER` reason shared by every schedule when no worker is live.
NO_LIVE_WORKER = "no live worker is registered (and dgs_capacity is not set)"


@dataclass(frozen=True, kw_only=True)
class Hold:
    """Why beat will not dispatch a schedule now, and until when."""

    #: One of the ``HOLD_*`` codes.
    reason: str
    #: A sentence with ISO-8601 times.
    message: str
    #: When it ends by itself (backoff, blackout); ``None``: until something changes.
    until: datetime | None = None
    #: Backoff: the retry ladder step it waits (1-based), of how many, and its delay.
    retry_step: int | None = None
    retry_steps: int | None = None
    retry_delay: timedelta | None = None


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
        **ladder,
        priority=None if spec is None else spec.priority,
        run_requested_priority=schedule.run_requested_priority,
    )


def adaptive_fields(
    spec: ScheduleSpec | None, stats: ScheduleStats, target: datetime | None
) -> dict[str, Any]:
    """An adaptive schedule's :class:`StatusRow` ladder fields (none for others)."""
    if not isinstance(spec, AdaptiveSpec):
        return {}
    index = adaptive.current_index(spec, stats)
    return {
        "interval_index": index,
        "interval": adaptive.current_interval(spec, stats),
        "next_target_at": target,
        "upstream_modified_at": stats.upstream_modified_at,
    }


#: The groups of adaptive schedules the metrics count (seed 001's pools).
ADAPTIVE_GROUPS = ("never_visited", "modified_since_visit", "other", "disabled")


@dataclass(frozen=True)
class AdaptiveSummary:
    """Adaptive schedules by group, and how far the earliest freshness target
    among the enabled ones that are not running lags ``now`` (positive: beat
    serves targets already past; ``None``: no such schedule)."""

    counts: dict[str, int]
    target_drift: timedelta | None


def adaptive_summary(
    items: Iterable[tuple[ScheduleSpec, ScheduleStats, bool, bool]], now: datetime
) -> AdaptiveSummary:
    """Over ``(spec, stats, disabled, running)`` of the tracked schedules
    (others than adaptive ones are skipped): each enabled one is
    ``never_visited`` (no good run), ``modified_since_visit`` (its lister
    reported a change after its last good run) or ``other``."""
    counts = dict.fromkeys(ADAPTIVE_GROUPS, 0)
    earliest: datetime | None = None
    for spec, stats, disabled, running in items:
        if not isinstance(spec, AdaptiveSpec):
            continue
        if disabled:
            counts["disabled"] += 1
            continue
        if not stats.has_succeeded:
            counts["never_visited"] += 1
        elif adaptive.upstream_changed(stats):
            counts["modified_since_visit"] += 1
        else:
            counts["other"] += 1
        if not running:
            goal = adaptive.target(spec, stats, stats.registered_at or now)
            earliest = goal if earliest is None else min(earliest, goal)
    return AdaptiveSummary(counts, None if earliest is None else now - earliest)


def may_run_at(
    can_start_by: datetime | None,
    lease: LeaseInfo | None,
    holds: Sequence[Hold],
    run_requested_at: datetime | None = None,
) -> datetime | None:
    """``can_start_by`` (a pending run request's time instead, as beat indexes
    it), or ``None`` while running or held with no end in sight."""
    if can_start_by is None or lease is not None or any(h.until is None for h in holds):
        return None
    return run_requested_at if run_requested_at is not None else can_start_by


def holds_of(
    schedule: StoredSchedule,
    lease: LeaseInfo | None,
    now: datetime,
    *,
    retry_ladder: Sequence[timedelta] = DEFAULT_RETRY_LADDER,
    default_pool: str = "celery",
    workers: WorkerCheck | None = None,
) -> tuple[Hold, ...]:
    """What keeps beat from dispatching a stored schedule (:func:`holds_for`)."""
    return holds_for(
        schedule.name,
        schedule.spec,
        schedule.stats,
        now,
        active=schedule.active,
        paused=schedule.paused,
        running=lease is not None,
        run_requested=schedule.run_requested_at is not None,
        retry_ladder=retry_ladder,
        default_pool=default_pool,
        workers=workers,
        disabled_reason=schedule.disabled_reason,
    )


def holds_for(
    name: str,
    spec: ScheduleSpec | None,
    stats: ScheduleStats,
    now: datetime,
    *,
    active: bool = True,
    paused: bool = False,
    running: bool = False,
    run_requested: bool = False,
    retry_ladder: Sequence[timedelta] = DEFAULT_RETRY_LADDER,
    default_pool: str = "celery",
    workers: WorkerCheck | None = None,
    disabled_reason: str | None = None,
) -> tuple[Hold, ...]:
    """What keeps beat from dispatching a schedule (see :class:`Hold`), most
    blocking first: invalid spec, inactive, paused, disabled (an adaptive
    schedule after too many failures), no worker, backoff, blackout.
    ``workers=None`` skips the no-worker check. A run request is served
    regardless of backoff and blackouts, as beat does. For the CLI's rows and
    beat's metrics alike."""
    holds: list[Hold] = []
    if spec is None:
        holds.append(
            Hold(
                reason=HOLD_INVALID_SPEC,
                message=(f"{name}: beat cannot schedule it until its stored spec is valid again"),
            )
        )
    if not active:
        holds.append(
            Hold(
                reason=HOLD_INACTIVE,
                message=(
                    f"{name} is inactive (removed, or no longer declared): beat does not "
                    "schedule it"
                ),
            )
        )
    if paused:
        holds.append(
            Hold(
                reason=HOLD_PAUSED,
                message=(
                    f"{name} is paused: beat dispatches it again once resumed "
                    f"(celery dgs resume {name})"
                ),
            )
        )
    if disabled_reason is not None:
        holds.append(Hold(reason=HOLD_DISABLED, message=disabled_reason))
    if spec is None:
        return tuple(holds)
    if workers is not None:
        reason = workers.why_none(spec.pool or default_pool, spec.dont_run_on_nodes)
        if reason is not None:
            holds.append(Hold(reason=HOLD_NO_WORKER, message=f"{name}: {reason}"))
    if run_requested or running:
        return tuple(holds)
    if isinstance(spec, AdaptiveSpec):  # its retry: the ladder's shortest interval
        retry_ladder = (adaptive.ladder_interval(0, spec.interval_unit),)
    retry = retry_at(stats, retry_ladder) if retry_ladder else None
    if retry is not None and retry > now:
        failures = stats.failure_count or 0
        step = min(failures, len(retry_ladder))
        delay = retry_ladder[step - 1]
        holds.append(
            Hold(
                reason=HOLD_BACKOFF,
                until=retry,
                retry_step=step,
                retry_steps=len(retry_ladder),
                retry_delay=delay,
                message=(
                    f"{name} is backing off after {failures} consecutive failures: retry "
                    f"step {step} of {len(retry_ladder)} ({delay.total_seconds():g}s) ends at "
                    f"{_iso(retry)}"
                ),
            )
        )
    window = blackout_containing(spec.blackout_periods, spec.tz, now)
    if window is not None:
        holds.append(
            Hold(
                reason=HOLD_BLACKOUT,
                until=window[1],
                message=(f"{name} is inside a blackout window until {_iso(window[1])}"),
            )
        )
    return tuple(holds)


class WorkerCheck:
    """Whether any live worker can run a schedule of a pool with given excluded
    nodes, as beat places it (the pool's queue among the worker's queues, a
    slot, neither its node nor its name excluded). Each (pool, excluded nodes)
    pair is checked once: schedules share a few of them."""

    def __init__(self, workers: Sequence[WorkerInfo], capacity: int | None = None) -> None:
        self.workers = list(workers)
        self.capacity = capacity
        self._why: dict[tuple[str, frozenset[str]], str | None] = {}

    def why_none(self, queue: str, excluded: frozenset[str]) -> str | None:
        """Why no live worker can run it, or ``None`` when one can."""
        key = (queue, excluded)
        if key not in self._why:
            self._why[key] = self._check(queue, excluded)
        return self._why[key]

    def _check(self, queue: str, excluded: frozenset[str]) -> str | None:
        workers = self.workers
        if not workers:
            if self.capacity:
                return None  # fixed-capacity mode: beat publishes to the pool's queue
            return NO_LIVE_WORKER
        in_pool = [w for w in workers if queue in w.queues]
        if not in_pool:
            consumed = sorted({q for w in workers for q in w.queues})
            return (
                f"no live worker consumes its pool {queue!r} (live workers consume: "
                f"{', '.join(consumed) or 'nothing'})"
            )
        allowed = [w for w in in_pool if w.node not in excluded and w.name not in excluded]
        if not allowed:
            nodes = ", ".join(sorted({w.node for w in in_pool}))
            return (
                f"dont_run_on_nodes excludes every live worker of its pool {queue!r} "
                f"(nodes: {nodes})"
            )
        if all(w.slots <= 0 for w in allowed):
            return f"the live workers of its pool {queue!r} it may run on have no slots"
        return None


def _iso(moment: datetime) -> str:
    return moment.isoformat(timespec="seconds")


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
) -> list[StatusRow]:
    """Every schedule's row, most urgent first (see :func:`urgency_key`).

    With ``slots`` (the live workers' slots), OK schedules projected to start
    late become WARNING ``projected_late`` (:func:`apply_projection`). With
    ``workers`` (the live ones), rows say when no worker can run them."""
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
        rows = apply_projection(
            rows, schedules, leases, now, slots=slots, settings=settings, book=book
        )
        overloaded = book is not None and demand_exceeds(book.total(), slots)
    interval = settings.elevator_interval if settings is not None else DEFAULT_ELEVATOR_INTERVAL_S
    return sorted(apply_priorities(rows, now, interval, overloaded=overloaded), key=urgency_key)


def apply_priorities(
    rows: Sequence[StatusRow],
    now: datetime,
    elevator_interval: float | None,
    *,
    overloaded: bool = False,
) -> list[StatusRow]:
    """Rows with ``effective_priority`` set as beat's index computes it
    (:func:`celery_dgs.core.priority.effective_priority`): while capacity is
    short (a due schedule has waited half an elevator interval, or
    ``overloaded``: the schedules' demand exceeds the live workers' slots), a
    schedule beat may dispatch that is due (its ``can_start_by`` and
    ``should_start_by`` passed; a run request since it was asked, in class 0)
    moves up one class with due work per elevator step, up to the top class in
    use; the others are served in their own class. A due run request makes
    capacity count as short too, as in beat's index; beat also keeps the
    classes' order for an elevator interval after capacity was last short,
    which a snapshot cannot see."""
    due: dict[str, tuple[int, float]] = {}
    top: int | None = None  # the top class in use keeps level 0
    requested = False  # a due run request: capacity counts as short
    for row in rows:
        if row.priority is None or row.running is not None or row.paused or not row.active:
            continue
        cls = row.priority
        if row.run_requested_at is not None:
            asked = row.run_requested_priority
            cls = AD_HOC_PRIORITY if asked is None else asked
            due[row.name] = (cls, row.run_requested_at.timestamp())
            requested = True
        elif row.may_run_at is not None and row.should_start_by is not None:
            at = max(row.may_run_at, row.should_start_by)
            if at <= now:
                due[row.name] = (cls, at.timestamp())
        top = cls if top is None else min(top, cls)
    classes = level_classes((cls for cls, _ in due.values()), top if due else None)
    moment = now.timestamp()
    oldest = min((at for _, at in due.values()), default=math.inf)
    short = overloaded or requested or oldest <= moment - short_after_s(elevator_interval)
    out = []
    for row in rows:
        if row.name in due:
            cls, due_at = due[row.name]
            effective: int | None = (
                effective_priority(cls, due_at, moment, classes, elevator_interval)
                if short
                else cls
            )
        else:
            effective = row.priority
        out.append(replace(row, effective_priority=effective))
    return out


def apply_projection(
    rows: Sequence[StatusRow],
    schedules: Iterable[StoredSchedule],
    leases: Mapping[str, LeaseInfo],
    now: datetime,
    *,
    slots: int,
    settings: DgsSettings | None = None,
    book: DemandBook | None = None,
) -> list[StatusRow]:
    """Replay beat's order over the live state (:func:`~celery_dgs.core.projection.project_starts`)
    and turn OK rows projected to start after ``should_start_by`` into WARNING
    ``projected_late``. Paused, inactive, invalid and running schedules take no
    new slot, nor those no live worker can run (a :data:`HOLD_NO_WORKER` hold);
    each running one holds its slot until its expected end. With
    ``dgs_lookahead`` the replay applies beat's admission (a long run it
    would hold leaves its slot to the others meanwhile), and a schedule it
    holds now while a slot is free gets a :data:`HOLD_LOOKAHEAD` hold.

    ``book`` (a new one, filled here) receives the schedules' shares of a slot
    as beat keeps them: those it may schedule (deferred checks are none);
    the look-ahead replay uses it, or a book of its own without one."""
    by_name = {s.name: s for s in schedules}
    conf = settings or DgsSettings()
    waiting: list[Waiting] = []
    busy_until: list[float] = []
    busy_run_s: list[float] = []
    if book is None and conf.lookahead:
        book = DemandBook()
    for row in rows:
        stored = by_name.get(row.name)
        if stored is None or stored.spec is None or not row.active or row.paused:
            continue
        disabled = row.disabled_reason is not None  # held by beat until an upsert enables it
        if disabled and row.running is None:
            continue
        expected = expected_duration(stored.spec, stored.stats).total_seconds()
        if book is not None and not disabled:
            book.note_schedule(row.name, stored.spec, stored.stats, expected)
        if row.running is not None:
            busy_until.append(row.running.started_at.timestamp() + expected)
            busy_run_s.append(expected)
        elif (
            row.can_start_by is not None
            and row.should_start_by is not None
            and not any(h.reason == HOLD_NO_WORKER for h in row.holds)
        ):
            margin = start_margin(stored.spec, stored.stats).total_seconds()
            waiting.append(
                Waiting(
                    row.name,
                    row.can_start_by.timestamp(),
                    row.should_start_by.timestamp(),
                    expected,
                    margin,
                )
            )
    free = max(slots - len(busy_until), 0)
    held_now: set[str] = set()
    projected = project_starts(
        waiting,
        busy_until,
        free,
        now.timestamp(),
        order=conf.order_policy,
        lookahead=book if conf.lookahead else None,
        busy_run_s=busy_run_s,
        held_now=held_now,
    )
    out = []
    for row in rows:
        if row.name in held_now:
            hold = Hold(
                reason=HOLD_LOOKAHEAD,
                message=(
                    f"{row.name}: the look-ahead holds it while the long runs in progress "
                    f"take the slots the shorter schedules need (dgs_lookahead)"
                ),
            )
            row = dataclasses.replace(row, holds=(*row.holds, hold), may_run_at=None)
        start = projected.get(row.name)
        if (
            row.level is Level.OK
            and start is not None
            and row.should_start_by is not None
            and start > row.should_start_by.timestamp()
        ):
            at = datetime.fromtimestamp(start, timezone.utc).isoformat(timespec="seconds")
            row = dataclasses.replace(
                row,
                level=Level.WARNING,
                reason=Reason.PROJECTED_LATE.value,
                message=f"{row.name}: the queue ahead of it on {slots} slots is projected "
                f"to start it at {at}, after its should_start_by "
                f"{row.should_start_by.isoformat(timespec='seconds')}",
            )
        out.append(row)
    return out


_FAR = datetime.max.replace(tzinfo=None)


def urgency_key(row: StatusRow) -> tuple[int, bool, datetime, str]:
    """ERROR first, then WARNING, then OK; within ERROR the oldest ``error_at``
    first (the longest overdue), otherwise the earliest ``should_start_by`` (the
    order beat dispatches in); then by name. Rows without times come first in
    their level (an invalid spec is the most urgent to fix)."""
    moment = row.error_at if row.level is Level.ERROR else row.should_start_by
    naive = _FAR if moment is None else moment.replace(tzinfo=None)
    return (-int(row.level), moment is not None, naive, row.name)


def matches(
    row: StatusRow,
    *,
    conditions: Collection[str] = (),
    pools: Collection[str] = (),
    patterns: Sequence[str] = (),
) -> bool:
    """Whether a row passes the filters: any of ``conditions`` (level names,
    case-insensitive), any of ``pools``, a name matching any of ``patterns``
    (:func:`name_matches`). An empty filter accepts everything."""
    if conditions and row.condition not in {c.upper() for c in conditions}:
        return False
    if pools and row.pool not in pools:
        return False
    return not patterns or any(name_matches(row.name, p) for p in patterns)


_GLOB_CHARS = frozenset("*?[")


def name_matches(name: str, pattern: str) -> bool:
    """A pattern with a glob character (``*``, ``?``, ``[``) is a shell glob on
    the whole name; a plain word matches anywhere in it. Case-sensitive."""
    return name_matcher(pattern)(name)


def name_matcher(pattern: str) -> Callable[[str], bool]:
    """:func:`name_matches` for one pattern, compiled once (for many names)."""
    if _GLOB_CHARS.intersection(pattern):
        match = re.compile(fnmatch.translate(pattern)).match
        return lambda name: match(name) is not None
    return lambda name: pattern in name


def any_error(rows: Iterable[StatusRow]) -> bool:
    """Whether any row is in ERROR (the health check's exit status)."""
    return any(r.level is Level.ERROR for r in rows)


def count_levels(rows: Iterable[StatusRow]) -> dict[str, int]:
    """``{"ERROR": n, "WARNING": n, "OK": n}``."""
    counts = {level.name: 0 for level in sorted(Level, reverse=True)}
    for row in rows:
        counts[row.condition] += 1
    return counts


def ping_age(lease: LeaseInfo, now: datetime) -> float:
    """Seconds since the owner's last ping (never negative)."""
    return max(0.0, (now - lease.last_ping_at).total_seconds())


def steal_state(lease: LeaseInfo, now: datetime, *, ping_timeout: float, steal_delay: float) -> str:
    """One of :data:`STEAL_NONE`, :data:`STEAL_STALE`, :data:`STEAL_PENDING`,
    :data:`STEAL_TAKEABLE`, with the lease backend's boundaries (at exactly the
    limit the lease is still the owner's)."""
    if lease.steal_start_at is not None:
        if (now - lease.steal_start_at).total_seconds() > steal_delay:
            return STEAL_TAKEABLE
        return STEAL_PENDING
    return STEAL_STALE if ping_age(lease, now) > ping_timeout else STEAL_NONE


def is_check_name(name: str) -> bool:
    """Whether ``name`` is a deferred check's (``task@check:key``)."""
    return split_schedule_name(name)[1].startswith(CHECK_CONFIGURATION_PREFIX)


class CachedCheckSummary:
    """Pending deferred checks per task (``read``: the store's one grouped
    query, ``check_summary``), read again only once the last reading is older
    than ``ttl_s`` and than ``cost_factor`` times the seconds that reading
    took (on the ``monotonic`` clock): a small store is read every time, a
    million checks (a scan of them all) at most every few seconds. A failed
    read is logged and the last summary served again (``None`` before any)."""

    def __init__(
        self,
        read: Callable[[], CheckSummary],
        ttl_s: float = 0.0,
        *,
        cost_factor: float = 0.0,
        monotonic: Callable[[], float] = time.monotonic,
    ) -> None:
        self.read, self.ttl_s, self.cost_factor = read, ttl_s, cost_factor
        self.monotonic = monotonic
        self._summary: CheckSummary | None = None
        self._fresh_until: float | None = None
        self._lock = threading.Lock()  # one reader; concurrent callers wait for it

    def get(self) -> CheckSummary | None:
        with self._lock:
            started = self.monotonic()
            if self._fresh_until is not None and started < self._fresh_until:
                return self._summary
            try:
                self._summary = self.read()
            except Exception:
                logger.exception("celery-dgs: reading the deferred-check summary failed")
            took = self.monotonic() - started
            self._fresh_until = started + max(self.ttl_s, self.cost_factor * took)
            return self._summary
