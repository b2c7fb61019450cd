"""The deferred-check methods of the in-memory store (the SQL store's
:mod:`~celery_dgs.store.sql_checks`, on the same rules)."""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence
from datetime import datetime
from typing import Any

from ..core.checks import (
    CHECK_CANCELLED,
    ON_EXISTS_MOVE,
    CheckAgain,
    CheckEnded,
    CheckState,
    check_end,
)
from ..core.spec import CheckSpec
from ..core.stats import ScheduleStats
from ..errors import ScheduleConfigError
from .check_types import (
    OWNER_CHECK,
    CheckAddReport,
    CheckHistoryRecord,
    CheckSummary,
    NewCheck,
    check_on_exists,
    history_record,
)
from .convert import spec_json, utc
from .memory_base import MemoryStoreBase
from .records import StoredSchedule


def check_after_run(
    row: StoredSchedule,
    stats: ScheduleStats,
    outcome: str,
    verdict: object,
    ended_at: datetime,
    error: str | None,
    last_check_at: datetime,
    *,
    earliest: dict[str, datetime],
    history: list[CheckHistoryRecord],
) -> dict[str, Any]:
    """The row changes a check's run end makes (``celery_dgs.core.checks.check_end``):
    a next check is noted in ``earliest``, an ended check's record appended to
    ``history`` (the in-memory store's own state, its lock held)."""
    spec = row.spec
    if row.kind != "check" or not row.active or not isinstance(spec, CheckSpec):
        return {}
    state = CheckState(row.first_check_at or ended_at, row.check_count or 0)
    step = check_end(spec, state, stats, outcome, verdict, ended_at, error)
    if isinstance(step, CheckAgain):
        at = step.next_check_at
        earliest[row.name] = min(earliest.get(row.name, at), at)
        return {
            "check_count": step.check_count,
            "stats": dataclasses.replace(stats, next_target_at=at),
        }
    if isinstance(step, CheckEnded):
        history.append(
            history_record(
                spec,
                step,
                failure_count=stats.failure_count,
                added_at=stats.registered_at,
                first_check_at=row.first_check_at,
                last_check_at=last_check_at,
                ended_at=ended_at,
            )
        )
        return {"check_count": step.check_count, "active": False}
    return {}


def checks_by_name(checks: Sequence[NewCheck]) -> dict[str, tuple[NewCheck, str]]:
    """``checks`` by name, each with its spec's canonical JSON text, its time in
    UTC. A name given twice with different fields raises ScheduleConfigError; a
    spec that is not a ``CheckSpec``, ``TypeError``."""
    wanted: dict[str, tuple[NewCheck, str]] = {}
    for check in checks:
        if not isinstance(check.spec, CheckSpec):
            raise TypeError(f"add_checks takes CheckSpec checks, got {check.spec!r}")
        name, text = check.spec.name, spec_json(check.spec)
        at = utc(check.at, "at")
        first = wanted.get(name)
        if first is not None and (first[1] != text or first[0].at != at):
            raise ScheduleConfigError(name, "key", "given twice with different fields")
        wanted[name] = (NewCheck(check.spec, at), text)
    return wanted


