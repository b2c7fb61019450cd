"""The overview page's figures: counts, reasons, workers, the freshness
histogram and the deferred-check panel, from one :class:`~.snapshot.Snapshot`."""

from __future__ import annotations

import bisect
from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime
from functools import lru_cache
from typing import Any

from ..core.condition import Level
from ..core.cron import next_cron_time
from ..core.spec import CronSpec, PeriodicSpec, ScheduleSpec
from ..ops.leader import overload_text, pace_text
from ..status import StatusRow, count_levels
from ..store.records import StoredSchedule
from .snapshot import Snapshot

#: Freshness histogram buckets: (label, upper bound of the fraction of the
#: period left before error_at). Below 0: past its deadline.
BUCKETS: tuple[tuple[str, float], ...] = (
    ("overdue", 0.0),
    ("< 10%", 0.10),
    ("10-25%", 0.25),
    ("25-50%", 0.50),
    ("50-75%", 0.75),
    ("≥ 75%", float("inf")),
)


@dataclass(frozen=True)
class WorkerView:
    name: str
    node: str
    queues: str
    slots: int
    busy: int

    @property
    def free(self) -> int:
        return max(self.slots - self.busy, 0)


def workers_of(snap: Snapshot) -> list[WorkerView]:
    """Each live worker with its slots and how many runs it holds a lease for."""
    busy = Counter(lease.owner_name for lease in snap.state.leases.values())
    return [
        WorkerView(w.name, w.node, ", ".join(w.queues), w.slots, busy[w.name])
        for w in sorted(snap.state.workers, key=lambda w: w.name)
    ]


def reasons_by_level(rows: Sequence[StatusRow]) -> dict[str, list[tuple[str, int]]]:
    """``{"ERROR": [(reason, n), ...], ...}``, most frequent reason first."""
    counts: dict[str, Counter[str]] = {level.name: Counter() for level in Level}
    for row in rows:
        counts[row.condition][row.reason] += 1
    return {level: c.most_common() for level, c in counts.items()}


@lru_cache(maxsize=4096)
def _cron_gap(expr: str, tz: str, hour: int) -> float:
    """Seconds between two consecutive fire times of a cron expression, near
    the hour ``hour`` (seconds since the epoch // 3600)."""
    from datetime import timezone

    after = datetime.fromtimestamp(hour * 3600, timezone.utc)
    first = next_cron_time(expr, tz, after)
    return (next_cron_time(expr, tz, first) - first).total_seconds()


def period_seconds(spec: ScheduleSpec, now: datetime) -> float | None:
    """The period freshness is measured against: a periodic spec's
    ``scheduling_period``, a cron spec's gap between two fire times."""
    if isinstance(spec, PeriodicSpec):
        return spec.scheduling_period.total_seconds()
    if isinstance(spec, CronSpec):
        return _cron_gap(spec.cron_schedule, spec.tz, int(now.timestamp()) // 3600)
    return None


def freshness_fraction(
    row: StatusRow, stored: StoredSchedule | None, now: datetime
) -> float | None:
    """How much of its period (an adaptive schedule's: its current interval) a
    schedule has left before its ``error_at`` (negative: past it); ``None``
    without times or spec."""
    if row.error_at is None or stored is None or stored.spec is None:
        return None
    if row.interval is not None:
        period: float | None = row.interval.total_seconds()
    else:
        period = period_seconds(stored.spec, now)
    if not period:
        return None
    return (row.error_at - now).total_seconds() / period


def histogram(snap: Snapshot) -> list[tuple[str, int]]:
    """Schedules per :data:`BUCKETS` bucket of :func:`freshness_fraction`."""
    bounds = [b for _, b in BUCKETS]
    counts = [0] * len(BUCKETS)
    for row in snap.ordered:
        fraction = freshness_fraction(row, snap.stored.get(row.name), snap.now)
        if fraction is None:
            continue
        counts[
            min(bisect.bisect_right(bounds, fraction), len(bounds) - 1) if fraction >= 0 else 0
        ] += 1
    return [(label, n) for (label, _), n in zip(BUCKETS, counts, strict=True)]


@dataclass(frozen=True)
class Bar:
    label: str
    count: int
    x: float
    y: float
    width: float
    height: float
    css: str


HIST_W, HIST_H, HIST_TOP = 560.0, 150.0, 18.0


def histogram_bars(counts: Sequence[tuple[str, int]]) -> list[Bar]:
    """SVG bars of the histogram (the overdue bucket red, the < 10% one amber)."""
    top = max([n for _, n in counts] + [1])
    slot = HIST_W / len(counts)
    bars = []
    for i, (label, n) in enumerate(counts):
        height = (HIST_H - HIST_TOP) * n / top
        css = "error" if i == 0 else "warning" if i == 1 else "ok"
        bars.append(Bar(label, n, i * slot + 8, HIST_H - height, slot - 16, height, css))
    return bars


def overview(snap: Snapshot) -> dict[str, Any]:
    """Everything the overview shows (also served as JSON by ``/api/overview``)."""
    rows = snap.ordered
    workers = workers_of(snap)
    return {
        "now": snap.now,
        "counts": count_levels(rows),
        "reasons": reasons_by_level(rows),
        "leader": snap.leader,
        "pace": None if snap.pace is None else snap.pace.to_dict(),
        "pace_text": pace_text(snap.pace),
        "overload": None if snap.overload is None else snap.overload.to_dict(),
        "overload_text": overload_text(snap.overload),
        "workers": workers,
        "slots": sum(w.slots for w in workers),
        "busy": sum(w.busy for w in workers),
        "running": len(snap.state.leases),
        "pending_dispatches": snap.pending_dispatches,
        "histogram": histogram(snap),
        "urgent": [r for r in rows if r.level is not Level.OK][:10],
        "checks": checks_view(snap),
    }


def checks_view(snap: Snapshot) -> dict[str, Any]:
    """The overview's deferred-check panel: totals, per task, the most overdue."""
    summary = snap.checks
    return {
        "pending": summary.total_pending,
        "overdue": summary.total_overdue,
        "tasks": [
            {
                "task": task,
                "pending": count,
                "overdue": summary.overdue.get(task, 0),
                "oldest_due": summary.oldest_due.get(task),
            }
            for task, count in sorted(summary.pending.items())
        ],
        "most_overdue": [
            {
                "name": r.name,
                "task": r.task,
                "due": r.stats.next_target_at,
                "checks": r.check_count or 0,
            }
            for r in snap.overdue_checks
        ],
    }
