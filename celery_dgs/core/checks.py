"""Deferred checks (seed 002, "Are we there yet?"): when a check is due, what
its run's end does next, and the guards that end it. Pure functions.

A check is a schedule row of kind ``check`` (:class:`~celery_dgs.core.spec.CheckSpec`)
named ``task@check:key``. Its state:

- ``first_check_at``: the time of its first check, rounded to its slot; never
  changes;
- ``next_check_at``: when it runs next (kept in the statistics' ``next_target_at``,
  which :func:`celery_dgs.core.timing.start_times` reads): it may start then,
  and should have started by ``next_check_at + within``;
- ``check_count``: how many checks ran to a verdict.

A run's end (:func:`check_end`), after the run's statistics were recorded:

- success: the task's return value is the verdict. ``None``: the check is done.
  A ``datetime`` (aware) or a ``timedelta`` (after the run's end): check again
  then, rounded up to the slot, ``check_count + 1``; unless that time is not
  after the run's end (outcome ``past``), further ahead than ``horizon``
  (``horizon``), or ``max_checks`` checks have run (``max_checks``). Any other
  value ends it as ``invalid_verdict``.
- failure (an exception, a timeout, a worker that died): the check stays due
  and is retried with the schedule's retry ladder; ``max_failures``
  consecutive failures end it (``failed``).
- interrupted (stolen, cancelled, yielded, self-fenced): it stays due, unchanged.

An ended check leaves the pending set: the store keeps its row inactive and
writes a history record (:class:`CheckEnded`).
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from datetime import datetime, timedelta, timezone

from .durations import format_duration
from .instants import format_instant
from .run_end import FAILURE_OUTCOMES, SUCCESS_OUTCOMES
from .spec import CheckSpec
from .stats import ScheduleStats
from .tz import ensure_utc

#: How a check ended (the history's ``outcome``).
CHECK_DONE = "done"
CHECK_PAST = "past"
CHECK_HORIZON = "horizon"
CHECK_MAX_CHECKS = "max_checks"
CHECK_FAILED = "failed"
CHECK_INVALID_VERDICT = "invalid_verdict"
CHECK_CANCELLED = "cancelled"
CHECK_END_OUTCOMES = frozenset(
    {
        CHECK_DONE,
        CHECK_PAST,
        CHECK_HORIZON,
        CHECK_MAX_CHECKS,
        CHECK_FAILED,
        CHECK_INVALID_VERDICT,
        CHECK_CANCELLED,
    }
)

#: What adding a check that is already pending does: ``keep`` it as it is
#: (adding is idempotent: a redelivered event adds nothing), or ``move`` it to
#: the new time with the new arguments (its first check time and counts kept).
ON_EXISTS_KEEP = "keep"
ON_EXISTS_MOVE = "move"
ON_EXISTS_CHOICES = (ON_EXISTS_KEEP, ON_EXISTS_MOVE)

_EPOCH = datetime(1970, 1, 1, tzinfo=timezone.utc)


def round_to_slot(at: datetime, slot: timedelta | None) -> datetime:
    """``at`` rounded up to the next multiple of ``slot`` since the Unix epoch
    (unchanged without a slot, or when already on one)."""
    at = ensure_utc(at, what="check time")
    if slot is None:
        return at
    step = slot.total_seconds()
    offset = (at - _EPOCH).total_seconds()
    slots = math.ceil(offset / step - 1e-9)
    return _EPOCH + timedelta(seconds=slots * step)


def first_check_time(
    spec: CheckSpec, now: datetime, *, at: datetime | None = None, after: timedelta | None = None
) -> datetime:
    """When a new check of ``spec`` is first due: ``at`` or ``now + after``
    (exactly one of them), rounded up to the slot. ``ValueError`` naming the
    check and field for a naive ``at``, a negative ``after``, both or neither,
    or a time further ahead than the horizon."""
    name = spec.name
    if (at is None) == (after is None):
        raise ValueError(f"check {name!r}: give exactly one of at= and after=")
    if at is not None:
        if not isinstance(at, datetime) or at.tzinfo is None or at.utcoffset() is None:
            raise ValueError(f"check {name!r}, field 'at': must be an aware datetime, got {at!r}")
        when = at
    else:
        if not isinstance(after, timedelta) or after < timedelta(0):
            got = format_duration(after) if isinstance(after, timedelta) else repr(after)
            raise ValueError(
                f"check {name!r}, field 'after': must be a timedelta (or seconds, or "
                f"duration text) of zero or more, got {got}"
            )
        when = now + after
    when = round_to_slot(when, spec.slot)
    if when - now > spec.horizon:
        raise ValueError(
            f"check {name!r}, field 'at': {format_instant(when)} is further ahead than the "
            f"horizon ({format_duration(spec.horizon)}) allows"
        )
    return when


@dataclass(frozen=True, slots=True)
class CheckState:
    """A pending check's counts (``next_check_at`` is in its statistics)."""

    first_check_at: datetime
    check_count: int = 0


