"""The state ``celery dgs status`` and the status page show.

* :func:`read_page`: the selected schedules' counts by condition (one
  grouped query over the store's kept columns) and one page of rows, most
  urgent first (filtered, ordered and limited in the store), each with its
  live lease; :func:`iter_rows` streams every selected row the same way.
  Lease state comes from Redis for the rows read, never for the fleet.
* :func:`read_state`: every active schedule's row with beat's order replayed
  over them all (``projected_late``, the look-ahead's holds): a read of the
  whole fleet, for ``status --project``.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Collection, Iterator, Sequence
from dataclasses import dataclass, replace
from datetime import datetime

from ..beat_pace import PaceBoard
from ..core.condition import Level
from ..core.elevator import ElevatorState
from ..core.schedule_names import is_check_name
from ..leases.types import LeaseInfo
from ..registry import WorkerInfo
from ..status import StatusRow, build_page, build_rows, matches
from ..store.records import StoredSchedule
from ..store.selection import Selection
from .env import Env, utcnow
from .leader import split_foreign_workers

#: Rows read and built together while every selected row is streamed.
STREAM_CHUNK_ROWS = 2_000

LEVEL_NAMES = tuple(level.name for level in sorted(Level, reverse=True))


def level_counts(reasons: dict[tuple[str, str], int]) -> dict[str, int]:
    """``{"ERROR": n, "WARNING": n, "OK": n}`` of counts by (level name, reason)."""
    counts = dict.fromkeys(LEVEL_NAMES, 0)
    for (level, _), n in reasons.items():
        counts[level] += n
    return counts


@dataclass(frozen=True)
class State:
    """Every stored active schedule, its status row (most urgent first), the
    live leases and workers, and the ``now`` the rows were computed at."""

    schedules: list[StoredSchedule]
    rows: list[StatusRow]
    leases: dict[str, LeaseInfo]
    workers: list[WorkerInfo]
    now: datetime
    #: Live workers registered for another schedule store (see :class:`Live`).
    foreign_workers: tuple[WorkerInfo, ...] = ()


@dataclass(frozen=True)
class Live:
    """The live leases and workers (Redis), and the ``now`` of the read."""

    leases: dict[str, LeaseInfo]
    #: This store's live workers (those that registered for another store
    #: are in ``foreign_workers``: counted nowhere, as beat places nothing on them).
    workers: list[WorkerInfo]
    now: datetime
    #: Live workers registered for another schedule store (a shared key prefix).
    foreign_workers: tuple[WorkerInfo, ...] = ()
    #: Where the leading beat's priority classes stand (its pace; ``None``:
    #: no leader wrote one lately).
    elevator: ElevatorState | None = None


@dataclass(frozen=True)
class OtherRuns:
    """The live runs a whole-fleet page's running count leaves out: deferred
    checks', and those of schedules the store holds no active row for
    (removed, or no longer declared, while their last run goes on)."""

    checks: int
    inactive: int


def other_runs(leases: Collection[str], running: int) -> OtherRuns:
    """Of the live runs of ``leases`` (schedule names), those not among the
    ``running`` ones of the fleet's active schedules."""
    checks = sum(1 for name in leases if is_check_name(name))
    return OtherRuns(checks, max(0, len(leases) - checks - running))


@dataclass(frozen=True)
class StatusPage:
    """The selected schedules' counts by (condition, reason), how many of them
    run, and one page of their rows, most urgent first."""

    now: datetime
    reasons: dict[tuple[str, str], int]
    rows: list[StatusRow]
    running: int
    live: Live
    #: Whether the rows carry beat's order replayed over the fleet (``--project``).
    projected: bool = False
    #: The live runs ``running`` leaves out, when the selection is the whole
    #: fleet (``None`` for a filtered one: its count is of what it selects).
    other: OtherRuns | None = None

    @property
    def counts(self) -> dict[str, int]:
        """``{"ERROR": n, "WARNING": n, "OK": n}``."""
        return level_counts(self.reasons)

    @property
    def total(self) -> int:
        return sum(self.reasons.values())

    @property
    def any_error(self) -> bool:
        return self.counts["ERROR"] > 0

    @property
    def workers(self) -> list[WorkerInfo]:
        return self.live.workers


