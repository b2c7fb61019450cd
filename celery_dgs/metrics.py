"""Prometheus metrics, served by beat when ``dgs_metrics_port`` is set.

Collected at scrape time from a snapshot of beat's state (the schedules it
tracks, as of its round after the scrape asked: :mod:`celery_dgs.beat.snapshot`),
the leases and live workers read then and, for run counts, one grouped query
on the store:

- ``dgs_schedule_condition{schedule,reason}``: 0 OK, 1 WARNING, 2 ERROR;
- ``dgs_schedules{condition,reason}``: how many active schedules are in each,
  counted by the store over its kept conditions (``store.condition_counts``);
- ``dgs_schedule_seconds_until_error{schedule}`` (negative once in ERROR);
- ``dgs_priority_class_schedules{priority,condition}``: schedules of each
  priority class (their spec's) in each condition: alert on ERROR in a high
  class, watch the low classes go stale under overload;
- ``dgs_schedule_held{schedule,reason}``: 1 for each reason beat will not
  dispatch the schedule now (:func:`~celery_dgs.status.holds_for`, as
  ``celery dgs status`` shows them): ``paused`` (or its stored row could not be
  applied: beat logged why), ``disabled`` (an adaptive schedule after too many
  failures), ``no_worker``, ``backoff``, ``blackout``;
- ``dgs_runs_total{outcome}``, ``dgs_lease_steals_total`` (runs ended
  ``lost`` or ``stolen``): counters that never decrease. They count the runs in
  the store's history, plus those this beat saw pruned from it since it
  started (pruning would otherwise make them drop, which Prometheus reads as
  a counter reset: ``rate()`` would count every stored run again). Runs still
  going are not an outcome: ``dgs_runs_running`` (a gauge) counts them;
- ``dgs_worker_slots{state="free"|"used"}``, ``dgs_dispatches_pending``;
- ``dgs_adaptive_schedules{group}``: adaptive schedules ``never_visited``,
  ``modified_since_visit`` (upstream changed after the last good run),
  ``other``, ``disabled``; ``dgs_adaptive_target_drift_seconds``: now - the
  earliest freshness target among the enabled ones not running
  (:func:`~celery_dgs.status.adaptive_summary`);
- ``dgs_most_urgent_drift_seconds``: now - should_start_by of the most urgent
  eligible schedule (positive: beat is behind);
- ``dgs_dispatch_lateness_seconds``: histogram of now - should_start_by at
  each dispatch (a run request's too: its own should_start_by). Most
  dispatches are early (negative); with negative buckets the client exposes
  no ``_sum``, only ``_bucket`` and ``_count``;
- ``dgs_checks_pending{task}``, ``dgs_checks_overdue{task}``: pending
  deferred checks per task, and those due before now (one grouped query,
  ``store.check_summary``, kept for :data:`CHECK_SUMMARY_TTL_S` so that
  scrapes close together share it); ``dgs_check_lateness_seconds``: histogram
  of a check's start lateness, now - its check time, at each dispatch of a
  check (an early one, an operator's run request, counts as 0). Deferred
  checks are not schedules here: the per-schedule gauges above leave them out;
- ``dgs_beat_leader``: 1 while this beat holds the leader lease and dispatches,
  0 while it stands by (docs/beat-ha.md); ``dgs_beat_leader_token``: the
  leader token this beat last saw (its own while leading). A standby's slot
  and pending gauges are not refreshed: alert on the leader's.

A scrape computes every schedule's condition: O(N) per scrape, not per tick.

Beat serves them on ``/metrics`` of its HTTP endpoint
(:mod:`celery_dgs.beat.endpoint`, with ``/healthz``).
"""

from __future__ import annotations

import logging
import threading
from collections import Counter
from collections.abc import Iterator, Mapping, Set
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any, Protocol

from prometheus_client import CollectorRegistry, Histogram
from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily, Metric

