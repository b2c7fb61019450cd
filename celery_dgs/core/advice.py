"""Advice on valid but doubtful schedules (``celery dgs check``): pure, no I/O.

Each message names the schedule, the field and why:

* a periodic schedule without a cooldown runs again as soon as its last run
  ends whenever a worker slot is free (seed 000: any schedule past
  ``can_start_by`` is eligible), which hammers what it scrapes;
* a first retry delay (``dgs_retry_backoff``) not shorter than the period (cron:
  than ``within``) makes one failed run an ERROR: the retry comes after the
  deadline (:func:`~celery_dgs.core.timing.backoff_exceeding_deadline`);
* a schedule that can never be served (:mod:`celery_dgs.core.servable`).
"""

from __future__ import annotations

from collections.abc import Sequence
from datetime import datetime, timedelta

from .durations import format_duration
from .servable import never_servable
from .spec import CronSpec, PeriodicSpec, ScheduleSpec
from .timing import DEFAULT_RETRY_LADDER, backoff_exceeding_deadline


def schedule_advice(
    spec: ScheduleSpec,
    now: datetime,
    *,
    retry_ladder: Sequence[timedelta] = DEFAULT_RETRY_LADDER,
    duration: timedelta | None = None,
) -> list[str]:
    """Warnings about ``spec`` (empty when there is nothing to say)."""
    out: list[str] = []
    name = spec.name
    if isinstance(spec, PeriodicSpec) and spec.cooldown_duration <= timedelta(0):
        out.append(
            f"schedule {name!r}, field 'cooldown': no cooldown: whenever a worker "
            "slot is free it runs again as soon as its last run ends (set a cooldown, or "
            "leave it unset for dgs_default_cooldown_fraction of the period)"
        )
    delay = backoff_exceeding_deadline(spec, retry_ladder)
    if delay is not None:
        if isinstance(spec, CronSpec):
            field, limit = "within", spec.cron_max_schedule_duration
        else:
            assert isinstance(spec, PeriodicSpec)
            field, limit = "period", spec.scheduling_period
        out.append(
            f"schedule {name!r}, field {field!r}: the retry backoff after a failure "
            f"({format_duration(delay)}, dgs_retry_backoff) is not shorter than its {field} "
            f"({format_duration(limit)}): one failed run puts it in ERROR before it is retried"
        )
    problem = never_servable(spec, now, duration=duration)
    if problem is not None:
        out.append(str(problem))
    return out
