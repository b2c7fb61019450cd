"""What the status page shows, derived from the state ``celery dgs status``
reads (:func:`~celery_dgs.cli.show.read_state`): no condition, time or hold
is computed here, only grouped, filtered, paged and put into words or pictures.

No web framework is imported: the pages' templates get these values.
"""

from __future__ import annotations

import bisect
import dataclasses
import time
from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime, timedelta
from functools import cached_property, lru_cache
from typing import Any

from ..cli.context import Env
from ..cli.leader_view import leader_json, read_leader
from ..cli.output import duration, relative, short_time
from ..cli.show import State, read_state
from ..core.condition import Level
from ..core.cron import next_cron_time
from ..core.run_end import FAILURE_OUTCOMES, INTERRUPTION_OUTCOMES
from ..core.spec import MAX_INTERVAL_INDEX, AdaptiveSpec, CronSpec, PeriodicSpec, ScheduleSpec
from ..leases.types import LeaseInfo
from ..status import (
    CachedCheckSummary,
    StatusRow,
    count_levels,
    name_matcher,
    ping_age,
    steal_state,
)
from ..store.check_types import CheckSummary
from ..store.records import RunRecord, StoredSchedule

#: Rows on one page of the schedules table.
PAGE_SIZE = 50
#: The most overdue deferred checks the overview links to.
OVERDUE_CHECKS_SHOWN = 5

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
class Snapshot:
    """One read of the whole state, shared by the pages until it is refreshed."""

    state: State
    #: :func:`~celery_dgs.cli.leader_view.leader_json` of the beat leader.
    leader: dict[str, Any] | None
    pending_dispatches: int
    #: Rows by time to ERROR: the ones in ERROR (and without times) first.
    ordered: list[StatusRow]
    by_name: dict[str, StatusRow]
    stored: dict[str, StoredSchedule]
    #: Seconds the read took.
    read_seconds: float
    #: Pending deferred checks per task (one grouped query), and the most
    #: overdue ones (at most :data:`OVERDUE_CHECKS_SHOWN`).
    checks: CheckSummary = dataclasses.field(default_factory=CheckSummary)
    overdue_checks: list[StoredSchedule] = dataclasses.field(default_factory=list)

    @property
    def now(self) -> datetime:
        return self.state.now

    # Computed once per snapshot, on first use (pages poll the same snapshot).

    @cached_property
    def by_condition(self) -> dict[str, list[StatusRow]]:
        """The ordered rows of each condition."""
        out: dict[str, list[StatusRow]] = {level.name: [] for level in Level}
        for row in self.ordered:
            out[row.condition].append(row)
        return out

    @cached_property
    def by_pool(self) -> dict[str, list[StatusRow]]:
        """The ordered rows of each pool."""
        out: dict[str, list[StatusRow]] = {}
        for row in self.ordered:
            out.setdefault(row.pool, []).append(row)
        return out

    @cached_property
    def overview(self) -> dict[str, Any]:
        return overview(self)


def error_order(row: StatusRow) -> tuple[int, float, str]:
    """Sort key "time to ERROR": ERROR rows and rows without an ``error_at``
    (an invalid spec) first, then the earliest ``error_at``; then the name."""
    if row.error_at is None:
        return (0 if row.level is Level.ERROR else 2, 0.0, row.name)
    return (1, row.error_at.timestamp(), row.name)


def take_snapshot(env: Env, checks_cache: CachedCheckSummary | None = None) -> Snapshot:
    """Read the store and Redis once, through the CLI's read; the deferred
    checks' summary through ``checks_cache`` (else read now)."""
    started = time.perf_counter()
    state = read_state(env)
    info, timeout = read_leader(env)
    pending = env.runtime.dispatches.pending_count()
    store = env.runtime.store
    checks = (
        store.check_summary(state.now) if checks_cache is None else checks_cache.get()
    ) or CheckSummary()
    overdue = (
        store.pending_checks(due_before=state.now, limit=OVERDUE_CHECKS_SHOWN)
        if checks.total_overdue
        else []
    )
    return snapshot_of(
        state,
        leader_json(info, state.now, timeout),
        pending,
        read_seconds=time.perf_counter() - started,
        checks=checks,
        overdue_checks=overdue,
    )


def snapshot_of(
    state: State,
    leader: dict[str, Any] | None,
    pending: int,
    *,
    read_seconds: float = 0.0,
    checks: CheckSummary | None = None,
    overdue_checks: Sequence[StoredSchedule] = (),
) -> Snapshot:
    ordered = sorted(state.rows, key=error_order)
    return Snapshot(
        state=state,
        leader=leader,
        pending_dispatches=pending,
        ordered=ordered,
        by_name={r.name: r for r in ordered},
        stored={s.name: s for s in state.schedules},
        read_seconds=read_seconds,
        checks=checks or CheckSummary(),
        overdue_checks=list(overdue_checks),
    )