from .core.clock import Clock
from .core.condition import Level
from .core.spec import ScheduleSpec
from .core.stats import ScheduleStats
from .status import (
    HOLD_INVALID_SPEC,
    INVALID_SPEC,
    CachedCheckSummary,
    WorkerCheck,
    adaptive_summary,
    holds_for,
    is_check_name,
    schedule_condition,
)
from .status.queues import QueueLoad, queue_loads
from .store.base import ScheduleStore
from .store.selection import Selection

logger = logging.getLogger("celery_dgs.metrics")

LATENESS_BUCKETS_S = (-3600, -600, -60, -10, 0, 10, 60, 300, 900, 3600, 4 * 3600, 24 * 3600)
#: Buckets of ``dgs_check_lateness_seconds`` (a check is dispatched once due).
CHECK_LATENESS_BUCKETS_S = (0, 1, 5, 15, 30, 60, 120, 300, 600, 1800, 3600, 4 * 3600, 24 * 3600)
#: Seconds one reading of ``store.check_summary`` serves the scrapes after it:
#: with a million pending checks the grouped query scans them all (measured
#: 0.7-1.2 s on PostgreSQL), so a scrape every 15 s pays it every other time.
CHECK_SUMMARY_TTL_S = 30.0


class MonotonicCounts:
    """Stored run counts per outcome, made non-decreasing across pruning: a count
    that dropped since the last reading adds the drop to that outcome's pruned
    total. Runs stored and pruned between two readings are missed (pruning
    runs hourly; scrapes come every few seconds)."""

    def __init__(self) -> None:
        self._last: dict[str, int] = {}
        self._pruned: dict[str, int] = {}
        self._lock = threading.Lock()  # scrapes may overlap (one thread per request)

    def update(self, stored: dict[str, int] | None) -> dict[str, int]:
        """The counts after reading ``stored``; ``None`` (the read failed): the
        last ones again."""
        with self._lock:
            if stored is not None:
                for outcome in self._last.keys() | stored.keys():
                    count, last = stored.get(outcome, 0), self._last.get(outcome, 0)
                    if count < last:
                        self._pruned[outcome] = self._pruned.get(outcome, 0) + last - count
                    self._last[outcome] = count
            return {o: n + self._pruned.get(o, 0) for o, n in sorted(self._last.items())}


class TrackedSchedule(Protocol):
    """A schedule beat tracks, as the metrics read it."""

    @property
    def spec(self) -> ScheduleSpec: ...
    @property
    def stats(self) -> ScheduleStats: ...
    @property
    def run_requested_at(self) -> datetime | None: ...
    @property
    def declaration_error(self) -> str | None: ...
    @property
    def disabled_reason(self) -> str | None: ...


class BeatStateView(Protocol):
    """Beat's state as the metrics read it: the snapshot beat's engine
    publishes (``engine.snapshot()``, :mod:`celery_dgs.beat.snapshot`)."""

    @property
    def tracked(self) -> Mapping[str, TrackedSchedule]: ...
    @property
    def held(self) -> Set[str]: ...
    @property
    def checks(self) -> Set[str]: ...
    @property
    def unschedulable(self) -> Mapping[str, str]: ...
    @property
    def pending(self) -> int: ...
    @property
    def most_urgent_should_start_by(self) -> float | None: ...
    @property
    def waiting_for_slot(self) -> int: ...


