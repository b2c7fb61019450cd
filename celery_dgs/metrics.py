"""Prometheus metrics, served by beat when ``dgs_metrics_port`` is set.

Collected at scrape time from beat's own state (the schedules it tracks, its
last Redis snapshot) and, for run counts, one grouped query on the store:

- ``dgs_schedule_condition{schedule,reason}``: 0 OK, 1 WARNING, 2 ERROR;
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

The endpoint answers ``/metrics`` (the metrics above), ``/healthz`` (200 ``ok``
while beat's loop completed a tick within :func:`tick_limit` seconds: three
times the longest sleep a tick asks for, at least 30 s; 503 otherwise, with a
short text body saying why) and 404 on any other path.
"""

from __future__ import annotations

import logging
import socket
import threading
from collections import Counter
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass
from socketserver import ThreadingMixIn
from typing import Any
from wsgiref.simple_server import WSGIRequestHandler, WSGIServer, make_server

from prometheus_client import CollectorRegistry, Histogram, make_wsgi_app
from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily, Metric

from .core.clock import Clock
from .core.condition import Level
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
from .store.base import ScheduleStore

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


class EngineCollector:
    def __init__(self, engine: Any, store: ScheduleStore, clock: Clock) -> None:
        self.engine, self.store, self.clock = engine, store, clock
        self.run_counts = MonotonicCounts()
        self.check_summary = CachedCheckSummary(
            lambda: store.check_summary(clock.now()), CHECK_SUMMARY_TTL_S
        )

    def collect(self) -> Iterator[Metric]:
        now = self.clock.now()
        engine = self.engine
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
        try:  # read at scrape time: a tick never pays for metrics
            leases = {lease.schedule: lease for lease in engine.leases.all()}
        except Exception:
            logger.exception("celery-dgs: reading leases for metrics failed")
            leases = {}
        try:
            workers: WorkerCheck | None = WorkerCheck(
                engine.registry.live_workers(), engine.settings.capacity
            )
        except Exception:
            logger.exception("celery-dgs: reading live workers for metrics failed")
            workers = None
        slot_state = (
            None
            if workers is None
            else slot_counts(workers, running=len(leases), pending=len(engine.pending))
        )
        settings, paused = engine.settings, engine.held
        by_class: Counter[tuple[int, str]] = Counter()
        checks: set[str] = getattr(engine, "checks", set())  # beat's window of deferred checks
        schedules = [
            (name, t)
            for name, t in list(engine.tracked.items())
            if name not in checks and t.spec.kind != "check"
        ]
        for name, tracked in schedules:
            lease = leases.get(name)
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
            disabled = tracked.disabled_reason  # held too, but not paused
            for hold in holds_for(
                name,
                tracked.spec,
                tracked.stats,
                now,
                paused=name in paused and not disabled,
                running=lease is not None,
                run_requested=tracked.run_requested_at is not None,
                retry_ladder=settings.retry_ladder,
                default_pool=engine.default_queue,
                workers=workers,
                disabled_reason=disabled,
            ):
                held.add_metric([name, hold.reason], 1)
        summary = adaptive_summary(
            (
                (t.spec, t.stats, t.disabled_reason is not None, name in leases)
                for name, t in schedules
            ),
            now,
        )
        for name in list(engine.unschedulable):
            if is_check_name(name):
                continue
            level.add_metric([name, INVALID_SPEC], int(Level.ERROR))
            held.add_metric([name, HOLD_INVALID_SPEC], 1)
        yield level
        yield until
        yield held
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
        classes = GaugeMetricFamily(
            "dgs_priority_class_schedules",
            "Schedules of each priority class, by condition",
            labels=["priority", "condition"],
        )
        for cls in sorted({c for c, _ in by_class}):
            for cond_name in ("OK", "WARNING", "ERROR"):
                classes.add_metric([str(cls), cond_name], by_class.get((cls, cond_name), 0))
        yield classes
        yield from self.check_families()
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
        if slot_state is not None:
            slots = GaugeMetricFamily(
                "dgs_worker_slots",
                "Slots of the live workers (or dgs_capacity), by state",
                labels=["state"],
            )
            slots.add_metric(["free"], slot_state[0])
            slots.add_metric(["used"], slot_state[1])
            yield slots
        yield GaugeMetricFamily(
            "dgs_dispatches_pending", "Dispatched runs not started yet", value=len(engine.pending)
        )
        drift = GaugeMetricFamily(
            "dgs_most_urgent_drift_seconds",
            "now - should_start_by of the eligible schedule beat would dispatch next, "
            "as of its last tick (0 when none, or standing by)",
        )
        # Read what beat's thread recorded: the index is not thread-safe.
        should = getattr(engine, "most_urgent_should_start_by", None)
        drift.add_metric([], now.timestamp() - should if should is not None else 0.0)
        yield drift
        leadership = getattr(engine, "leadership", None)
        if leadership is not None:
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
    hooked to the engine's dispatches (``engine.on_dispatch``; a deferred
    check's: ``engine.on_check_dispatch``)."""
    registry = CollectorRegistry()
    registry.register(EngineCollector(engine, store, clock))
    lateness = Histogram(
        "dgs_dispatch_lateness_seconds",
        "now - should_start_by at dispatch",
        buckets=LATENESS_BUCKETS_S,
        registry=registry,
    )
    engine.on_dispatch = lateness.observe
    check_lateness = Histogram(
        "dgs_check_lateness_seconds",
        "now - a deferred check's check time at its dispatch",
        buckets=CHECK_LATENESS_BUCKETS_S,
        registry=registry,
    )
    engine.on_check_dispatch = lambda late_s: check_lateness.observe(max(0.0, late_s))
    return registry


