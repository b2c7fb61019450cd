"""A schedule's condition as moments the store keeps: the rule of
:func:`~celery_dgs.core.condition.condition` split into what does not depend on
the time (never succeeded, last run failed, declaration invalid, an invalid
spec) and the moments after which the level changes (``warning_at``,
``error_at``).

The store writes a :class:`KeptCondition` and the schedule's start times in
the transaction that changes what they depend on (a run's start or end, a spec
change, a retry step, a pause); the condition at ``now`` is then a comparison
of kept columns with ``now`` (:func:`condition_at`, and the same comparison in
SQL), so ``status`` counts and pages a fleet without rebuilding any row.

:func:`kept_condition` derives the kept values from :func:`condition` itself:
for every ``now``, ``condition_at(kept_condition(spec, stats, running), now)``
is ``condition(spec, stats, running, now)``'s level and reason (a property
test checks it). A run in progress is the store's record of one
(:func:`running_of`: a start recorded after the last end).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime, timedelta, timezone

from .condition import Level, Reason, RunningState
from .spec import CheckSpec, ScheduleSpec
from .stats import ScheduleStats
from .timing import DEFAULT_RETRY_LADDER, error_at, expected_duration, start_times
from .tz import ensure_utc

#: ``warning_at`` of a condition that is WARNING whatever the time (a run
#: expected to end after its deadline): earlier than any ``now``.
ALWAYS = datetime(1, 1, 2, tzinfo=timezone.utc)

#: The reason of a schedule whose stored spec no longer validates (ERROR).
INVALID_SPEC = "invalid_spec"


@dataclass(frozen=True, slots=True)
class KeptCondition:
    """The condition of a schedule as kept columns.

    ``level``/``reason``: the condition while no moment has passed (OK,
    WARNING ``last_run_failed``; ERROR ``declaration_invalid`` or
    ``invalid_spec`` whatever the time). After ``warning_at`` it is WARNING
    ``warning_reason``; after ``error_at`` ERROR ``error_reason`` (``None``:
    never by time)."""

    level: Level
    reason: str
    warning_at: datetime | None = None
    warning_reason: str | None = None
    error_at: datetime | None = None
    error_reason: str | None = None


@dataclass(frozen=True, slots=True)
class KeptTimes:
    """Everything the store keeps for one schedule: its condition and when it
    can next start and should start by (``None``: an invalid spec)."""

    condition: KeptCondition
    next_can_start_at: datetime | None
    should_start_by: datetime | None


def running_of(stats: ScheduleStats) -> RunningState | None:
    """The run in progress as the store records it: a start after the last
    end (or with no end yet); ``None`` otherwise."""
    started = stats.last_start_at
    if started is None:
        return None
    if stats.last_end_at is not None and stats.last_end_at >= started:
        return None
    return RunningState(started_at=started)


def kept_condition(
    spec: ScheduleSpec,
    stats: ScheduleStats,
    running: RunningState | None,
    *,
    declaration_error: str | None = None,
    now: datetime | None = None,
) -> KeptCondition:
    """The kept form of :func:`~celery_dgs.core.condition.condition`. ``now`` is
    only the deadline's anchor of a never-succeeded schedule stored without
    ``registered_at`` (the store always sets it)."""
    deadline = error_at(spec, stats, now)
    late = (
        Reason.NEVER_SUCCEEDED
        if not isinstance(spec, CheckSpec) and not stats.has_succeeded
        else Reason.DEADLINE_PASSED
    )
    if declaration_error is not None:
        return KeptCondition(Level.ERROR, Reason.DECLARATION_INVALID.value, error_at=deadline)
    level, reason = (Level.OK, Reason.OK)
    if stats.last_run_failed:
        failed = Reason.LAST_RUN_FAILED if stats.last_items is None else Reason.ITEMS_FAILED
        level, reason = Level.WARNING, failed
    warning_at, warning_reason = _warning(spec, stats, running, deadline)
    return KeptCondition(
        level,
        reason.value,
        warning_at=warning_at,
        warning_reason=None if warning_reason is None else warning_reason.value,
        error_at=deadline,
        error_reason=late.value,
    )


def _warning(
    spec: ScheduleSpec, stats: ScheduleStats, running: RunningState | None, deadline: datetime
) -> tuple[datetime | None, Reason | None]:
    """When the time-dependent WARNING begins, and why (rules 2-4 of
    :func:`~celery_dgs.core.condition.condition`)."""
    expected = expected_duration(spec, stats)
    if running is None:
        return deadline - expected, Reason.LIKELY_LATE
    started = ensure_utc(running.started_at, what="started_at")
    if started + expected > deadline:
        return ALWAYS, Reason.LIKELY_LATE_RUNNING
    limit = spec.max_expected_duration
    if limit is None:
        return None, None
    return started + limit, Reason.OVER_EXPECTED_DURATION


def invalid_spec() -> KeptCondition:
    """The kept condition of a row whose stored spec does not validate."""
    return KeptCondition(Level.ERROR, INVALID_SPEC)


def condition_at(kept: KeptCondition, now: datetime) -> tuple[Level, str]:
    """The level and reason at ``now``: the boundaries of
    :func:`~celery_dgs.core.condition.condition` (strictly after a moment)."""
    if kept.level is Level.ERROR:
        return kept.level, kept.reason
    if kept.error_at is not None and now > kept.error_at:
        return Level.ERROR, kept.error_reason or Reason.DEADLINE_PASSED.value
    if kept.warning_at is not None and now > kept.warning_at:
        return Level.WARNING, kept.warning_reason or Reason.LIKELY_LATE.value
    return kept.level, kept.reason


def kept_times(
    spec: ScheduleSpec | None,
    stats: ScheduleStats,
    now: datetime,
    *,
    declaration_error: str | None = None,
    retry_ladder: Sequence[timedelta] = DEFAULT_RETRY_LADDER,
) -> KeptTimes:
    """What the store keeps for a schedule written at ``now``: its condition
    (with the run in progress of :func:`running_of`) and its start times
    (:func:`~celery_dgs.core.timing.start_times` at ``now``). ``spec`` ``None``:
    an invalid stored spec, ERROR with no times."""
    if spec is None:
        return KeptTimes(invalid_spec(), None, None)
    kept = kept_condition(
        spec, stats, running_of(stats), declaration_error=declaration_error, now=now
    )
    times = start_times(spec, stats, now, retry_ladder=retry_ladder)
    return KeptTimes(kept, times.can_start_by, times.should_start_by)
