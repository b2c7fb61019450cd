"""The pure core of celery-dgs: every formula of seed 000, no I/O.

Schedule specs and run stats, cron and blackout time in a schedule's zone,
start times (``can_start_by``/``should_start_by``), retry backoff, and the
OK/WARNING/ERROR condition. Every datetime in or out is aware UTC; every
duration is a ``timedelta``.
"""

from __future__ import annotations

from .blackout import (
    blackout_containing,
    first_fit,
    longest_free_gap,
    move_out_of_blackout,
    next_blackout_start,
    window_on,
    windows_between,
)
from .blackout_periods import Blackout, parse_blackouts
from .clock import Clock, FakeClock, MonotonicClock, SystemClock
from .condition import Condition, Level, Reason, RunningState, condition
from .cron import next_cron_time, shortest_cron_gap, wall_instants
from .schedule_names import schedule_name, split_schedule_name
from .spec import SPEC_FORMAT_VERSION, AdaptiveSpec, CronSpec, PeriodicSpec, ScheduleSpec
from .spec_build import make_spec, spec_from_dict
from .stats import (
    DEFAULT_EWMA_ALPHA,
    ScheduleStats,
    ewma,
    record_failure,
    record_interruption,
    record_start,
    record_success,
)
from .timing import (
    DEFAULT_RETRY_LADDER,
    StartTimes,
    error_at,
    expected_duration,
    retry_at,
    start_margin,
    start_times,
    validate_retry_ladder,
)
from .tz import ensure_utc, get_zone, zone_name

__all__ = [
    "DEFAULT_EWMA_ALPHA",
    "DEFAULT_RETRY_LADDER",
    "SPEC_FORMAT_VERSION",
    "AdaptiveSpec",
    "Blackout",
    "Clock",
    "Condition",
    "CronSpec",
    "FakeClock",
    "Level",
    "MonotonicClock",
    "PeriodicSpec",
    "Reason",
    "RunningState",
    "ScheduleSpec",
    "ScheduleStats",
    "StartTimes",
    "SystemClock",
    "blackout_containing",
    "condition",
    "ensure_utc",
    "error_at",
    "ewma",
    "expected_duration",
    "first_fit",
    "get_zone",
    "longest_free_gap",
    "make_spec",
    "move_out_of_blackout",
    "next_blackout_start",
    "next_cron_time",
    "parse_blackouts",
    "record_failure",
    "record_interruption",
    "record_start",
    "record_success",
    "retry_at",
    "schedule_name",
    "shortest_cron_gap",
    "spec_from_dict",
    "split_schedule_name",
    "start_margin",
    "start_times",
    "validate_retry_ladder",
    "wall_instants",
    "window_on",
    "windows_between",
    "zone_name",
]
