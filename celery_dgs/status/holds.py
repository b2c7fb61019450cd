"""What holds a schedule back: the hold codes, :class:`Hold`, and the rule
that lists a schedule's holds, most blocking first (for ``status``'s rows and
beat's metrics alike).

Decisions:

* A run request is served regardless of backoff and blackouts, as beat does.
* ``may_run_at`` is ``None`` while it runs or while a hold without an end
  (paused, no worker, ...) applies; otherwise it is ``can_start_by`` (a
  pending run request's time instead).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime, timedelta

from ..core import adaptive
from ..core.blackout import blackout_containing
from ..core.durations import format_duration
from ..core.spec import AdaptiveSpec, ScheduleSpec
from ..core.stats import ScheduleStats
from ..core.timing import (
    DEFAULT_RETRY_LADDER,
    RetryLadder,
    failed_run_duration,
    retry_at,
    retry_cap,
)
from ..leases.types import LeaseInfo
from ..store.records import StoredSchedule
from .workers import WorkerCheck

#: Reason code of a schedule whose stored spec no longer validates.
INVALID_SPEC = "invalid_spec"

#: Hold codes: why beat will not dispatch a schedule now (``StatusRow.holds``).
HOLD_INVALID_SPEC = INVALID_SPEC  # until its stored spec is fixed
HOLD_INACTIVE = "inactive"  # removed (runtime) or no longer declared
HOLD_PAUSED = "paused"  # until resumed
HOLD_NO_WORKER = "no_worker"  # until a live worker can run it
HOLD_BACKOFF = "backoff"  # until the retry step after its last failure ends
HOLD_BLACKOUT = "blackout"  # until the blackout window it is in ends
HOLD_DISABLED = "disabled"  # adaptive, too many failures: until an upsert enables it
HOLD_LOOKAHEAD = "lookahead"  # dgs_lookahead: until a long run ends or shorter work allows


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
        reason = workers.why_none(spec.pool or default_pool, spec.dont_run_on_nodes, spec.task)
        if reason is not None:
            holds.append(Hold(reason=HOLD_NO_WORKER, message=f"{name}: {reason}"))
    if run_requested or running:
        return tuple(holds)
    backoff = backoff_hold(name, spec, stats, now, retry_ladder)
    if backoff is not None:
        holds.append(backoff)
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


def backoff_hold(
    name: str,
    spec: ScheduleSpec,
    stats: ScheduleStats,
    now: datetime,
    retry_ladder: Sequence[timedelta],
) -> Hold | None:
    """The :data:`HOLD_BACKOFF` hold while the retry after its last failures
    waits (:func:`~celery_dgs.core.timing.retry_delay`: the ladder's step, or
    a share of the failed run's duration when longer; an adaptive schedule's
    step: its ladder's shortest interval), else ``None``."""
    cap = retry_cap(spec)
    if isinstance(spec, AdaptiveSpec):
        retry_ladder = RetryLadder((adaptive.ladder_interval(0, spec.interval_unit),), 0.0)
    retry = retry_at(stats, retry_ladder, cap) if retry_ladder else None
    if retry is None or retry <= now or stats.last_end_at is None:
        return None
    failures = stats.failure_count or 0
    step = min(failures, len(retry_ladder))
    delay = retry - stats.last_end_at
    by_duration = ""
    if delay > retry_ladder[step - 1]:
        ran = format_duration(failed_run_duration(stats))
        by_duration = f", as long as the failed run's {ran}"
    return Hold(
        reason=HOLD_BACKOFF,
        until=retry,
        retry_step=step,
        retry_steps=len(retry_ladder),
        retry_delay=delay,
        message=(
            f"{name} is backing off after {failures} consecutive failures: retry "
            f"step {step} of {len(retry_ladder)} ({delay.total_seconds():g}s{by_duration}) "
            f"ends at {_iso(retry)}"
        ),
    )


def _iso(moment: datetime) -> str:
    return moment.isoformat(timespec="seconds")