# -- overview -------------------------------------------------------------------------


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


# -- schedules table ------------------------------------------------------------------


@dataclass(frozen=True)
class Query:
    """The schedules table's filters (empty: everything) and page (1-based)."""

    q: str = ""
    condition: str = ""
    pool: str = ""
    task: str = ""
    page: int = 1

    def params(self, **changes: Any) -> dict[str, str]:
        values = {
            "q": self.q,
            "condition": self.condition,
            "pool": self.pool,
            "task": self.task,
            "page": str(self.page),
        }
        values.update({k: str(v) for k, v in changes.items()})
        return {k: v for k, v in values.items() if v and not (k == "page" and v == "1")}


@dataclass(frozen=True)
class Page:
    rows: list[StatusRow]
    total: int
    page: int
    pages: int
    query: Query


def page_of(snap: Snapshot, query: Query, size: int = PAGE_SIZE) -> Page:
    """One page of the rows passing ``query``, by time to ERROR: ``q`` a name
    pattern (as ``celery dgs status PATTERN``), ``condition`` a level name,
    ``pool`` exact, ``task`` a substring of the task name. The condition and
    pool come from the snapshot's indexes; the other filters scan what is left."""
    rows = snap.ordered
    level = query.condition.upper()
    if level:
        rows = snap.by_condition.get(level, [])
    if query.pool:
        pool_rows = snap.by_pool.get(query.pool, [])
        rows = [r for r in pool_rows if r.condition == level] if level else pool_rows
    if query.task:
        task = query.task
        rows = [r for r in rows if task in r.task]
    if query.q:
        match = name_matcher(query.q)
        rows = [r for r in rows if match(r.name)]
    pages = max(1, -(-len(rows) // size))
    page = min(max(query.page, 1), pages)
    return Page(rows[(page - 1) * size : page * size], len(rows), page, pages, query)


def pools_of(snap: Snapshot) -> list[str]:
    return sorted(snap.by_pool)


# -- one schedule ---------------------------------------------------------------------


def spec_words(spec: ScheduleSpec) -> str:
    """The spec as a sentence: "fresh within 1d00h; cron 0 0 * * * America/New_York,
    done within 6h00m; blackout 12:00-14:00"."""
    parts: list[str] = []
    if isinstance(spec, PeriodicSpec):
        parts.append(f"fresh within {duration(spec.scheduling_period)}")
        if spec.cooldown_duration:
            parts.append(f"cooldown {duration(spec.cooldown_duration)}")
    elif isinstance(spec, CronSpec):
        parts.append(
            f"cron {spec.cron_schedule} {spec.tz}, done within "
            f"{duration(spec.cron_max_schedule_duration)}"
        )
    elif isinstance(spec, AdaptiveSpec):
        parts.append(
            f"adaptive, unit {duration(spec.interval_unit)}, starting at step "
            f"{spec.initial_interval_index} of 0-{MAX_INTERVAL_INDEX}, disabled after "
            f"{spec.max_failures} failures in a row"
        )
    for window in spec.blackout_periods:
        zone = "" if isinstance(spec, CronSpec) or spec.tz == "UTC" else f" {spec.tz}"
        parts.append(f"blackout {window.start:%H:%M}-{window.end:%H:%M}{zone}")
    if spec.pool:
        parts.append(f"pool {spec.pool}")
    if spec.max_expected_duration is not None:
        parts.append(f"expected under {duration(spec.max_expected_duration)}")
    if spec.max_allowed_duration is not None:
        parts.append(f"killed after {duration(spec.max_allowed_duration)}")
    if spec.duration_override is not None:
        parts.append(f"planned as {duration(spec.duration_override)}")
    if spec.dont_run_on_nodes:
        parts.append(f"never on {', '.join(sorted(spec.dont_run_on_nodes))}")
    return "; ".join(parts)


def ladder_words(row: StatusRow, spec: ScheduleSpec | None) -> str:
    """An adaptive schedule's interval now: "adaptive, every 2h00m now (step 4
    of 0-10, unit 1h00m)"; ``""`` for other schedules."""
    if row.interval is None or row.interval_index is None:
        return ""
    unit = f", unit {duration(spec.interval_unit)}" if isinstance(spec, AdaptiveSpec) else ""
    return (
        f"adaptive, every {duration(row.interval)} now (step {row.interval_index} "
        f"of 0-{MAX_INTERVAL_INDEX}{unit})"
    )


def priority_words(row: StatusRow) -> str:
    """Its priority class: "50", or "80→20" when beat serves it in another
    class now (the elevator moved it up, or a run request); "-" without a spec."""
    if row.priority is None:
        return "-"
    effective = row.effective_priority
    if effective is None or effective == row.priority:
        return str(row.priority)
    return f"{row.priority}→{effective}"


def tags_of(row: StatusRow) -> list[str]:
    """The holds shown as tags next to its condition: ``paused``, ``disabled``."""
    return [tag for tag, on in (("paused", row.paused), ("disabled", row.disabled_reason)) if on]


@dataclass(frozen=True)
class LeaseView:
    schedule: str
    owner: str
    run: str
    token: int
    started: str
    ping_age: str
    progress: float | None
    steal: str
    cancel_requested: bool


def lease_view(
    lease: LeaseInfo, now: datetime, *, ping_timeout: float, steal_delay: float
) -> LeaseView:
    return LeaseView(
        schedule=lease.schedule,
        owner=lease.owner_name,
        run=lease.owner_tag,
        token=lease.token,
        started=relative(lease.started_at, now),
        ping_age=duration(ping_age(lease, now)),
        progress=lease.progress,
        cancel_requested=lease.cancel_requested,
        steal=steal_state(lease, now, ping_timeout=ping_timeout, steal_delay=steal_delay),
    )


OUTCOME_CSS = {
    **dict.fromkeys(FAILURE_OUTCOMES, "error"),
    **dict.fromkeys(INTERRUPTION_OUTCOMES, "muted"),
    "success": "ok",
    "running": "running",
    "skipped": "muted",
}


@dataclass(frozen=True)
class Mark:
    """A vertical line of the timeline: a deadline or now."""

    label: str
    x: float
    css: str
    #: Where its label goes: a row of its own, so close lines never overlap.
    label_y: float = 12.0
    #: Its label's side: "start" (right of the line) or "end" (left, near the right edge).
    anchor: str = "start"


@dataclass(frozen=True)
class RunBar:
    x: float
    width: float
    y: float
    height: float
    css: str
    title: str


@dataclass(frozen=True)
class Timeline:
    width: float
    height: float
    lane_y: float
    bars: list[RunBar]
    marks: list[Mark]
    #: (x, text, text-anchor) of the time axis' labels.
    ticks: list[tuple[float, str, str]]


TL_W, TL_H, TL_LANE, TL_TOP = 1160.0, 200.0, 168.0, 44.0


def timeline(runs: Sequence[RunRecord], row: StatusRow, now: datetime) -> Timeline:
    """Recent runs on a time axis ending after ``error_at``: each run a bar
    from its start, as wide as it ran, as tall as its duration relative to the
    longest shown, coloured by outcome; should_start_by, error_at and now drawn."""
    starts = [r.started_at for r in runs]
    moments = [now, *starts]
    marks_at = [
        ("should_start_by", row.should_start_by, "warning"),
        ("error_at", row.error_at, "error"),
    ]
    moments += [m for _, m, _ in marks_at if m is not None]
    lo, hi = min(moments), max(moments)
    span = max((hi - lo).total_seconds(), 60.0)
    lo, hi = lo - timedelta(seconds=span * 0.03), hi + timedelta(seconds=span * 0.05)
    total = (hi - lo).total_seconds()

    def x(moment: datetime) -> float:
        return 40 + (TL_W - 60) * (moment - lo).total_seconds() / total

    lengths = [((r.ended_at or now) - r.started_at).total_seconds() for r in runs]
    longest = max([*lengths, 1e-9])
    bars = []
    for run, length in zip(runs, lengths, strict=True):
        height = max(3.0, (TL_LANE - TL_TOP) * length / longest)
        end = run.ended_at or now
        width = max(3.0, x(end) - x(run.started_at))
        title = f"{short_time(run.started_at)}: {run.outcome}, {duration(length)}" + (
            f": {run.error.splitlines()[0][:200]}" if run.error else ""
        )
        bars.append(
            RunBar(
                x(run.started_at),
                width,
                TL_LANE - height,
                height,
                OUTCOME_CSS.get(run.outcome, "warning"),
                title,
            )
        )
    marks = [Mark(label, x(m), css) for label, m, css in marks_at if m is not None]
    marks.append(Mark("now", x(now), "now"))
    marks = [
        dataclasses.replace(m, label_y=12.0 + 14 * i, anchor="end" if m.x > TL_W * 0.7 else "start")
        for i, m in enumerate(marks)
    ]
    ticks = [
        (
            40 + (TL_W - 60) * i / 4,
            short_time(lo + timedelta(seconds=total * i / 4))[5:16],
            "start" if i == 0 else "end" if i == 4 else "middle",
        )
        for i in range(5)
    ]
    return Timeline(TL_W, TL_H, TL_LANE, bars, marks, ticks)


def average_of(stored: StoredSchedule) -> tuple[str, str]:
    """The average good duration and its deviation, as beat plans with them
    (the stored statistics' EWMAs)."""
    stats = stored.stats
    return duration(stats.average_good_duration), duration(stats.duration_deviation)