class EngineCollector:
    """Beat's metrics at scrape time: a :class:`~celery_dgs.beat.snapshot.BeatSnapshot`
    of its state, and the leases, workers and run counts read then."""

    def __init__(self, engine: Any, store: ScheduleStore, clock: Clock) -> None:
        self.engine, self.store, self.clock = engine, store, clock
        self.run_counts = MonotonicCounts()
        self.check_summary = CachedCheckSummary(
            lambda: store.check_summary(clock.now()), CHECK_SUMMARY_TTL_S
        )

    def collect(self) -> Iterator[Metric]:
        now, engine = self.clock.now(), self.engine
        snapshot: BeatStateView = engine.snapshot()
        leases = self.read_leases()  # read at scrape time: a tick never pays for metrics
        workers = self.read_workers()
        view = ScheduleView(
            now, leases, workers, engine.settings.retry_ladder, engine.default_queue
        )
        schedules = [
            (name, t)
            for name, t in snapshot.tracked.items()
            if name not in snapshot.checks and t.spec.kind != "check"
        ]
        yield from schedule_families(view, schedules, snapshot)
        yield from adaptive_families(now, schedules, leases)
        yield from self.check_families()
        yield from self.condition_families(now)
        yield from self.run_families()
        if workers is not None:
            yield slot_family(slot_counts(workers, running=len(leases), pending=snapshot.pending))
            yield queue_slot_family(queue_loads(leases.values(), workers.workers))
        yield GaugeMetricFamily(
            "dgs_dispatches_pending", "Dispatched runs not started yet", value=snapshot.pending
        )
        yield GaugeMetricFamily(
            "dgs_schedules_waiting_for_slot",
            "Eligible schedules beat set aside until a worker of their pool has a free "
            "slot (every one that may run them was busy)",
            value=snapshot.waiting_for_slot,
        )
        drift = GaugeMetricFamily(
            "dgs_most_urgent_drift_seconds",
            "now - should_start_by of the eligible schedule beat would dispatch next, "
            "as of its last tick (0 when none, or standing by)",
        )
        should = snapshot.most_urgent_should_start_by
        drift.add_metric([], now.timestamp() - should if should is not None else 0.0)
        yield drift
        if engine.leadership is not None:
            yield from leader_families(engine.leadership)

    def read_leases(self) -> dict[str, Any]:
        try:
            return {lease.schedule: lease for lease in self.engine.leases.all()}
        except Exception:
            logger.exception("celery-dgs: reading leases for metrics failed")
            return {}

    def read_workers(self) -> WorkerCheck | None:
        engine = self.engine
        try:
            return WorkerCheck(engine.registry.live_workers(), engine.settings.capacity)
        except Exception:
            logger.exception("celery-dgs: reading live workers for metrics failed")
            return None

    def run_families(self) -> Iterator[Metric]:
        """``dgs_runs_total``, ``dgs_runs_running``, ``dgs_lease_steals_total``."""
        try:
            stored = dict(self.store.outcome_counts())
        except Exception:
            logger.exception("celery-dgs: reading run counts for metrics failed")
            stored = None
        live_runs = None if stored is None else stored.pop("running", 0)
        counts = self.run_counts.update(stored)  # None: the last counts (never a drop)
        runs = CounterMetricFamily("dgs_runs", "Runs ended, by outcome", labels=["outcome"])
        for outcome, count in counts.items():
            runs.add_metric([outcome], count)
        yield runs
        if live_runs is not None:
            yield GaugeMetricFamily(
                "dgs_runs_running", "Runs started and not ended", value=live_runs
            )
        yield CounterMetricFamily(
            "dgs_lease_steals",
            "Runs whose lease was taken over (lost or stolen)",
            value=counts.get("lost", 0) + counts.get("stolen", 0),
        )

    def condition_families(self, now: datetime) -> Iterator[Metric]:
        """``dgs_schedules{condition,reason}``: the store's counts of the kept
        conditions (a few index-range queries; none if the store fails)."""
        try:
            counts = self.store.condition_counts(now, Selection())
        except Exception:
            logger.exception("celery-dgs: counting the schedules' conditions failed")
            return
        family = GaugeMetricFamily(
            "dgs_schedules",
            "Active schedules by condition and reason",
            labels=["condition", "reason"],
        )
        for (level, reason), n in sorted(counts.items()):
            family.add_metric([level, reason], n)
        yield family

    def check_families(self) -> Iterator[Metric]:
        """``dgs_checks_pending`` and ``dgs_checks_overdue`` per task (none
        while the summary could never be read)."""
        summary = self.check_summary.get()
        if summary is None:
            return
        pending = GaugeMetricFamily(
            "dgs_checks_pending", "Pending deferred checks, by task", labels=["task"]
        )
        overdue = GaugeMetricFamily(
            "dgs_checks_overdue",
            "Pending deferred checks due before now, by task",
            labels=["task"],
        )
        for task, count in sorted(summary.pending.items()):
            pending.add_metric([task], count)
            overdue.add_metric([task], summary.overdue.get(task, 0))
        yield pending
        yield overdue


