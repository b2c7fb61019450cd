"""The state ``celery dgs status`` and the status page show: every active
schedule's status row with the live leases and workers, read once."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime

from ..leases.types import LeaseInfo
from ..registry import WorkerInfo
from ..status import StatusRow, build_rows, matches
from ..store.records import StoredSchedule
from .env import Env, utcnow


@dataclass(frozen=True)
class State:
    """Every stored active schedule, its status row (most urgent first), the
    live leases and workers, and the ``now`` the rows were computed at."""

    schedules: list[StoredSchedule]
    rows: list[StatusRow]
    leases: dict[str, LeaseInfo]
    workers: list[WorkerInfo]
    now: datetime


def read_state(env: Env) -> State:
    """The rows through :func:`~celery_dgs.status.build_rows` with the live
    workers' slots (``dgs_capacity`` when no worker is live)."""
    rt = env.runtime
    schedules = rt.store.list_schedules()
    leases = {lease.schedule: lease for lease in rt.leases.all()}
    workers = rt.registry.live_workers()
    now = utcnow()
    slots = sum(w.slots for w in workers) if workers else env.settings.capacity
    rows = build_rows(
        schedules,
        leases,
        now,
        retry_ladder=env.settings.retry_ladder,
        default_pool=env.default_pool,
        slots=slots,
        settings=env.settings,
        workers=workers,
    )
    return State(schedules, rows, leases, workers, now)


def read_status(
    env: Env, conditions: Sequence[str], pools: Sequence[str], patterns: Sequence[str]
) -> tuple[list[StatusRow], list[WorkerInfo], datetime]:
    """The rows passing the filters (:func:`~celery_dgs.status.matches`), most
    urgent first, the live workers, and the ``now`` the conditions were
    computed at."""
    state = read_state(env)
    kept = [
        r for r in state.rows if matches(r, conditions=conditions, pools=pools, patterns=patterns)
    ]
    return kept, state.workers, state.now
