"""The overview's state for the status page (:class:`Snapshot`), read from
the store's kept columns and Redis through the operations layer: counts by
condition and reason (grouped queries over the store's indexes), the most
urgent rows, the live runs and workers, the beat leader and its pace. No row
of the fleet is built here: its size costs index reads, not memory."""

from __future__ import annotations

import dataclasses
import time
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any

from ..core.condition import Level
from ..core.pace import PaceFigures
from ..leases.types import LeaseInfo, RestartGrace
from ..ops.env import Env, utcnow
from ..ops.leader import foreign_leader_of, leader_json, read_leader, read_overload, read_pace
from ..ops.restart import read_restart_grace
from ..ops.state import Live, level_counts, read_live, rows_of
from ..overload_board import OverloadReport
from ..registry import WorkerInfo
from ..status import StatusRow
from ..store.check_types import CheckSummary
from ..store.records import StoredSchedule
from ..store.selection import Selection
from .cache import SnapshotCache

#: The most overdue deferred checks the overview links to.
OVERDUE_CHECKS_SHOWN = 5
#: The schedules in ERROR or WARNING the overview lists, most urgent first.
URGENT_SHOWN = 10
#: The freshness histogram's bounds of the time left before ERROR.
TIME_TO_ERROR_BOUNDS: tuple[timedelta, ...] = (
    timedelta(hours=1),
    timedelta(hours=6),
    timedelta(days=1),
    timedelta(days=7),
)
#: Its buckets: in ERROR now, then between the bounds.
TIME_TO_ERROR_LABELS: tuple[str, ...] = ("in ERROR", "< 1h", "1h-6h", "6h-1d", "1d-7d", "≥ 7d")
#: The longest the overview's snapshot is kept once stale, however long it
#: takes to read: what it shows is at most this plus one read old.
OVERVIEW_LONGEST_S = 2.0
#: The fleet-wide reads (the histogram, the deferred-check summary) are read
#: again once their last reading is this many times as old as it took.
FLEET_READ_COST_FACTOR = 10.0


@dataclass(frozen=True)
class Snapshot:
    """One read of the overview's state, shared by the pages until it is refreshed."""

    live: Live
    #: Active schedules per (condition, reason) at ``now``.
    reasons: dict[tuple[str, str], int]
    #: The most urgent schedules in ERROR or WARNING (at most :data:`URGENT_SHOWN`).
    urgent: list[StatusRow]
    #: Schedules per :data:`TIME_TO_ERROR_LABELS` bucket (empty: not read yet).
    time_to_error: list[int]
    #: :func:`~celery_dgs.ops.leader.leader_json` of the beat leader.
    leader: dict[str, Any] | None
    pending_dispatches: int
    #: Seconds the read took.
    read_seconds: float
    #: Pending deferred checks per task (one grouped query), and the most
    #: overdue ones (at most :data:`OVERDUE_CHECKS_SHOWN`).
    checks: CheckSummary = dataclasses.field(default_factory=CheckSummary)
    overdue_checks: list[StoredSchedule] = dataclasses.field(default_factory=list)
    #: The leading beat's dispatch pace over the last minute (None: none written).
    pace: PaceFigures | None = None
    #: What the leading beat's fewest_errors order makes wait (None: none written).
    overload: OverloadReport | None = None
    #: The Redis restart grace holding schedules that ran before (None: none).
    restart_grace: RestartGrace | None = None
    #: Why the leading beat is another project's (None: it is this one's).
    leader_warning: str | None = None

    @property
    def now(self) -> datetime:
        return self.live.now

    @property
    def leases(self) -> dict[str, LeaseInfo]:
        return self.live.leases

    @property
    def workers(self) -> list[WorkerInfo]:
        return self.live.workers

    @property
    def counts(self) -> dict[str, int]:
        """``{"ERROR": n, "WARNING": n, "OK": n}``."""
        return level_counts(self.reasons)


class FleetReads:
    """The overview's reads that scan the fleet's index entries (the
    freshness histogram, the deferred-check summary), each kept apart from
    the snapshot and read again in the background once it is
    :data:`FLEET_READ_COST_FACTOR` times as old as it took: the snapshot's
    own read never waits for them but the first time."""

    def __init__(self, env: Env, max_age: float) -> None:
        store = env.runtime.store
        self.checks = SnapshotCache(
            lambda: store.check_summary(utcnow()), max_age, FLEET_READ_COST_FACTOR
        )
        self.time_to_error = SnapshotCache(
            lambda: store.time_to_error_counts(utcnow(), TIME_TO_ERROR_BOUNDS),
            max_age,
            FLEET_READ_COST_FACTOR,
        )


def take_snapshot(env: Env, fleet: FleetReads) -> Snapshot:
    """Read the overview's state once: the counts and the most urgent rows from
    the store's kept columns, as ``celery dgs status`` reads them; the leases,
    workers, leader and pace from Redis; the fleet-wide figures through
    ``fleet``."""
    started = time.perf_counter()
    live = read_live(env)
    store = env.runtime.store
    every = Selection(default_pool=env.default_pool)
    reasons = store.condition_counts(live.now, every)
    attention = dataclasses.replace(every, conditions=(Level.ERROR.name, Level.WARNING.name))
    urgent = rows_of(env, list(store.status_rows(live.now, attention, limit=URGENT_SHOWN)), live)
    info, timeout = read_leader(env)
    checks = fleet.checks.get()
    overdue = (
        store.pending_checks(due_before=live.now, limit=OVERDUE_CHECKS_SHOWN)
        if checks.total_overdue
        else []
    )
    return Snapshot(
        live=live,
        reasons=reasons,
        urgent=urgent,
        time_to_error=fleet.time_to_error.get(),
        leader=leader_json(info, live.now, timeout),
        pending_dispatches=env.runtime.dispatches.pending_count(),
        read_seconds=time.perf_counter() - started,
        checks=checks,
        overdue_checks=overdue,
        pace=read_pace(env),
        overload=read_overload(env),
        restart_grace=read_restart_grace(env),
        leader_warning=foreign_leader_of(env, info),
    )
