"""Prometheus metrics, served by beat when ``dgs_metrics_port`` is set.

Collected at scrape time from beat's own state (the schedules it tracks, its
last Redis snapshot) and, for run counts, one grouped query on the store:

- ``dgs_schedule_condition{schedule,reason}``: 0 OK, 1 WARNING, 2 ERROR;
- ``dgs_schedule_seconds_until_error{schedule}`` (negative once in ERROR);
- ``dgs_runs_total{outcome}``, ``dgs_lease_steals_total`` (runs ended
  ``lost`` or ``stolen``);
- ``dgs_worker_slots{state="free"|"used"}``, ``dgs_dispatches_pending``;
- ``dgs_most_urgent_drift_seconds``: now - should_start_by of the most urgent
  eligible schedule (positive: beat is behind);
- ``dgs_dispatch_lateness_seconds``: histogram of now - should_start_by at
  each dispatch;
- ``dgs_beat_leader``: 1 while this beat holds the leader lease and dispatches,
  0 while it stands by (docs/beat-ha.md); ``dgs_beat_leader_token``: the
  leader token this beat last saw (its own while leading). A standby's slot
  and pending gauges are not refreshed: alert on the leader's.

A scrape computes every schedule's condition: O(N) per scrape, not per tick.
"""

from __future__ import annotations

import logging
from collections.abc import Iterator
from typing import Any

from prometheus_client import CollectorRegistry, Histogram, start_http_server
from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily, Metric

from .core.clock import Clock
from .core.condition import RunningState, condition, declaration_invalid

logger = logging.getLogger("celery_dgs.metrics")

LATENESS_BUCKETS_S = (-3600, -600, -60, -10, 0, 10, 60, 300, 900, 3600, 4 * 3600, 24 * 3600)


class EngineCollector:
    def __init__(self, engine: Any, store: Any, clock: Clock) -> None:
        self.engine, self.store, self.clock = engine, store, clock

    def collect(self) -> Iterator[Metric]:
        now = self.clock.now()
        engine = self.engine
        level = GaugeMetricFamily(
            "dgs_schedule_condition", "Schedule condition: 0 OK, 1 WARNING, 2 ERROR",
            labels=["schedule", "reason"],
        )  # fmt: skip
        until = GaugeMetricFamily(
            "dgs_schedule_seconds_until_error", "Seconds until the schedule is in ERROR",
            labels=["schedule"],
        )  # fmt: skip
        try:  # read at scrape time: a tick never pays for metrics
            leases = {lease.schedule: lease for lease in engine.leases.all()}
        except Exception:
            logger.exception("celery-dgs: reading leases for metrics failed")
            leases = {}
        for name, tracked in list(engine.tracked.items()):
            lease = leases.get(name)
            running = RunningState(started_at=lease.started_at) if lease is not None else None
            cond = condition(tracked.spec, tracked.stats, running, now)
            if tracked.declaration_error is not None:
                cond = declaration_invalid(name, tracked.declaration_error, cond)
            level.add_metric([name, cond.reason.value], int(cond.level))
            if cond.error_at is not None:
                until.add_metric([name], (cond.error_at - now).total_seconds())
        yield level
        yield until
        try:
            counts = self.store.outcome_counts()
        except Exception:
            logger.exception("celery-dgs: reading run counts for metrics failed")
            counts = {}
        runs = CounterMetricFamily("dgs_runs", "Runs recorded, by outcome", labels=["outcome"])
        for outcome, count in sorted(counts.items()):
            runs.add_metric([outcome], count)
        yield runs
        yield CounterMetricFamily(
            "dgs_lease_steals", "Runs whose lease was taken over (lost or stolen)",
            value=counts.get("lost", 0) + counts.get("stolen", 0),
        )  # fmt: skip
        slots = GaugeMetricFamily("dgs_worker_slots", "Worker slots", labels=["state"])
        slots.add_metric(["free"], engine.slots_free)
        slots.add_metric(["used"], max(engine.slots_total - engine.slots_free, 0))
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
                "dgs_beat_leader", "1 while this beat leads (dispatches), 0 while it stands by",
                value=1 if leadership.leading else 0,
            )  # fmt: skip
            holder = leadership.holder
            token = leadership.token if leadership.leading or holder is None else holder.token
            yield GaugeMetricFamily(
                "dgs_beat_leader_token", "The beat leader token this beat last saw", value=token
            )


def serve_metrics(
    engine: Any, store: Any, clock: Clock, port: int, addr: str = "0.0.0.0"
) -> Any:
    """Start the HTTP endpoint (a daemon thread) and hook dispatch lateness."""
    registry = CollectorRegistry()
    registry.register(EngineCollector(engine, store, clock))
    lateness = Histogram(
        "dgs_dispatch_lateness_seconds", "now - should_start_by at dispatch",
        buckets=LATENESS_BUCKETS_S, registry=registry,
    )  # fmt: skip
    engine.on_dispatch = lateness.observe
    server = start_http_server(port, addr=addr, registry=registry)
    logger.info("celery-dgs: metrics on http://%s:%d/metrics", addr, port)
    return server
