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
- ``dgs_worker_slots{state="free"|"used"}``, ``dgs_queue_slots{queue,state}``
  (each pool's), ``dgs_dispatches_pending``, ``dgs_schedules_waiting_for_slot``
  (eligible schedules set aside for a busy pool's slot);
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
The families are built from what the scrape read by
:mod:`celery_dgs.metric_families`.

Beat serves them on ``/metrics`` of its HTTP endpoint
(:mod:`celery_dgs.beat.endpoint`, with ``/healthz``).
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Iterator
from datetime import datetime
from typing import Any

from prometheus_client import CollectorRegistry, Histogram
from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily, Metric

from .core.clock import Clock
from .metric_families import (
    BeatStateView,
    ScheduleView,
    adaptive_families,
    leader_families,
    queue_slot_family,
    schedule_families,
    slot_counts,
    slot_family,
)
from .status import (
    CachedCheckSummary,
    WorkerCheck,
)
from .status.queues import queue_loads
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
#: With ``dgs_metrics_per_schedule`` unset, the per-schedule families are
#: served while beat tracks at most this many schedules: at 100,000 a scrape
#: was 200,000 series, 17.6 MB and 3-6 s of beat's CPU (it halved the
#: dispatch rate while it ran).
PER_SCHEDULE_METRICS_MAX = 10_000


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


class EngineCollector:
    """Beat's metrics at scrape time: a :class:`~celery_dgs.beat.snapshot.BeatSnapshot`
    of its state, and the leases, workers and run counts read then."""

    def __init__(self, engine: Any, store: ScheduleStore, clock: Clock) -> None:
        self.engine, self.store, self.clock = engine, store, clock
        self.run_counts = MonotonicCounts()
        self._per_schedule_off_logged = False
        self.check_summary = CachedCheckSummary(
            lambda: store.check_summary(clock.now()), CHECK_SUMMARY_TTL_S
        )

    def collect(self) -> Iterator[Metric]:
        now, engine = self.clock.now(), self.engine
        snapshot: BeatStateView = engine.snapshot()
        leases = self.read_leases()  # read at scrape time: a tick reads nothing for metrics
        workers = self.read_workers()
        view = ScheduleView(
            now, leases, workers, engine.settings.retry_ladder, engine.default_queue
        )
        schedules = [
            (name, t)
            for name, t in snapshot.tracked.items()
            if name not in snapshot.checks and t.spec.kind != "check"
        ]
        per_schedule = self.per_schedule(len(schedules))
        yield from schedule_families(view, schedules, snapshot, per_schedule=per_schedule)
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

    def per_schedule(self, tracked: int) -> bool:
        """Whether this scrape serves the per-schedule families: as
        ``dgs_metrics_per_schedule`` says, or (unset) while beat tracks at
        most :data:`PER_SCHEDULE_METRICS_MAX` schedules; the first scrape
        past it logs why they are left out."""
        chosen: bool | None = self.engine.settings.metrics_per_schedule
        if chosen is not None:
            return chosen
        if tracked <= PER_SCHEDULE_METRICS_MAX:
            return True
        if not self._per_schedule_off_logged:
            self._per_schedule_off_logged = True
            logger.info(
                "celery-dgs: metrics: beat tracks %d schedules, more than %d: the "
                "per-schedule families are left out of /metrics (a scrape of each series "
                "would cost beat's ticks CPU; dgs_metrics_per_schedule = True serves them)",
                tracked,
                PER_SCHEDULE_METRICS_MAX,
            )
        return False

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
