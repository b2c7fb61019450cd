"""A schedule's run history, newest first."""

from __future__ import annotations

from ..store.records import RunRecord, StoredSchedule
from .env import Env
from .lookup import resolve_schedule


def read_runs(env: Env, name: str, limit: int) -> tuple[StoredSchedule, list[RunRecord]]:
    """The schedule called ``name`` (:func:`~.lookup.resolve_schedule`) and
    its latest ``limit`` runs."""
    schedule = resolve_schedule(env, name)
    return schedule, recent_runs(env, schedule.name, limit)


def recent_runs(env: Env, name: str, limit: int) -> list[RunRecord]:
    """The latest ``limit`` runs stored for ``name`` (none for an unknown name)."""
    return env.runtime.store.runs(name, limit=limit)
