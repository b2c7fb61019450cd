"""What a run's end does to its schedule: the outcome classes, the statistics
after it, and an adaptive schedule's disabling. Pure functions: every store's
``record_run_end`` and the simulator's run end apply these same rules.
"""

from __future__ import annotations

from datetime import datetime, timedelta

from . import adaptive
from .items import PARTIAL_FAILURE, ItemCounts
from .spec import AdaptiveSpec, ScheduleSpec
from .stats import ScheduleStats, record_failure, record_interruption, record_success

#: Outcomes that count as a good run (``record_success``).
SUCCESS_OUTCOMES = frozenset({"success"})
#: Outcomes that count as a failed run (``record_failure``): an exception, a run
#: terminated for ``max_allowed_duration`` or a blackout, a worker that died, a
#: run whose failed share of items is above its threshold (``partial_failure``,
#: :mod:`celery_dgs.core.items`).
FAILURE_OUTCOMES = frozenset({"failure", "terminated", "lost", PARTIAL_FAILURE})
#: Outcomes that end a run neither good nor failed (``record_interruption``).
#: ``self_fenced``: the owner lost contact with Redis and stopped the run itself
#: before its lease could be taken over.
INTERRUPTION_OUTCOMES = frozenset({"stolen", "cancelled", "yielded", "self_fenced"})
#: Every outcome a run can end with.
END_OUTCOMES = SUCCESS_OUTCOMES | FAILURE_OUTCOMES | INTERRUPTION_OUTCOMES


def stats_after(
    stats: ScheduleStats,
    outcome: str,
    started_at: datetime,
    ended_at: datetime,
    alpha: float,
    duration: timedelta | None = None,
    *,
    spec: ScheduleSpec | None = None,
    eventful: bool | None = None,
    run_key: int = 0,
    items: ItemCounts | None = None,
) -> ScheduleStats:
    """The statistics after a run that ended with ``outcome`` (``duration``: see
    :func:`~celery_dgs.core.stats.record_success`). A good run of an adaptive
    ``spec`` also moves its interval ladder (``eventful``, ``run_key``: see
    :func:`~celery_dgs.core.adaptive.after_good_run`). ``items``: the run's
    item counts, kept in the statistics after a good run or a partial failure
    (any other failure clears them; an interruption leaves them)."""
    if outcome in SUCCESS_OUTCOMES:
        new = record_success(
            stats, started_at, ended_at, alpha=alpha, duration=duration, items=items
        )
        if isinstance(spec, AdaptiveSpec):
            new = adaptive.after_good_run(spec, new, started_at, eventful, run_key)
        return new
    if outcome in FAILURE_OUTCOMES:
        kept = items if outcome == PARTIAL_FAILURE else None
        return record_failure(stats, started_at, ended_at, kept)
    return record_interruption(stats, started_at, ended_at)


def disabled_after(
    spec: ScheduleSpec | None, outcome: str, stats: ScheduleStats, current: str | None
) -> str | None:
    """A schedule's ``disabled_reason`` after a run that ended with ``outcome``
    and left ``stats``: an adaptive one is disabled when its consecutive
    failures reach ``max_failures``, enabled again by a good run; any other
    end leaves ``current``."""
    if not isinstance(spec, AdaptiveSpec):
        return current
    if outcome in SUCCESS_OUTCOMES:
        return None
    if outcome in FAILURE_OUTCOMES:
        return adaptive.disabled_reason(spec, stats) or current
    return current
