"""Small builders shared by the core tests."""

from __future__ import annotations

from datetime import datetime, timedelta, timezone
from typing import Any

from celery_dgs.core import CronSpec, PeriodicSpec, ScheduleStats

UTC = timezone.utc
H = timedelta(hours=1)
M = timedelta(minutes=1)


def utc(y: int, mo: int, d: int, h: int = 0, mi: int = 0, s: int = 0) -> datetime:
    return datetime(y, mo, d, h, mi, s, tzinfo=UTC)


def periodic(**kw: Any) -> PeriodicSpec:
    fields: dict[str, Any] = {"task": "scrape", "scheduling_period": 24 * H}
    fields.update(kw)
    return PeriodicSpec(**fields)


def cron(expr: str = "0 0 * * *", **kw: Any) -> CronSpec:
    fields: dict[str, Any] = {
        "task": "nightly",
        "cron_schedule": expr,
        "cron_max_schedule_duration": 6 * H,
    }
    fields.update(kw)
    return CronSpec(**fields)


def good(start: datetime, end: datetime, **kw: Any) -> ScheduleStats:
    """Stats of a schedule whose last run (start..end) was good."""
    fields: dict[str, Any] = {
        "registered_at": start - 30 * 24 * H,
        "last_good_start_at": start,
        "last_good_end_at": end,
        "last_start_at": start,
        "last_end_at": end,
        "failure_count": 0,
        "average_good_duration": end - start,
    }
    fields.update(kw)
    return ScheduleStats(**fields)