class MemoryCheckMethods(MemoryStoreBase):
    """Deferred-check methods of :class:`~celery_dgs.store.memory.MemoryScheduleStore`."""

    def add_checks(
        self, checks: Sequence[NewCheck], now: datetime, *, on_exists: str = "keep"
    ) -> CheckAddReport:
        check_on_exists(on_exists)
        now = utc(now, "now")
        wanted = checks_by_name(checks)
        report = CheckAddReport()
        with self._lock:
            writes: list[tuple[str, NewCheck, str, StoredSchedule | None]] = []
            for name, (check, text) in wanted.items():
                row = self._rows.get(name)
                if row is not None and row.kind != "check":
                    raise ScheduleConfigError(
                        name, "key", f"is stored as a {row.kind} schedule, not a deferred check"
                    )
                if row is None or not row.active:
                    report.added.append(name)
                    writes.append(("add", check, text, row))
                elif on_exists == ON_EXISTS_MOVE:
                    report.moved.append(name)
                    writes.append(("move", check, text, row))
                else:
                    report.kept.append(name)
            if not writes:
                return report
            seq = self._next_seq()
            for action, check, text, row in writes:
                spec, error = self._parse(check.spec, text)
                name, at = check.spec.name, check.at
                if action == "move" and row is not None:
                    self._earliest[name] = min(self._earliest.get(name, at), at)
                    self._put(
                        dataclasses.replace(
                            row,
                            spec=spec,
                            spec_error=error,
                            change_seq=seq,
                            updated_at=now,
                            stats=dataclasses.replace(row.stats, next_target_at=at),
                        )
                    )
                    continue
                self._earliest[name] = at
                old = row.stats if row is not None else ScheduleStats()
                stats = dataclasses.replace(
                    old,
                    registered_at=now,
                    next_target_at=at,
                    failure_count=None,
                    last_good_start_at=None,
                    last_good_end_at=None,
                )
                self._put(
                    StoredSchedule(
                        name=name,
                        task=check.spec.task,
                        configuration=check.spec.configuration,
                        kind="check",
                        spec=spec,
                        spec_error=error,
                        stats=stats,
                        active=True,
                        paused=False,
                        current_token=row.current_token if row else None,
                        run_requested_at=None,
                        change_seq=seq,
                        updated_at=now,
                        owner=OWNER_CHECK,
                        first_check_at=at,
                        check_count=0,
                    )
                )
        return report

    def cancel_checks(self, names: Sequence[str], now: datetime) -> list[str]:
        now = utc(now, "now")
        with self._lock:
            pending = [
                self._rows[n]
                for n in sorted(set(names))
                if n in self._rows and self._rows[n].kind == "check" and self._rows[n].active
            ]
            if not pending:
                return []
            seq = self._next_seq()
            for row in pending:
                if isinstance(row.spec, CheckSpec):
                    ended = CheckEnded(CHECK_CANCELLED, "cancelled", row.check_count or 0)
                    self._check_history.append(
                        history_record(
                            row.spec,
                            ended,
                            failure_count=row.stats.failure_count,
                            added_at=row.stats.registered_at,
                            first_check_at=row.first_check_at,
                            last_check_at=row.stats.last_start_at,
                            ended_at=now,
                        )
                    )
                self._put(dataclasses.replace(row, active=False, change_seq=seq, updated_at=now))
            return [row.name for row in pending]

    def _in_window(self, row: StoredSchedule, until: datetime | None) -> bool:
        """Whether ``changes_since(check_until=until)`` returns the changed ``row``."""
        if until is None or row.kind != "check" or not row.active:
            return True
        at = row.stats.next_target_at
        earliest = self._earliest.get(row.name)
        return (at is not None and at <= until) or (earliest is not None and earliest <= until)

    def _pending(self) -> list[StoredSchedule]:
        return [r for r in self._rows.values() if r.kind == "check" and r.active]

    @staticmethod
    def _due_key(row: StoredSchedule) -> tuple[datetime, str]:
        at = row.stats.next_target_at
        assert at is not None
        return at, row.name

    def due_checks(
        self, after: tuple[datetime, str] | None, until: datetime, limit: int
    ) -> list[StoredSchedule]:
        until = utc(until, "until")
        with self._lock:
            rows = [
                r
                for r in self._pending()
                if r.stats.next_target_at is not None
                and r.stats.next_target_at <= until
                and (after is None or self._due_key(r) > (utc(after[0], "after"), after[1]))
            ]
        return sorted(rows, key=self._due_key)[: max(limit, 0)]

    def pending_checks(
        self, *, task: str | None = None, due_before: datetime | None = None, limit: int = 50
    ) -> list[StoredSchedule]:
        with self._lock:
            rows = [
                r
                for r in self._pending()
                if r.stats.next_target_at is not None
                and task in (None, r.task)
                and (due_before is None or r.stats.next_target_at < due_before)
            ]
        return sorted(rows, key=self._due_key)[:limit]

    def check_summary(self, now: datetime) -> CheckSummary:
        now = utc(now, "now")
        summary = CheckSummary()
        with self._lock:
            for row in sorted(self._pending(), key=lambda r: r.task):
                task, at = row.task, row.stats.next_target_at
                summary.pending[task] = summary.pending.get(task, 0) + 1
                if at is None:
                    continue
                if at < now:
                    summary.overdue[task] = summary.overdue.get(task, 0) + 1
                oldest = summary.oldest_due.get(task)
                summary.oldest_due[task] = at if oldest is None else min(oldest, at)
        return summary

    def check_history(
        self, *, name: str | None = None, task: str | None = None, limit: int = 50
    ) -> list[CheckHistoryRecord]:
        with self._lock:
            found = [
                (i, r)
                for i, r in enumerate(self._check_history)
                if name in (None, r.name) and task in (None, r.task)
            ]
        found.sort(key=lambda item: (item[1].ended_at, item[0]), reverse=True)
        return [r for _, r in found[:limit]]

    def prune_checks(self, older_than: datetime, batch_size: int = 1000) -> int:
        if batch_size < 1:
            raise ValueError(f"batch_size must be at least 1, got {batch_size}")
        older_than = utc(older_than, "older_than")
        with self._lock:
            kept = [r for r in self._check_history if r.ended_at >= older_than]
            removed = len(self._check_history) - len(kept)
            self._check_history[:] = kept
            referred = {run.schedule for run in self._runs.values()}
            for name in [
                n
                for n, r in self._rows.items()
                if r.kind == "check"
                and not r.active
                and r.updated_at < older_than
                and n not in referred
            ]:
                del self._rows[name]
                self._earliest.pop(name, None)
                self._kept.pop(name, None)
        return removed