#: ``/healthz`` answers 503 once beat's loop has not completed a tick for this
#: many of its longest sleeps ...
HEALTHZ_TICK_INTERVALS = 3
#: ... or for this many seconds, whichever is longer (a tick applying many
#: store changes takes a while by itself).
HEALTHZ_MIN_LIMIT_S = 30.0


def tick_limit(engine: Any) -> float:
    """Seconds beat's loop may go without completing a tick and still be
    healthy: :data:`HEALTHZ_TICK_INTERVALS` times the longest sleep a tick asks
    for (as :meth:`~celery_dgs.beat.engine.BeatEngine.tick` caps it: its
    ``max_interval``, 5 x ``store_poll_interval``, the leader's renewal
    interval), at least :data:`HEALTHZ_MIN_LIMIT_S`."""
    longest = min(float(engine.max_interval), float(engine.settings.store_poll_interval) * 5)
    leadership = getattr(engine, "leadership", None)
    if leadership is not None:
        longest = min(longest, float(leadership.renew_interval))
    return max(HEALTHZ_TICK_INTERVALS * longest, HEALTHZ_MIN_LIMIT_S)


@dataclass(frozen=True)
class Health:
    healthy: bool
    text: str


def beat_health(engine: Any) -> Health:
    """Whether beat's loop is alive: its last completed tick (``engine.last_tick``,
    on the engine's monotonic clock) is at most :func:`tick_limit` seconds old.
    A tick that raised does not count."""
    limit = tick_limit(engine)
    last = getattr(engine, "last_tick", None)
    if last is None:
        return Health(False, f"unhealthy: beat has not completed a tick yet (limit {limit:g}s)")
    age = max(0.0, engine.monotonic() - last)
    leadership = getattr(engine, "leadership", None)
    role = "" if leadership is None else (" (leader)" if leadership.leading else " (standby)")
    if age > limit:
        return Health(
            False,
            f"unhealthy: beat's last tick was {age:.1f}s ago, over the {limit:g}s limit{role}",
        )
    return Health(True, f"ok: beat's last tick was {age:.1f}s ago{role}")


WsgiApp = Callable[[dict[str, Any], Callable[..., Any]], Iterable[bytes]]


def endpoint_app(registry: CollectorRegistry, engine: Any) -> WsgiApp:
    """The WSGI app: ``/metrics``, ``/healthz``, 404 elsewhere."""
    metrics = make_wsgi_app(registry)

    def text(start: Callable[..., Any], status: str, body: str) -> list[bytes]:
        data = (body + "\n").encode()
        start(
            status,
            [("Content-Type", "text/plain; charset=utf-8"), ("Content-Length", str(len(data)))],
        )
        return [data]

    def app(environ: dict[str, Any], start: Callable[..., Any]) -> Iterable[bytes]:
        path = environ.get("PATH_INFO") or "/"
        if path == "/metrics":
            return metrics(environ, start)  # type: ignore[no-any-return]
        if path == "/healthz":
            health = beat_health(engine)
            status = "200 OK" if health.healthy else "503 Service Unavailable"
            return text(start, status, health.text)
        return text(start, "404 Not Found", f"not found: {path} (try /metrics or /healthz)")

    return app


class _Server(ThreadingMixIn, WSGIServer):
    daemon_threads = True
    allow_reuse_address = True


class _QuietHandler(WSGIRequestHandler):
    def log_message(self, format: str, *args: Any) -> None:
        """Scrapes are not logged (one every few seconds)."""


@dataclass
class MetricsServer:
    """The running endpoint (a daemon thread); ``port`` is the bound port."""

    server: WSGIServer
    thread: threading.Thread

    @property
    def port(self) -> int:
        return int(self.server.server_port)

    def shutdown(self) -> None:
        self.server.shutdown()
        self.server.server_close()
        self.thread.join(timeout=5)


def serve_metrics(
    engine: Any, store: ScheduleStore, clock: Clock, port: int, addr: str = "0.0.0.0"
) -> MetricsServer:
    """Start the HTTP endpoint (a daemon thread) and hook dispatch lateness."""
    app = endpoint_app(metrics_registry(engine, store, clock), engine)
    family = socket.getaddrinfo(addr, port, type=socket.SOCK_STREAM)[0][0]

    class Server(_Server):
        address_family = family  # IPv6 too (dgs_metrics_addr "::")

    server = make_server(addr, port, app, Server, _QuietHandler)
    thread = threading.Thread(target=server.serve_forever, name="dgs-metrics", daemon=True)
    thread.start()
    logger.info("celery-dgs: metrics on http://%s:%d/metrics (health: /healthz)", addr, port)
    return MetricsServer(server, thread)
