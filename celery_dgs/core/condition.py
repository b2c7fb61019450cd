"""The condition of a schedule: OK, WARNING or ERROR, with a reason (seed 000,
"Schedule condition algorithm" and future direction 5).

The deadline is :func:`~celery_dgs.core.timing.error_at`. The seed writes the
running-periodic rule as ``owner_start_at + average > last_good_start_at -
scheduling_period``; that is a sign slip (the deadline is ``last_good_start_at
+ scheduling_period``, as in the two other periodic rules), and the intended
form is used here. "Average" is :func:`~celery_dgs.core.timing.expected_duration`
(the ``duration_override`` when set).

Boundary: the constraint is violated when ``now > error_at``; at exactly
``now == error_at`` the schedule is not yet ERROR, a moment later it is.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime
from enum import Enum, IntEnum

from .spec import CheckSpec, ScheduleSpec
from .stats import ScheduleStats
from .timing import error_at, expected_duration
from .tz import ensure_utc


class Level(IntEnum):
    OK = 0
    WARNING = 1
    ERROR = 2


class Reason(str, Enum):
    """Why a schedule has its level (stable codes, for metrics and the CLI)."""

    OK = "ok"
    DEADLINE_PASSED = "deadline_passed"
    NEVER_SUCCEEDED = "never_succeeded"
    LIKELY_LATE_RUNNING = "likely_late_running"
    LIKELY_LATE = "likely_late"
    OVER_EXPECTED_DURATION = "over_expected_duration"
    LAST_RUN_FAILED = "last_run_failed"
    #: The last run returned, but its failed share of items was above its
    #: threshold (:mod:`celery_dgs.core.items`).
    ITEMS_FAILED = "items_failed"
    #: The schedule's declaration is invalid; beat serves the last valid stored version.
    DECLARATION_INVALID = "declaration_invalid"
    # Reserved for later layers (projection, load shedding, operator pause).
    PROJECTED_LATE = "projected_late"
    SHED = "shed"
    PAUSED = "paused"

    def __str__(self) -> str:
        return self.value


@dataclass(frozen=True)
class Condition:
    level: Level
    reason: Reason
    message: str
    error_at: datetime | None = None


@dataclass(frozen=True)
class RunningState:
    """A run in progress (``owner_started_at``)."""

    started_at: datetime


def _fmt(moment: datetime) -> str:
    return moment.isoformat(timespec="seconds")


def _items_note(stats: ScheduleStats) -> str:
    """``"; the last run failed: 3 of 10 items failed"`` after a partial
    failure, else ``""``."""
    items = stats.last_items if stats.last_run_failed else None
    return "" if items is None else f"; the last run failed: {items}"


def condition(
    spec: ScheduleSpec, stats: ScheduleStats, running: RunningState | None, now: datetime
) -> Condition:
    """The first rule that applies, in this order:

    1. ERROR ``deadline_passed`` (``never_succeeded`` if it never had a good
       run) when ``now > error_at``;
    2. WARNING ``likely_late_running`` when running and ``started_at +
       expected > error_at``;
    3. WARNING ``likely_late`` when not running and ``now + expected >
       error_at``;
    4. WARNING ``over_expected_duration`` while a run has been going for
       longer than ``max_expected_duration``;
    5. WARNING ``items_failed`` when ``failure_count > 0`` and the last
       failure was a partial one (its item counts kept in ``stats``), else
       WARNING ``last_run_failed`` when ``failure_count > 0``;
    6. OK.

    An ERROR's message also names the item counts of a last partial failure.
    """
    now = ensure_utc(now, what="now")
    deadline = error_at(spec, stats, now)
    expected = expected_duration(spec, stats)
    name = spec.name
    if now > deadline:
        return _deadline_passed(spec, stats, deadline)
    if running is not None:
        started = ensure_utc(running.started_at, what="started_at")
        if started + expected > deadline:
            return Condition(
                Level.WARNING,
                Reason.LIKELY_LATE_RUNNING,
                f"{name}: the run started at {_fmt(started)} is expected to end at "
                f"{_fmt(started + expected)}, after its deadline {_fmt(deadline)}",
                deadline,
            )
    elif now + expected > deadline:
        return Condition(
            Level.WARNING,
            Reason.LIKELY_LATE,
            f"{name}: even started now it is expected to end at {_fmt(now + expected)}, "
            f"after its deadline {_fmt(deadline)}",
            deadline,
        )
    limit = spec.max_expected_duration
    if running is not None and limit is not None:
        started = ensure_utc(running.started_at, what="started_at")
        if now - started > limit:
            return Condition(
                Level.WARNING,
                Reason.OVER_EXPECTED_DURATION,
                f"{name}: the run started at {_fmt(started)} has run longer than "
                f"max_expected_duration ({limit})",
                deadline,
            )
    if stats.last_run_failed:
        return _last_run_failed(name, stats, deadline)
    return Condition(Level.OK, Reason.OK, f"{name} is OK until {_fmt(deadline)}", deadline)


def _deadline_passed(spec: ScheduleSpec, stats: ScheduleStats, deadline: datetime) -> Condition:
    """ERROR: ``deadline_passed``, or ``never_succeeded`` without a good run."""
    name = spec.name
    if isinstance(spec, CheckSpec):
        return Condition(
            Level.ERROR,
            Reason.DEADLINE_PASSED,
            f"{name}: the check due at {_fmt(deadline - spec.within)} has not run "
            f"by {_fmt(deadline)} (within {spec.within})",
            deadline,
        )
    if not stats.has_succeeded:
        never = "never run" if stats.last_start_at is None else "never succeeded"
        return Condition(
            Level.ERROR,
            Reason.NEVER_SUCCEEDED,
            f"{name} has {never} and its first deadline {_fmt(deadline)} has "
            f"passed{_items_note(stats)}",
            deadline,
        )
    return Condition(
        Level.ERROR,
        Reason.DEADLINE_PASSED,
        f"{name} missed its deadline {_fmt(deadline)}{_items_note(stats)}",
        deadline,
    )


def _last_run_failed(name: str, stats: ScheduleStats, deadline: datetime) -> Condition:
    """WARNING after a failure: ``items_failed`` (a partial failure, its counts
    named) or ``last_run_failed``."""
    items = stats.last_items
    if items is not None:
        return Condition(
            Level.WARNING,
            Reason.ITEMS_FAILED,
            f"{name}: the last run failed: {items} ({items.failed_share:.0%}), above its "
            f"partial-failure threshold ({stats.failure_count} consecutive failures); "
            f"deadline {_fmt(deadline)}",
            deadline,
        )
    return Condition(
        Level.WARNING,
        Reason.LAST_RUN_FAILED,
        f"{name}: the last run failed ({stats.failure_count} consecutive failures); "
        f"deadline {_fmt(deadline)}",
        deadline,
    )


def declaration_invalid(name: str, error: str, served: Condition) -> Condition:
    """ERROR ``declaration_invalid``: the declaration of ``name`` no longer
    validates (``error`` names the field), so beat keeps serving the last valid
    stored version, whose condition is ``served`` (its deadline is kept).

    ERROR rather than WARNING: the deployed code asks for something that is
    not in effect, and only a person can fix it, so the health check fails."""
    return Condition(
        Level.ERROR,
        Reason.DECLARATION_INVALID,
        f"{name}: its declaration is invalid ({error}); the last valid stored version is "
        f"served, its condition {served.level.name} {served.reason.value}",
        served.error_at,
    )
