"""Adaptive schedules in ``status``: a row's ladder fields, and the counts
by group the metrics show."""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any

from ..core import adaptive
from ..core.spec import AdaptiveSpec, ScheduleSpec
from ..core.stats import ScheduleStats


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
