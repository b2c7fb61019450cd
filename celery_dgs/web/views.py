"""What the schedule, schedules and leases pages show: the schedules table
filtered, counted and paged in the store, and a schedule's spec, runs and
lease put into words or pictures.

No web framework is imported: the pages' templates get these values.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any

from ..core.condition import Level
from ..core.run_end import FAILURE_OUTCOMES, INTERRUPTION_OUTCOMES
from ..core.spec import MAX_INTERVAL_INDEX, AdaptiveSpec, ScheduleSpec
from ..leases.types import LeaseInfo
from ..ops.env import Env
from ..ops.state import rows_of
from ..ops.timetext import duration, relative, short_time
from ..status import StatusRow, ping_age, steal_state
from ..store.records import RunRecord, StoredSchedule
from ..store.selection import Selection
from .snapshot import Snapshot

#: Rows on one page of the schedules table.
PAGE_SIZE = 50
#: The most urgent rows the table pages through (deeper pages would read
#: every row before them); narrower filters reach the others.
MAX_PAGED_ROWS = 10_000


# -- schedules table ------------------------------------------------------------------


@dataclass(frozen=True)
class Query:
    """The schedules table's filters (empty: everything) and page (1-based);
    ``condition`` a level name (:func:`condition_level`)."""

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
    """One page of the schedules table, read at ``now``."""

    rows: list[StatusRow]
    #: How many schedules the filters select (at most :data:`MAX_PAGED_ROWS` are
    #: paged); a name, pool or task filter's is counted no further than one past
    #: that (:attr:`exact` then false).
    total: int
    page: int
    pages: int
    query: Query
    now: datetime
    #: The rows' specs by name (an adaptive schedule's interval in words).
    specs: dict[str, ScheduleSpec | None]

    #: Whether ``total`` is the whole count (false: more than the pages reach).
    exact: bool = True

    @property
    def capped(self) -> bool:
        """Whether more schedules are selected than the pages reach."""
        return self.total > MAX_PAGED_ROWS


def condition_level(text: str) -> str:
    """The level name a condition filter means (``""``: any); anything but a
    level name is a :class:`ValueError` naming it."""
    level = text.strip().upper()
    if level and level not in Level.__members__:
        raise ValueError(f"condition must be ERROR, WARNING or OK, got {text[:20]!r}")
    return level


def selection_of(query: Query, default_pool: str) -> Selection:
    """The table's filters as a store selection (``query.condition``: a
    level name, :func:`condition_level`)."""
    return Selection(
        patterns=(query.q,) if query.q else (),
        conditions=(query.condition,) if query.condition else (),
        pools=(query.pool,) if query.pool else (),
        default_pool=default_pool,
        task_word=query.task,
    )


def page_of(env: Env, snap: Snapshot, query: Query, size: int | None = None) -> Page:
    """One page of the schedules ``query`` selects, most urgent first (the
    store's order, as ``celery dgs status``), filtered, counted and paged in
    the store: ``q`` a name pattern (as ``celery dgs status PATTERN``),
    ``condition`` a level name, ``pool`` exact, ``task`` a word of the task
    name. Without a name, pool or task filter the total is the snapshot's
    count (an index count, already read); with one, a count of the rows it
    selects, no further than one past the pages' reach (so a filter of a
    huge fleet costs its page, not its whole selection). The rows get
    ``snap``'s live runs and workers. ``size``: rows a page (default
    :data:`PAGE_SIZE`)."""
    size = size or PAGE_SIZE
    selection = selection_of(query, env.default_pool)
    store = env.runtime.store
    now = snap.now
    exact = True
    if selection.patterns or selection.pools or selection.task_word:
        total = store.count_selected(now, selection, MAX_PAGED_ROWS + 1)
        exact = total <= MAX_PAGED_ROWS
    else:
        levels = set(selection.levels) or set(snap.counts)
        total = sum(n for level, n in snap.counts.items() if level in levels)
    pages = max(1, -(-min(total, MAX_PAGED_ROWS) // size))
    page = min(max(query.page, 1), pages)
    stored = list(store.status_rows(now, selection, limit=size, offset=(page - 1) * size))
    rows = rows_of(env, stored, snap.live)
    specs = {s.name: s.spec for s in stored}
    return Page(rows, total, page, pages, query, now, specs, exact)


def pools_of(snap: Snapshot, env: Env, query: Query) -> list[str]:
    """The pools the filter offers: the default one, every live worker's
    queues, and the one filtered on."""
    pools = {env.default_pool, *(q for w in snap.workers for q in w.pools)}
    if query.pool:
        pools.add(query.pool)
    return sorted(pools)


# -- one schedule ---------------------------------------------------------------------


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
