"""A fleet as the simulator's workload: schedules of every kind with what was
measured of them (their statistics), sampled when there are too many.

The caller reads the fleet (``celery -A proj dgs simulate``: the app's
declarations and its store, :mod:`celery_dgs.cli.simulate_fleet`) and passes
each schedule as a :class:`FleetEntry`; :func:`sample_fleet` keeps a uniform
random sample of at most ``limit`` of them in one pass (the fleet is never
held whole), and :func:`fleet_workload` builds the workload:

- a run lasts the schedule's measured average (``average_good_duration``) on
  average, its spread from the measured deviation; without them its
  ``duration_override``, else the default run time;
- a schedule that has succeeded starts from its statistics (the workload then
  starts at ``now``); one that never did starts at a random phase, as if the
  fleet had been running (``Workload.warm_start``); a pending deferred check
  starts from its statistics (its next check time) and runs once;
- on a sample the slots are scaled by the same fraction, so the load stays.
"""

from __future__ import annotations

import math
import random
from collections import Counter
from collections.abc import Iterable
from dataclasses import dataclass, field
from datetime import datetime

from ..core.spec import CheckSpec, ScheduleSpec
from ..core.stats import ScheduleStats
from .workload import (
    DEFAULT_DURATION_SIGMA,
    DEFAULT_SLOTS_PER_WORKER,
    DEFAULT_START,
    SimSchedule,
    Workload,
    make_workers,
)

#: ``--sample``'s default: the most schedules simulated; a larger fleet is sampled.
DEFAULT_SAMPLE_LIMIT = 5000
#: A lognormal's mean absolute deviation is about 0.8 of its standard deviation
#: for the shapes seen (sigma up to 1).
_MEAN_ABS_TO_STD = 1.25


@dataclass(frozen=True)
class FleetEntry:
    """One schedule of the fleet: its spec, its statistics (``None``: none
    stored) and where it comes from (``declared``, ``runtime``, ``check``)."""

    spec: ScheduleSpec
    stats: ScheduleStats | None
    origin: str


@dataclass(frozen=True)
class FleetSample:
    """At most the limit of the fleet's entries, how many the
    fleet holds, and its counts by origin and by kind."""

    entries: list[FleetEntry]
    total: int
    by_origin: Counter[str] = field(default_factory=Counter)
    by_kind: Counter[str] = field(default_factory=Counter)

    @property
    def sampled(self) -> bool:
        return len(self.entries) < self.total

    def scaled_slots(self, slots: int) -> int:
        """The slots that give the sample the load ``slots`` give the fleet (at least 1)."""
        if not self.sampled:
            return slots
        return max(1, round(slots * len(self.entries) / self.total))

    def fleet_slots(self, sample_slots: int) -> int:
        """The fleet's slots for ``sample_slots`` of the sample (rounded up)."""
        if not self.sampled or not self.entries:
            return sample_slots
        return math.ceil(sample_slots * self.total / len(self.entries))

    def fleet_slot_range(self, sample_slots: int, sample_demand: float) -> tuple[int, int]:
        """The whole fleet's slots that ``sample_slots``, the fewest that keep
        the sample out of ERROR, stand for: above what one slot fewer stands
        for (the sample's 1 slot, the least it gets, stands for every count up
        to :meth:`fleet_slots`), and not below the fleet's demand
        (``sample_demand`` scaled, rounded up)."""
        high = self.fleet_slots(sample_slots)
        if not self.sampled or not self.entries:
            return high, high
        below = self.fleet_slots(sample_slots - 1) + 1 if sample_slots > 1 else 1
        demand = math.ceil(sample_demand * self.total / len(self.entries) - 1e-9)
        return min(high, max(below, demand, 1)), high

    def describe(self) -> str:
        """The counts in words, e.g. ``6 declared, 110000 runtime, 4000
        pending checks; of the schedules: 20 adaptive, 109986 periodic``."""
        parts = [
            f"{self.by_origin[o]} {label}"
            for o, label in (
                ("declared", "declared"),
                ("runtime", "runtime"),
                ("check", "pending checks"),
            )
            if self.by_origin[o]
        ]
        kinds = ", ".join(
            f"{n} {kind}" for kind, n in sorted(self.by_kind.items()) if kind != "check"
        )
        return ", ".join(parts) + (f"; of the schedules: {kinds}" if kinds else "")


def sample_fleet(entries: Iterable[FleetEntry], limit: int, *, seed: int = 0) -> FleetSample:
    """A uniform random sample of at most ``limit`` entries (reservoir
    sampling: one pass, ``limit`` entries held), the same for the same seed
    and fleet order."""
    if limit < 1:
        raise ValueError(f"the sample limit must be >= 1, got {limit}")
    rng = random.Random(seed + 2003)
    kept: list[FleetEntry] = []
    by_origin: Counter[str] = Counter()
    by_kind: Counter[str] = Counter()
    total = 0
    for entry in entries:
        total += 1
        by_origin[entry.origin] += 1
        by_kind[entry.spec.kind] += 1
        if len(kept) < limit:
            kept.append(entry)
        else:
            slot = rng.randrange(total)
            if slot < limit:
                kept[slot] = entry
    return FleetSample(kept, total, by_origin, by_kind)


def run_time(entry: FleetEntry, default_s: float) -> tuple[float, float]:
    """Mean run seconds and the lognormal shape: measured, else the spec's
    ``duration_override`` (shape: the default), else ``default_s``."""
    stats, spec = entry.stats, entry.spec
    if stats is not None and stats.average_good_duration is not None:
        mean = stats.average_good_duration.total_seconds()
        deviation = stats.duration_deviation
        if mean > 0 and deviation is not None:
            ratio = _MEAN_ABS_TO_STD * deviation.total_seconds() / mean
            return mean, math.sqrt(math.log1p(ratio * ratio))
        return mean, DEFAULT_DURATION_SIGMA
    if spec.duration_override is not None:
        return spec.duration_override.total_seconds(), DEFAULT_DURATION_SIGMA
    return default_s, DEFAULT_DURATION_SIGMA


def _starts_from_stats(entry: FleetEntry) -> bool:
    if entry.stats is None:
        return False
    if isinstance(entry.spec, CheckSpec):
        return entry.stats.next_target_at is not None
    return entry.stats.has_succeeded


def fleet_workload(
    sample: FleetSample,
    *,
    slots: int,
    duration_s: float,
    now: datetime,
    per_worker: int = DEFAULT_SLOTS_PER_WORKER,
) -> Workload:
    """The sample on ``sample.scaled_slots(slots)`` slots (workers consuming
    every pool the schedules use). It starts at ``now`` when a schedule starts
    from its statistics, else at the default start."""
    scheds = []
    initial: dict[str, ScheduleStats] = {}
    for entry in sample.entries:
        mean, sigma = run_time(entry, duration_s)
        scheds.append(SimSchedule(entry.spec, mean, sigma))
        if entry.stats is not None and _starts_from_stats(entry):
            initial[entry.spec.name] = entry.stats
    queues = {"celery"} | {e.spec.pool for e in sample.entries if e.spec.pool}
    workers = make_workers(sample.scaled_slots(slots), per_worker, queues)
    start = now if initial else DEFAULT_START
    return Workload(scheds, workers, start=start, initial_stats=initial)