@dataclass(frozen=True)
class ScheduleView:
    """What a scrape read besides beat's snapshot, for each schedule's gauges."""

    now: datetime
    leases: Mapping[str, Any]
    workers: WorkerCheck | None
    retry_ladder: tuple[timedelta, ...]
    default_pool: str


def schedule_families(
    view: ScheduleView, schedules: list[tuple[str, TrackedSchedule]], snapshot: BeatStateView
) -> Iterator[Metric]:
    """``dgs_schedule_condition``, ``dgs_schedule_seconds_until_error``,
    ``dgs_schedule_held`` per schedule, and ``dgs_priority_class_schedules``."""
    level = GaugeMetricFamily(
        "dgs_schedule_condition",
        "Schedule condition: 0 OK, 1 WARNING, 2 ERROR",
        labels=["schedule", "reason"],
    )
    until = GaugeMetricFamily(
        "dgs_schedule_seconds_until_error",
        "Seconds until the schedule is in ERROR",
        labels=["schedule"],
    )
    held = GaugeMetricFamily(
        "dgs_schedule_held",
        "1 for each reason beat will not dispatch the schedule now",
        labels=["schedule", "reason"],
    )
    now, by_class = view.now, Counter[tuple[int, str]]()
    for name, tracked in schedules:
        lease = view.leases.get(name)
        cond = schedule_condition(
            name,
            tracked.spec,
            tracked.stats,
            lease,
            now,
            declaration_error=tracked.declaration_error,
        )
        level.add_metric([name, cond.reason.value], int(cond.level))
        by_class[(tracked.spec.priority, cond.level.name)] += 1
        if cond.error_at is not None:
            until.add_metric([name], (cond.error_at - now).total_seconds())
        for reason in hold_reasons(view, name, tracked, paused=name in snapshot.held):
            held.add_metric([name, reason], 1)
    for name in snapshot.unschedulable:
        if not is_check_name(name):
            level.add_metric([name, INVALID_SPEC], int(Level.ERROR))
            held.add_metric([name, HOLD_INVALID_SPEC], 1)
    yield level
    yield until
    yield held
    yield class_family(by_class)


def hold_reasons(
    view: ScheduleView, name: str, tracked: TrackedSchedule, *, paused: bool
) -> list[str]:
    """Why beat will not dispatch ``name`` now (``paused``: beat holds it; a
    disabled one is held too, but not paused)."""
    disabled = tracked.disabled_reason
    holds = holds_for(
        name,
        tracked.spec,
        tracked.stats,
        view.now,
        paused=paused and not disabled,
        running=name in view.leases,
        run_requested=tracked.run_requested_at is not None,
        retry_ladder=view.retry_ladder,
        default_pool=view.default_pool,
        workers=view.workers,
        disabled_reason=disabled,
    )
    return [hold.reason for hold in holds]


def class_family(by_class: Counter[tuple[int, str]]) -> Metric:
    """``dgs_priority_class_schedules``: each class's schedules per condition."""
    classes = GaugeMetricFamily(
        "dgs_priority_class_schedules",
        "Schedules of each priority class, by condition",
        labels=["priority", "condition"],
    )
    for cls in sorted({c for c, _ in by_class}):
        for cond_name in ("OK", "WARNING", "ERROR"):
            classes.add_metric([str(cls), cond_name], by_class.get((cls, cond_name), 0))
    return classes


