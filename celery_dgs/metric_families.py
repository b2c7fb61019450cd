"""The Prometheus metric families of one scrape, built from what it read
(beat's snapshot, the leases and live workers): pure functions, no reads.
:mod:`celery_dgs.metrics` collects and serves them."""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterator, Mapping, Set
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any, Protocol

from prometheus_client.core import GaugeMetricFamily, Metric

from .core.condition import Level
from .core.spec import ScheduleSpec
from .core.stats import ScheduleStats
from .status import (
    HOLD_INVALID_SPEC,
    INVALID_SPEC,
    WorkerCheck,
    adaptive_summary,
    holds_for,
    is_check_name,
    schedule_condition,
)
from .status.queues import QueueLoad


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


@dataclass(frozen=True)
class ScheduleView:
    """What a scrape read besides beat's snapshot, for each schedule's gauges."""

    now: datetime
    leases: Mapping[str, Any]
    workers: WorkerCheck | None
    retry_ladder: tuple[timedelta, ...]
    default_pool: str


def schedule_families(
    view: ScheduleView,
    schedules: list[tuple[str, TrackedSchedule]],
    snapshot: BeatStateView,
    *,
    per_schedule: bool = True,
) -> Iterator[Metric]:
    """``dgs_schedule_condition``, ``dgs_schedule_seconds_until_error``,
    ``dgs_schedule_held`` per schedule (unless ``per_schedule`` is False),
    and ``dgs_priority_class_schedules``."""
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
        by_class[(tracked.spec.priority, cond.level.name)] += 1
        if not per_schedule:
            continue
        level.add_metric([name, cond.reason.value], int(cond.level))
        if cond.error_at is not None:
            until.add_metric([name], (cond.error_at - now).total_seconds())
        for reason in hold_reasons(view, name, tracked, paused=name in snapshot.held):
            held.add_metric([name, reason], 1)
    for name in snapshot.unschedulable:
        if not is_check_name(name):
            level.add_metric([name, INVALID_SPEC], int(Level.ERROR))
            held.add_metric([name, HOLD_INVALID_SPEC], 1)
    if per_schedule:
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
