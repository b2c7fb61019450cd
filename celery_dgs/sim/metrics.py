"""What a simulation measures (definitions in ``docs/simulator.md``, "Metrics").

Conditions are accounted per schedule in O(1) at every change of its state
(run start, run end), never by scanning all schedules: between two changes a
schedule's deadline ``D`` (:func:`~celery_dgs.core.timing.error_at`) is fixed,
so its ERROR time in ``[a, b]`` is the part after ``D`` and its WARNING time
follows the seed's rules (``likely_late``: ``D - expected < t``;
``likely_late_running``; ``last_run_failed``). Only time inside the measured
window ``[warmup, horizon]`` counts.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import asdict, dataclass, field
from typing import Any


def percentile(sorted_values: Sequence[float], q: float) -> float:
    """Nearest-rank percentile of an already sorted sequence (0 when empty)."""
    if not sorted_values:
        return 0.0
    rank = max(1, math.ceil(q / 100.0 * len(sorted_values)))
    return sorted_values[min(rank, len(sorted_values)) - 1]


@dataclass
class Tally:
    """Running totals, filled by the event loop."""

    window_start: float
    window_end: float
    error_s: float = 0.0
    warning_s: float = 0.0
    error_episodes: int = 0
    staleness: list[float] = field(default_factory=list)  # peak age / period, per cycle
    lateness: list[float] = field(default_factory=list)  # start - should_start_by, seconds
    busy_slot_s: float = 0.0
    down_slot_s: float = 0.0
    runs: int = 0
    failures: int = 0
    interrupted: int = 0
    wasted: int = 0
    skipped: int = 0
    late_starts: int = 0  # runs started after their should_start_by
    in_error: set[str] = field(default_factory=set)  # schedules with any ERROR in the window
    #: schedule -> priority class; the per-class figures are kept for these
    class_of: dict[str, int] = field(default_factory=dict)
    error_by_class: dict[int, float] = field(default_factory=dict)
    stale_by_class: dict[int, float] = field(default_factory=dict)  # peak staleness
    late_by_class: dict[int, float] = field(default_factory=dict)  # latest start, seconds

    def add_lateness(self, name: str, late: float) -> None:
        """A run of ``name`` started ``late`` seconds after its should_start_by."""
        self.lateness.append(late)
        cls = self.class_of.get(name)
        if cls is not None and late > self.late_by_class.get(cls, 0.0):
            self.late_by_class[cls] = late

    def add_staleness(self, name: str, value: float) -> None:
        """One cycle's peak age / period of ``name``."""
        self.staleness.append(value)
        cls = self.class_of.get(name)
        if cls is not None and value > self.stale_by_class.get(cls, 0.0):
            self.stale_by_class[cls] = value

    def overlap(self, a: float, b: float) -> float:
        return max(0.0, min(b, self.window_end) - max(a, self.window_start))

    def account(self, name: str, a: float, b: float, deadline: float, expected: float,
                running_since: float | None, failed: bool) -> None:  # fmt: skip
        """One schedule's conditions over ``[a, b]`` with a fixed deadline."""
        a = max(a, self.window_start)
        b = min(b, self.window_end)
        if b <= a:
            return
        if b > deadline:
            self.error_s += b - max(a, deadline)
            self.in_error.add(name)
            cls = self.class_of.get(name)
            if cls is not None:
                self.error_by_class[cls] = self.error_by_class.get(cls, 0.0) + b - max(a, deadline)
        ok_end = min(b, deadline)
        if ok_end <= a:
            return
        if failed:
            self.warning_s += ok_end - a
        elif running_since is not None:
            if running_since + expected > deadline:
                self.warning_s += ok_end - a
        elif ok_end > deadline - expected:
            self.warning_s += ok_end - max(a, deadline - expected)


@dataclass(frozen=True)
class SimResult:
    """The figures of one simulation (seconds unless named otherwise)."""

    policy: str
    schedules: int
    slots: int
    load: float
    horizon_s: float
    warmup_s: float
    error_fraction: float  # of schedule-time in the window
    warning_fraction: float
    error_s: float
    error_episodes: int
    schedules_in_error: int  # schedules with any ERROR after warm-up
    max_staleness: float  # (now - last_good_start_at) / period, peak over cycles
    p99_staleness: float
    late_starts: int  # runs started after should_start_by
    mean_lateness_s: float  # dispatch start - should_start_by, late dispatches count
    p99_lateness_s: float
    max_lateness_s: float
    utilization: float
    runs: int
    failures: int
    interrupted: int
    wasted_runs: int
    skipped: int
    recovery_s: float | None  # after the last outage: until no schedule is in ERROR
    wall_s: float
    #: priority class -> {"schedules", "error_s", "error_fraction", "max_staleness",
    #: "max_lateness_s"}
    by_class: dict[int, dict[str, float]] = field(default_factory=dict)

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


def summarise(tally: Tally, *, policy: str, schedules: int, slots: int, load: float,
              horizon_s: float, recovery_s: float | None, wall_s: float) -> SimResult:  # fmt: skip
    window = max(tally.window_end - tally.window_start, 0.0)
    sizes: dict[int, int] = {}
    for cls in tally.class_of.values():
        sizes[cls] = sizes.get(cls, 0) + 1
    by_class = {
        cls: {"schedules": float(n), "error_s": tally.error_by_class.get(cls, 0.0),
              "error_fraction": tally.error_by_class.get(cls, 0.0) / (window * n or 1.0),
              "max_staleness": tally.stale_by_class.get(cls, 0.0),
              "max_lateness_s": tally.late_by_class.get(cls, 0.0)}
        for cls, n in sorted(sizes.items())
    }  # fmt: skip
    schedule_time = window * schedules or 1.0
    stale = sorted(tally.staleness)
    late = sorted(max(x, 0.0) for x in tally.lateness)
    available = slots * window - tally.down_slot_s
    return SimResult(
        policy=policy, schedules=schedules, slots=slots, load=round(load, 4),
        horizon_s=horizon_s, warmup_s=tally.window_start,
        error_fraction=tally.error_s / schedule_time,
        warning_fraction=tally.warning_s / schedule_time,
        error_s=tally.error_s, error_episodes=tally.error_episodes,
        schedules_in_error=len(tally.in_error),
        max_staleness=stale[-1] if stale else 0.0, p99_staleness=percentile(stale, 99),
        late_starts=tally.late_starts,
        mean_lateness_s=sum(late) / len(late) if late else 0.0,
        p99_lateness_s=percentile(late, 99), max_lateness_s=late[-1] if late else 0.0,
        utilization=tally.busy_slot_s / available if available > 0 else 0.0,
        runs=tally.runs, failures=tally.failures, interrupted=tally.interrupted,
        wasted_runs=tally.wasted, skipped=tally.skipped, recovery_s=recovery_s,
        wall_s=round(wall_s, 3), by_class=by_class,
    )  # fmt: skip