def adaptive_families(
    now: datetime, schedules: list[tuple[str, TrackedSchedule]], leases: Mapping[str, Any]
) -> Iterator[Metric]:
    """``dgs_adaptive_schedules`` and ``dgs_adaptive_target_drift_seconds``."""
    summary = adaptive_summary(
        ((t.spec, t.stats, t.disabled_reason is not None, name in leases) for name, t in schedules),
        now,
    )
    groups = GaugeMetricFamily(
        "dgs_adaptive_schedules", "Adaptive schedules by group", labels=["group"]
    )
    for group, count in summary.counts.items():
        groups.add_metric([group], count)
    yield groups
    drift_s = summary.target_drift
    yield GaugeMetricFamily(
        "dgs_adaptive_target_drift_seconds",
        "now - the earliest freshness target of the enabled adaptive schedules not "
        "running (positive: beat serves targets already past; 0 when none)",
        value=0.0 if drift_s is None else drift_s.total_seconds(),
    )


def slot_family(slot_state: tuple[int, int]) -> Metric:
    slots = GaugeMetricFamily(
        "dgs_worker_slots",
        "Slots of the live workers (or dgs_capacity), by state",
        labels=["state"],
    )
    slots.add_metric(["free"], slot_state[0])
    slots.add_metric(["used"], slot_state[1])
    return slots


def queue_slot_family(loads: list[QueueLoad]) -> Metric:
    """``dgs_queue_slots{queue,state}``: each queue's live slots, ``free`` and
    ``used`` (running leases of its workers)."""
    slots = GaugeMetricFamily(
        "dgs_queue_slots",
        "Slots of the live workers of each queue (pool), by state (used: running leases)",
        labels=["queue", "state"],
    )
    for load in loads:
        slots.add_metric([load.queue, "free"], load.slots - load.busy)
        slots.add_metric([load.queue, "used"], load.busy)
    return slots


def leader_families(leadership: Any) -> Iterator[Metric]:
    """``dgs_beat_leader`` and ``dgs_beat_leader_token``."""
    yield GaugeMetricFamily(
        "dgs_beat_leader",
        "1 while this beat leads (dispatches), 0 while it stands by",
        value=1 if leadership.leading else 0,
    )
    holder = leadership.holder
    token = leadership.token if leadership.leading or holder is None else holder.token
    yield GaugeMetricFamily(
        "dgs_beat_leader_token", "The beat leader token this beat last saw", value=token
    )


def slot_counts(workers: WorkerCheck, *, running: int, pending: int) -> tuple[int, int]:
    """(free, used) slots, read at scrape time: the live workers' slots (or
    ``dgs_capacity`` with none registered), used by running leases and pending
    dispatches."""
    total = sum(w.slots for w in workers.workers)
    if not workers.workers and workers.capacity:
        total = workers.capacity
    used = running + pending
    return max(total - used, 0), used


def metrics_registry(engine: Any, store: ScheduleStore, clock: Clock) -> CollectorRegistry:
    """A registry with beat's collector and the dispatch lateness histograms,
    hooked to the engine's dispatches and those of deferred checks
    (``engine.sender.observe``)."""
    registry = CollectorRegistry()
    registry.register(EngineCollector(engine, store, clock))
    lateness = Histogram(
        "dgs_dispatch_lateness_seconds",
        "now - should_start_by at dispatch",
        buckets=LATENESS_BUCKETS_S,
        registry=registry,
    )
    check_lateness = Histogram(
        "dgs_check_lateness_seconds",
        "now - a deferred check's check time at its dispatch",
        buckets=CHECK_LATENESS_BUCKETS_S,
        registry=registry,
    )
    engine.sender.observe(lateness.observe, lambda late_s: check_lateness.observe(max(0.0, late_s)))
    return registry
