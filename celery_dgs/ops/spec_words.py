"""A schedule's spec as one sentence, the same in ``celery dgs status`` and on
the status page: "fresh within 1d00h; cron 0 0 * * * America/New_York, done
within 6h00m; blackout 12:00-14:00"."""

from __future__ import annotations

from ..core.spec import MAX_INTERVAL_INDEX, AdaptiveSpec, CronSpec, PeriodicSpec, ScheduleSpec
from .timetext import duration


def spec_words(spec: ScheduleSpec) -> str:
    """The spec as a sentence: "fresh within 1d00h; cron 0 0 * * * America/New_York,
    done within 6h00m; blackout 12:00-14:00"."""
    parts: list[str] = []
    if isinstance(spec, PeriodicSpec):
        parts.append(f"fresh within {duration(spec.scheduling_period)}")
        if spec.cooldown_duration:
            parts.append(f"cooldown {duration(spec.cooldown_duration)}")
    elif isinstance(spec, CronSpec):
        parts.append(
            f"cron {spec.cron_schedule} {spec.tz}, done within "
            f"{duration(spec.cron_max_schedule_duration)}"
        )
    elif isinstance(spec, AdaptiveSpec):
        parts.append(
            f"adaptive, unit {duration(spec.interval_unit)}, starting at step "
            f"{spec.initial_interval_index} of 0-{MAX_INTERVAL_INDEX}, disabled after "
            f"{spec.max_failures} failures in a row"
        )
    for window in spec.blackout_periods:
        zone = "" if isinstance(spec, CronSpec) or spec.tz == "UTC" else f" {spec.tz}"
        parts.append(f"blackout {window.start:%H:%M}-{window.end:%H:%M}{zone}")
    if spec.pool:
        parts.append(f"pool {spec.pool}")
    if spec.max_expected_duration is not None:
        parts.append(f"expected under {duration(spec.max_expected_duration)}")
    if spec.max_allowed_duration is not None:
        parts.append(f"killed after {duration(spec.max_allowed_duration)}")
    if spec.duration_override is not None:
        parts.append(f"planned as {duration(spec.duration_override)}")
    if spec.dont_run_on_nodes:
        parts.append(f"never on {', '.join(sorted(spec.dont_run_on_nodes))}")
    return "; ".join(parts)
