"""The run-history methods of the in-memory store: starts, ends, skips,
reads and pruning, on the rules of :mod:`~celery_dgs.store.run_rules` (the SQL
store's :mod:`~celery_dgs.store.sql_runs`)."""

from __future__ import annotations

import dataclasses
from collections import Counter
from datetime import datetime, timedelta
from typing import Any

from ..core.items import ItemCounts
from ..core.run_end import disabled_after, stats_after
from ..core.stats import DEFAULT_EWMA_ALPHA, record_start
from ..errors import StaleTokenError, UnknownRunError
from .convert import utc
from .memory_base import MemoryStoreBase
from .memory_checks import check_after_run
from .records import RunRecord, StoredSchedule
from .run_rules import (
    check_eventful,
    check_items,
    check_run_end,
    end_fenced,
    fenced_end_error,
    run_duration_s,
    stale_start,
)


class MemoryRunMethods(MemoryStoreBase):
    """Run history methods of :class:`~celery_dgs.store.memory.MemoryScheduleStore`."""

    def record_run_start(
        self,
        *,
        schedule: str,
        run_id: str,
        dispatch_id: str | None,
        owner_node: str,
        owner_name: str,
        owner_tag: str,
        token: int,
        started_at: datetime,
    ) -> None:
        """Add the run (``running``), set ``last_start_at`` and make ``token`` the
        schedule's ``current_token``. A ``run_id`` already recorded is a no-op.
        A token not above the current one is stored as a fenced skip, then
        :class:`~celery_dgs.errors.StaleTokenError` is raised."""
        started_at = utc(started_at, "started_at")
        stale: str | None = None
        with self._lock:
            row = self._row(schedule)
            if run_id in self._runs:
                return
            run = self._new_run(
                run_id=run_id,
                schedule=schedule,
                dispatch_id=dispatch_id,
                owner_node=owner_node,
                owner_name=owner_name,
                owner_tag=owner_tag,
                token=token,
                started_at=started_at,
                ended_at=None,
                outcome="running",
                error=None,
                duration_s=None,
            )
            stale = stale_start(schedule, token, row.current_token)
            if stale is not None:
                run = dataclasses.replace(
                    run,
                    outcome="skipped",
                    error=stale,
                    fenced=True,
                    ended_at=started_at,
                    duration_s=0.0,
                )
                self._runs[run_id] = run
            else:
                self._runs[run_id] = run
                self._touch(row, stats=record_start(row.stats, started_at), current_token=token)
        if stale is not None:
            raise StaleTokenError(stale)

    def record_run_end(
        self,
        *,
        run_id: str,
        outcome: str,
        ended_at: datetime,
        error: str | None = None,
        progress: float | None = None,
        alpha: float = DEFAULT_EWMA_ALPHA,
        duration_s: float | None = None,
        eventful: bool | None = None,
        verdict: object = None,
        items: ItemCounts | None = None,
    ) -> StoredSchedule:
        """Record how the run ended and update the schedule's statistics, fenced
        and idempotent exactly as the SQL store's (see
        :meth:`ScheduleStore.record_run_end`)."""
        check_run_end(outcome, progress, duration_s)
        check_eventful(eventful)
        items = check_items(items)
        ended_at = utc(ended_at, "ended_at")
        with self._lock:
            run = self._runs.get(run_id)
            if run is None:
                raise UnknownRunError(f"no run {run_id!r} in the store")
            row = self._row(run.schedule)
            fenced = run.fenced
            if run.outcome == "running":
                fenced = end_fenced(run.token, row.current_token)
                run = self._runs[run_id] = dataclasses.replace(
                    run,
                    outcome=outcome,
                    ended_at=ended_at,
                    error=error,
                    fenced=fenced,
                    duration_s=run_duration_s(run.started_at, ended_at, duration_s),
                    progress=run.progress if progress is None else progress,
                    items_ok=None if items is None else items.ok,
                    items_failed=None if items is None else items.failed,
                )
                if not fenced:
                    stats = stats_after(
                        row.stats,
                        outcome,
                        run.started_at,
                        ended_at,
                        alpha,
                        timedelta(seconds=run.duration_s or 0.0),
                        spec=row.spec,
                        eventful=eventful,
                        run_key=run.token or 0,
                        items=items,
                    )
                    disabled = disabled_after(row.spec, outcome, stats, row.disabled_reason)
                    changes = {
                        "stats": stats,
                        "disabled_reason": disabled,
                        **check_after_run(
                            row,
                            stats,
                            outcome,
                            verdict,
                            ended_at,
                            error,
                            run.started_at,
                            earliest=self._earliest,
                            history=self._check_history,
                        ),
                    }
                    row = self._touch(row, **changes)
        if fenced:
            raise StaleTokenError(fenced_end_error(run_id, row.name, run.token, row.current_token))
        return row

    def record_skip(
        self,
        *,
        schedule: str,
        run_id: str,
        dispatch_id: str | None,
        owner_node: str,
        owner_name: str,
        reason: str,
        at: datetime,
    ) -> None:
        """Record a dispatch that did not run (``skipped``, ``reason`` in ``error``);
        the schedule is not touched. A ``run_id`` already recorded is a no-op."""
        at = utc(at, "at")
        with self._lock:
            self._row(schedule)
            if run_id in self._runs:
                return
            self._runs[run_id] = self._new_run(
                run_id=run_id,
                schedule=schedule,
                dispatch_id=dispatch_id,
                owner_node=owner_node,
                owner_name=owner_name,
                owner_tag=None,
                token=None,
                started_at=at,
                ended_at=at,
                outcome="skipped",
                error=reason,
                duration_s=0.0,
            )

    def token_floor(self, schedule: str) -> int:
        """The highest fencing token recorded for ``schedule`` (0: none yet)."""
        with self._lock:
            return self._row(schedule).current_token or 0

    def runs(self, name: str, limit: int = 50) -> list[RunRecord]:
        """The schedule's latest ``limit`` runs (skips included), newest first."""
        with self._lock:
            self._row(name)
            found = [r for r in self._runs.values() if r.schedule == name]
        found.sort(key=lambda r: (r.started_at, r.id), reverse=True)
        return found[: max(limit, 0)]

    def running_runs(self) -> list[RunRecord]:
        """Every run still marked ``running``, oldest first."""
        with self._lock:
            found = [r for r in self._runs.values() if r.outcome == "running"]
        found.sort(key=lambda r: (r.started_at, r.id))
        return found

    def running_runs_page(self, *, after_id: int, limit: int) -> list[RunRecord]:
        """At most ``limit`` ``running`` runs with ``id > after_id``, by ``id``."""
        if limit < 1:
            raise ValueError(f"limit must be >= 1, got {limit!r}")
        page: list[RunRecord] = []
        with self._lock:
            for run in self._runs.values():  # insertion order is id order
                if run.id > after_id and run.outcome == "running":
                    page.append(run)
                    if len(page) == limit:
                        break
        return page

    def outcome_counts(self) -> dict[str, int]:
        """How many stored runs ended (or are) in each outcome."""
        with self._lock:
            return dict(Counter(r.outcome for r in self._runs.values()))

    def prune_runs(self, older_than: datetime, batch_size: int = 1000) -> int:
        """Delete finished runs that ended before ``older_than``; running runs are
        never deleted. Returns how many were deleted. (``batch_size`` is checked
        as the SQL store checks it; here the whole delete is one step.)"""
        if batch_size < 1:
            raise ValueError(f"batch_size must be at least 1, got {batch_size}")
        older_than = utc(older_than, "older_than")
        with self._lock:
            old = [
                run_id
                for run_id, r in self._runs.items()
                if r.outcome != "running" and r.ended_at is not None and r.ended_at < older_than
            ]
            for run_id in old:
                del self._runs[run_id]
        return len(old)

    def _new_run(self, **fields: Any) -> RunRecord:
        """A run record with the next row id (ids only go up, as in SQL)."""
        run = RunRecord(id=self._next_run_id, progress=None, fenced=False, **fields)
        self._next_run_id += 1
        return run