def read_live(env: Env) -> Live:
    """Every lease and live worker (as many as runs and workers, not schedules);
    another store's workers set apart."""
    rt = env.runtime
    leases = {lease.schedule: lease for lease in rt.leases.all()}
    workers, foreign = split_foreign_workers(env, rt.registry.live_workers())
    pace = PaceBoard(rt.redis, rt.keys).read()
    elevator = None if pace is None else pace.elevator
    return Live(leases, workers, utcnow(), tuple(foreign), elevator)


def selection_of(
    env: Env, conditions: Sequence[str], pools: Sequence[str], patterns: Sequence[str]
) -> Selection:
    """The filters of ``status`` as a store selection."""
    return Selection(
        patterns=tuple(patterns),
        conditions=tuple(conditions),
        pools=tuple(pools),
        default_pool=env.default_pool,
    )


def read_page(
    env: Env, selection: Selection, *, limit: int | None, project: bool = False
) -> StatusPage:
    """Counts and the first ``limit`` rows (``None``: none read here; stream
    them with :func:`iter_rows`). ``project``: through :func:`read_state`."""
    if project:
        return _projected_page(env, selection, limit)
    live = read_live(env)
    store = env.runtime.store
    reasons = store.condition_counts(live.now, selection)
    running = sum(
        store.condition_counts(live.now, replace(selection, names=tuple(live.leases))).values()
    )
    rows: list[StatusRow] = []
    if limit:
        stored = store.status_rows(live.now, selection, limit=limit)
        rows = rows_of(env, list(stored), live)
    other = other_runs(live.leases, running) if whole_fleet(selection) else None
    return StatusPage(live.now, reasons, rows, running, live, other=other)


def whole_fleet(selection: Selection) -> bool:
    """Whether ``selection`` selects every active schedule (no filter)."""
    return selection == Selection(default_pool=selection.default_pool)


def iter_rows(env: Env, selection: Selection, live: Live) -> Iterator[StatusRow]:
    """Every selected row, most urgent first, read and built
    :data:`STREAM_CHUNK_ROWS` at a time (the priority classes are applied
    within each chunk)."""
    chunk: list[StoredSchedule] = []
    for stored in env.runtime.store.status_rows(live.now, selection):
        chunk.append(stored)
        if len(chunk) >= STREAM_CHUNK_ROWS:
            yield from rows_of(env, chunk, live)
            chunk = []
    yield from rows_of(env, chunk, live)


def rows_of(env: Env, schedules: list[StoredSchedule], live: Live) -> list[StatusRow]:
    """The status rows of ``schedules`` (in their order) with ``live``'s
    leases and workers, the priority classes applied over them."""
    if not schedules:
        return []
    return build_page(
        schedules,
        live.leases,
        live.now,
        settings=env.settings,
        default_pool=env.default_pool,
        workers=live.workers,
        elevator=live.elevator,
    )


def _projected_page(env: Env, selection: Selection, limit: int | None) -> StatusPage:
    """The page of :func:`read_state`'s rows passing the filters (every row
    when ``limit`` is ``None``)."""
    state = read_state(env)
    kept = [
        r
        for r in state.rows
        if matches(
            r,
            conditions=selection.conditions,
            pools=selection.pools,
            patterns=selection.patterns,
        )
    ]
    reasons = Counter((r.condition, r.reason) for r in kept)
    running = sum(1 for r in kept if r.running is not None)
    live = Live(state.leases, state.workers, state.now, state.foreign_workers)
    rows = kept if limit is None else kept[:limit]
    other = other_runs(state.leases, running) if whole_fleet(selection) else None
    return StatusPage(state.now, dict(reasons), rows, running, live, projected=True, other=other)


def read_state(env: Env) -> State:
    """Every active schedule's row through :func:`~celery_dgs.status.build_rows`
    with the live workers' slots (``dgs_capacity`` when no worker is live):
    the projection of beat's order over the whole fleet."""
    rt = env.runtime
    schedules = rt.store.list_schedules()
    live = read_live(env)
    workers, now = live.workers, live.now
    slots = sum(w.slots for w in workers) if workers else env.settings.capacity
    rows = build_rows(
        schedules,
        live.leases,
        now,
        retry_ladder=env.settings.retry_ladder,
        default_pool=env.default_pool,
        slots=slots,
        settings=env.settings,
        workers=workers,
        elevator=live.elevator,
    )
    return State(schedules, rows, live.leases, workers, now, live.foreign_workers)
