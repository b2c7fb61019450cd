"""The overview page's figures: counts, reasons, workers, the freshness
histogram and the deferred-check panel, from one :class:`~.snapshot.Snapshot`."""

from __future__ import annotations

from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from ..core.condition import Level
from ..ops.leader import overload_text, pace_text
from ..ops.restart import restart_json, restart_text
from ..status.queues import queue_loads, runs_of_live_instances
from .snapshot import TIME_TO_ERROR_LABELS, Snapshot


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
    """Each live worker with its slots and how many runs its live instance
    holds a lease for (an earlier instance's, after a restart under the same
    name, are not its)."""
    busy = runs_of_live_instances(snap.leases.values(), snap.workers)
    return [
        WorkerView(w.name, w.node, ", ".join(w.pools), w.slots, busy.get(w.name, 0))
        for w in sorted(snap.workers, key=lambda w: w.name)
    ]


def reasons_by_level(reasons: dict[tuple[str, str], int]) -> dict[str, list[tuple[str, int]]]:
    """``{"ERROR": [(reason, n), ...], ...}``, most frequent reason first."""
    counts: dict[str, Counter[str]] = {level.name: Counter() for level in Level}
    for (level, reason), n in reasons.items():
        counts[level][reason] += n
    return {level: c.most_common() for level, c in counts.items()}


def histogram(snap: Snapshot) -> list[tuple[str, int]]:
    """Schedules per bucket of the time left before ERROR
    (:data:`~.snapshot.TIME_TO_ERROR_LABELS`); all 0 before the first read."""
    counts = snap.time_to_error or [0] * len(TIME_TO_ERROR_LABELS)
    return list(zip(TIME_TO_ERROR_LABELS, counts, strict=True))


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
    """SVG bars of the histogram (the ERROR bucket red, the one under an hour amber)."""
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
    workers = workers_of(snap)
    return {
        "now": snap.now,
        "counts": snap.counts,
        "reasons": reasons_by_level(snap.reasons),
        "leader": snap.leader,
        "pace": None if snap.pace is None else snap.pace.to_dict(),
        "pace_text": pace_text(snap.pace),
        "overload": None if snap.overload is None else snap.overload.to_dict(),
        "overload_text": overload_text(snap.overload),
        "restart_grace": restart_json(snap.restart_grace),
        "restart_text": restart_text(snap.restart_grace),
        "leader_warning": snap.leader_warning,
        "workers": workers,
        "slots": sum(w.slots for w in workers),
        "busy": sum(w.busy for w in workers),
        # each pool's slots, with more than one among the live workers (as status)
        "queues": queue_loads(snap.leases.values(), snap.workers),
        "running": len(snap.leases),
        "pending_dispatches": snap.pending_dispatches,
        "histogram": histogram(snap),
        "urgent": snap.urgent,
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
