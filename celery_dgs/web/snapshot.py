"""One read of the whole state for the status page (:class:`Snapshot`),
through the operations layer (:func:`~celery_dgs.ops.state.read_state`): no
condition, time or hold is computed here, only indexed for the pages."""

from __future__ import annotations

import dataclasses
import time
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime
from functools import cached_property
from typing import Any

from ..core.condition import Level
from ..core.pace import PaceFigures
from ..ops.env import Env
from ..ops.leader import leader_json, read_leader, read_overload, read_pace
from ..ops.state import State, read_state
from ..overload_board import OverloadReport
from ..status import CachedCheckSummary, StatusRow
from ..store.check_types import CheckSummary
from ..store.records import StoredSchedule

#: The most overdue deferred checks the overview links to.
OVERDUE_CHECKS_SHOWN = 5


@dataclass(frozen=True)
class Snapshot:
    """One read of the whole state, shared by the pages until it is refreshed."""

    state: State
    #: :func:`~celery_dgs.ops.leader.leader_json` of the beat leader.
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
    #: The leading beat's dispatch pace over the last minute (None: none written).
    pace: PaceFigures | None = None
    #: What the leading beat's fewest_errors order makes wait (None: none written).
    overload: OverloadReport | None = None

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


def error_order(row: StatusRow) -> tuple[int, float, str]:
    """Sort key "time to ERROR": ERROR rows and rows without an ``error_at``
    (an invalid spec) first, then the earliest ``error_at``; then the name."""
    if row.error_at is None:
        return (0 if row.level is Level.ERROR else 2, 0.0, row.name)
    return (1, row.error_at.timestamp(), row.name)


def take_snapshot(env: Env, checks_cache: CachedCheckSummary | None = None) -> Snapshot:
    """Read the store and Redis once, as ``celery dgs status`` reads them; the
    deferred checks' summary through ``checks_cache`` (else read now)."""
    started = time.perf_counter()
    state = read_state(env)
    info, timeout = read_leader(env)
    pace = read_pace(env)
    overload = read_overload(env)
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
        pace=pace,
        overload=overload,
    )


def snapshot_of(
    state: State,
    leader: dict[str, Any] | None,
    pending: int,
    *,
    read_seconds: float = 0.0,
    checks: CheckSummary | None = None,
    overdue_checks: Sequence[StoredSchedule] = (),
    pace: PaceFigures | None = None,
    overload: OverloadReport | None = None,
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
        pace=pace,
        overload=overload,
    )