@dataclass(frozen=True, slots=True)
class CheckInfo:
    """A running check, as its task sees it (``celery_dgs.current_check()``):
    its task and key, the time of its first check, how many checks ran before
    this one, and the time this one was due."""

    task: str
    key: str
    first_check_at: datetime | None
    check_count: int
    due_at: datetime | None


@dataclass(frozen=True, slots=True)
class CheckAgain:
    """The check stays pending, due at ``next_check_at`` with ``check_count`` checks run."""

    next_check_at: datetime
    check_count: int


@dataclass(frozen=True, slots=True)
class CheckEnded:
    """The check is over: ``outcome`` (one of :data:`CHECK_END_OUTCOMES`) and why."""

    outcome: str
    reason: str
    check_count: int


def next_check_at(stats: ScheduleStats) -> datetime | None:
    """A check's next time (kept in ``next_target_at``)."""
    return stats.next_target_at


def verdict_time(verdict: object, ended_at: datetime) -> datetime | None:
    """The time a verdict names (``None`` for ``None``); ``TypeError`` for a
    value that is no verdict, ``ValueError`` for a naive datetime."""
    if verdict is None:
        return None
    if isinstance(verdict, timedelta):
        return ended_at + verdict
    if isinstance(verdict, datetime):
        if verdict.tzinfo is None or verdict.utcoffset() is None:
            raise ValueError(f"a naive datetime ({verdict.isoformat()}): return an aware one")
        return verdict.astimezone(timezone.utc)
    raise TypeError(
        f"the task returned {verdict!r} ({type(verdict).__name__}); a check returns a "
        "datetime or timedelta (check again then) or None (done)"
    )


def check_end(
    spec: CheckSpec,
    state: CheckState,
    stats_after_run: ScheduleStats,
    outcome: str,
    verdict: object,
    ended_at: datetime,
    error: str | None = None,
) -> CheckAgain | CheckEnded | None:
    """What a run's end does to its check (see the module docstring).
    ``stats_after_run``: the statistics with this run recorded. ``None``: the
    check stays as it is (a failure to retry, or an interruption)."""
    ended_at = ensure_utc(ended_at, what="ended_at")
    count = state.check_count
    if outcome in SUCCESS_OUTCOMES:
        done = count + 1
        try:
            when = verdict_time(verdict, ended_at)
        except (TypeError, ValueError) as exc:
            return CheckEnded(CHECK_INVALID_VERDICT, str(exc), done)
        if when is None:
            return CheckEnded(CHECK_DONE, "the check returned None: done", done)
        when = round_to_slot(when, spec.slot)
        if when <= ended_at:
            return CheckEnded(
                CHECK_PAST,
                f"the next check it asked for ({format_instant(when)}) is not after "
                f"the check's end ({format_instant(ended_at)})",
                done,
            )
        if when - ended_at > spec.horizon:
            return CheckEnded(
                CHECK_HORIZON,
                f"the next check it asked for ({format_instant(when)}) is further "
                f"ahead than the horizon ({format_duration(spec.horizon)})",
                done,
            )
        if done >= spec.max_checks:
            return CheckEnded(
                CHECK_MAX_CHECKS,
                f"{done} checks ran, the most allowed (max_checks); it "
                f"asked for another at {format_instant(when)}",
                done,
            )
        return CheckAgain(when, done)
    if outcome in FAILURE_OUTCOMES:
        failures = stats_after_run.failure_count or 0
        if failures >= spec.max_failures:
            return CheckEnded(
                CHECK_FAILED,
                f"{failures} consecutive failed runs (max_failures); the last: "
                f"{outcome}" + (f": {error}" if error else ""),
                count,
            )
    return None
