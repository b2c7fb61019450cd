"""An in-memory :class:`~celery_dgs.store.base.ScheduleStore`.

A reference backend for tests and benchmarks (the simulator keeps its own
per-schedule statistics and needs no store): it keeps the
contract of :class:`~celery_dgs.store.sql.SqlScheduleStore` (the same reports,
change cursor, fencing, errors and orderings; ``tests/store`` runs one suite
against both), but nothing is durable and it lives in one process.

* Every method holds one lock for its whole call (a worker's heartbeat records
  from a thread), so each call is atomic, like one SQL transaction.
* Specs are stored as the SQL store reads them back: the canonical JSON of
  the declared spec, parsed (through a :class:`~.loader.SpecCache`, so a million
  specs of one shape cost little), so a schedule reads the same on every backend.
* Values returned are the store's own immutable records, shared between
  readers; a spec's ``kwargs`` dict must not be changed by a reader.
* ``changes_since`` costs O(changes), not O(schedules): rows are kept in
  change order (the last changed last) and read from the end.
"""

from __future__ import annotations

import dataclasses
import threading
from collections import Counter, OrderedDict
from collections.abc import Iterator, Mapping, Sequence
from datetime import datetime, timedelta
from typing import Any

from ..core.clock import Clock, SystemClock
from ..core.run_end import disabled_after, stats_after
from ..core.spec import ScheduleSpec
from ..core.stats import DEFAULT_EWMA_ALPHA, ScheduleStats, record_start
from ..errors import StaleTokenError, UnknownRunError, UnknownScheduleError
from .base import ScheduleStore
from .check_types import CheckHistoryRecord
from .convert import spec_json, utc
from .loader import SpecCache
from .memory_checks import MemoryCheckMethods
from .ownership import (
    SyncRowState,
    declared_by_name,
    plan_sync,
    remove_action,
    state_unchanged,
    upsert_action,
)
from .records import (
    OWNER_DECLARED,
    OWNER_RUNTIME,
    RemoveReport,
    RunRecord,
    StoredSchedule,
    SyncReport,
    UpsertReport,
)
from .run_rules import (
    check_eventful,
    check_run_end,
    end_fenced,
    fenced_end_error,
    run_duration_s,
    stale_start,
)


class MemoryScheduleStore(MemoryCheckMethods, ScheduleStore):
    """Schedules, statistics and run history in this process's memory.

    ``clock`` gives ``updated_at`` for writes that take no time argument (as
    the SQL store's). Not durable: everything is gone with the object.
    """

    def __init__(self, *, clock: Clock | None = None) -> None:
        self._clock: Clock = clock or SystemClock()
        self._lock = threading.RLock()
        self._specs = SpecCache()
        #: name -> row, in change order: the row changed last is last.
        self._rows: OrderedDict[str, StoredSchedule] = OrderedDict()
        self._seq = 0  # the last change_seq handed out
        self._runs: dict[str, RunRecord] = {}  # by run_id, in id (insertion) order
        self._next_run_id = 1
        self._check_history: list[CheckHistoryRecord] = []
        self._earliest: dict[str, datetime] = {}

    # -- schedules ----------------------------------------------------------------

    def upgrade(self) -> None:
        """Nothing to migrate."""

    def sync(
        self,
        specs: Sequence[ScheduleSpec],
        now: datetime,
        *,
        invalid: Mapping[str, str] | None = None,
    ) -> SyncReport:
        """Make the stored schedules match ``specs``, as
        :meth:`SqlScheduleStore.sync <celery_dgs.store.sql.SqlScheduleStore.sync>`
        does: one change (one ``change_seq``) for every row it touches; a stored,
        active schedule named in ``invalid`` keeps its spec, with the error in
        its ``declaration_error``."""
        now = utc(now, "now")
        invalid = dict(invalid or {})
        declared = declared_by_name(specs, invalid)
        with self._lock:
            rows = self._rows
            texts = {name: spec_json(spec) for name, spec in declared.items()}
            states = {
                name: SyncRowState(
                    owner=row.owner,
                    active=row.active,
                    declaration_error=row.declaration_error,
                    same_spec=None
                    if name not in declared
                    else (row.spec is not None and spec_json(row.spec) == texts[name]),
                )
                for name, row in rows.items()
                if name in declared or (row.active and row.owner == OWNER_DECLARED)
            }
            report, marked = plan_sync(list(declared), states, invalid)
            if not (report.changed or marked):
                return report
            seq = self._next_seq()
            for name in marked:
                self._put(
                    dataclasses.replace(
                        rows[name], declaration_error=invalid[name], change_seq=seq, updated_at=now
                    )
                )
            for name in report.inserted:
                self._put(self._new_row(declared[name], now, seq))
            for name in report.updated + report.reactivated:
                stored, error = self._parse(declared[name], texts[name])
                self._put(
                    dataclasses.replace(
                        rows[name],
                        task=declared[name].task,
                        configuration=declared[name].configuration,
                        kind=declared[name].kind,
                        spec=stored,
                        spec_error=error,
                        active=True,
                        declaration_error=None,
                        owner=OWNER_DECLARED,
                        change_seq=seq,
                        updated_at=now,
                    )
                )
            for name in report.deactivated:
                self._put(
                    dataclasses.replace(
                        rows[name],
                        active=False,
                        declaration_error=None,
                        change_seq=seq,
                        updated_at=now,
                    )
                )
        return report

    def insert_if_missing(self, spec: ScheduleSpec, now: datetime) -> bool:
        """Store ``spec`` as :meth:`sync` inserts a new name, unless the name is
        stored (active or not: that row is left as it is). True if inserted."""
        now = utc(now, "now")
        with self._lock:
            if spec.name in self._rows:
                return False
            self._put(self._new_row(spec, now, self._next_seq()))
        return True

    def upsert_runtime(
        self,
        specs: Sequence[ScheduleSpec],
        now: datetime,
        *,
        last_modified: Mapping[str, datetime] | None = None,
    ) -> UpsertReport:
        """Store ``specs`` as runtime schedules, as
        :meth:`SqlScheduleStore.upsert_runtime
        <celery_dgs.store.sql.SqlScheduleStore.upsert_runtime>` does (one
        ``change_seq`` for the batch; an unchanged spec writes nothing)."""
        now = utc(now, "now")
        hints = {n: utc(t, "last_modified") for n, t in (last_modified or {}).items()}
        wanted = declared_by_name(specs, {})
        report = UpsertReport()
        with self._lock:
            texts: dict[str, str] = {}
            for name in sorted(wanted):
                row = self._rows.get(name)
                if row is None:
                    report.inserted.append(name)
                    continue
                text = texts[name] = spec_json(wanted[name])
                same = (
                    row.spec is not None
                    and spec_json(row.spec) == text
                    and state_unchanged(
                        row.disabled_reason, row.stats.upstream_modified_at, hints.get(name)
                    )
                )
                getattr(report, upsert_action(row.owner, row.active, same)).append(name)
            if not report.changed:
                return report
            seq = self._next_seq()
            for name in report.inserted:
                row = self._new_row(wanted[name], now, seq, owner=OWNER_RUNTIME)
                self._put(
                    dataclasses.replace(
                        row,
                        stats=dataclasses.replace(row.stats, upstream_modified_at=hints.get(name)),
                    )
                )
            for name in report.updated + report.reactivated:
                spec, old = wanted[name], self._rows[name]
                stored, error = self._parse(spec, texts[name])
                hint = hints.get(name, old.stats.upstream_modified_at)
                self._put(
                    dataclasses.replace(
                        old,
                        task=spec.task,
                        configuration=spec.configuration,
                        kind=spec.kind,
                        spec=stored,
                        spec_error=error,
                        active=True,
                        declaration_error=None,
                        owner=OWNER_RUNTIME,
                        change_seq=seq,
                        updated_at=now,
                        disabled_reason=None,
                        stats=dataclasses.replace(old.stats, upstream_modified_at=hint),
                    )
                )
        return report

    def remove_runtime(self, names: Sequence[str], now: datetime) -> RemoveReport:
        """Deactivate the named runtime schedules, as
        :meth:`SqlScheduleStore.remove_runtime
        <celery_dgs.store.sql.SqlScheduleStore.remove_runtime>` does."""
        now = utc(now, "now")
        report = RemoveReport()
        with self._lock:
            for name in sorted(set(names)):
                row = self._rows.get(name)
                owner, active = (row.owner, row.active) if row is not None else (None, False)
                getattr(report, remove_action(owner, active)).append(name)
            if not report.removed:
                return report
            seq = self._next_seq()
            for name in report.removed:
                self._put(
                    dataclasses.replace(
                        self._rows[name], active=False, change_seq=seq, updated_at=now
                    )
                )
        return report

    def load_active(self) -> tuple[list[StoredSchedule], int]:
        """All active schedules by name, and the cursor for :meth:`changes_since`."""
        with self._lock:
            rows = self._rows
            return [
                rows[n] for n in sorted(rows) if rows[n].active and rows[n].kind != "check"
            ], self._seq

    def iter_active(self) -> tuple[int, Iterator[StoredSchedule]]:
        """:meth:`load_active` as the cursor and an iterator (of a snapshot)."""
        rows, cursor = self.load_active()
        return cursor, iter(rows)

    def changes_since(
        self, cursor: int, *, check_until: datetime | None = None
    ) -> tuple[list[StoredSchedule], int]:
        """Every schedule, active or not, changed after ``cursor`` (by
        ``change_seq``, then name), and the cursor to pass next time. A cursor
        ahead of the store's (another store's cursor) returns every row."""
        with self._lock:
            if cursor > self._seq:
                cursor = 0
            changed: list[StoredSchedule] = []
            for name in reversed(self._rows):
                row = self._rows[name]
                if row.change_seq <= cursor:
                    break
                if self._in_window(row, check_until):
                    changed.append(row)
            changed.sort(key=lambda r: (r.change_seq, r.name))
            return changed, self._seq

    def get(self, name: str) -> StoredSchedule:
        """The named schedule (active or not); ``UnknownScheduleError`` naming it if none."""
        with self._lock:
            return self._row(name)

    def list_schedules(
        self, include_inactive: bool = False, *, owner: str | None = None
    ) -> list[StoredSchedule]:
        """Schedules ordered by name; inactive ones only with ``include_inactive``;
        only ``owner``'s when given."""
        with self._lock:
            rows = self._rows
            return [
                rows[n]
                for n in sorted(rows)
                if (include_inactive or rows[n].active)
                and owner in (None, rows[n].owner)
                and rows[n].kind != "check"
            ]

    def set_paused(self, name: str, paused: bool) -> bool:
        """Pause (``True``) or resume a schedule. Returns True if the flag changed.
        Resuming also enables a disabled adaptive schedule (True then too)."""
        with self._lock:
            row = self._row(name)
            if row.paused == paused and (paused or row.disabled_reason is None):
                return False
            if paused:
                self._touch(row, paused=True)
            else:
                self._touch(row, paused=False, disabled_reason=None)
            return True

    def request_run(self, name: str, now: datetime, *, priority: int | None = None) -> None:
        """Ask beat for an ad-hoc run; a request already pending keeps its time."""
        now = utc(now, "now")
        with self._lock:
            row = self._row(name)
            if row.run_requested_at is None or row.run_requested_priority != priority:
                self._touch(
                    row,
                    run_requested_at=row.run_requested_at or now,
                    run_requested_priority=priority,
                )

    def clear_run_request(self, name: str, *, requested_at: datetime | None = None) -> None:
        """Consume the pending run request. With ``requested_at`` (the value beat
        saw), a newer request made meanwhile is left in place."""
        with self._lock:
            row = self._row(name)
            if row.run_requested_at is None:
                return
            if requested_at is not None and row.run_requested_at != utc(requested_at, "at"):
                return
            self._touch(row, run_requested_at=None, run_requested_priority=None)

    # -- runs -----------------------------------------------------------------------

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
    ) -> StoredSchedule:
        """Record how the run ended and update the schedule's statistics, fenced
        and idempotent exactly as the SQL store's (see
        :meth:`ScheduleStore.record_run_end`)."""
        check_run_end(outcome, progress, duration_s)
        check_eventful(eventful)
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
                    )
                    disabled = disabled_after(row.spec, outcome, stats, row.disabled_reason)
                    changes = {
                        "stats": stats,
                        "disabled_reason": disabled,
                        **self._check_after_run(
                            row, stats, outcome, verdict, ended_at, error, run.started_at
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

    # -- helpers (call with the lock held) -------------------------------------------

    def _next_seq(self) -> int:
        self._seq += 1
        return self._seq

    def _row(self, name: str) -> StoredSchedule:
        row = self._rows.get(name)
        if row is None:
            raise UnknownScheduleError(f"no schedule named {name!r} in the store")
        return row

    def _put(self, row: StoredSchedule) -> None:
        """Store ``row`` as the last changed one (``changes_since`` reads from the end)."""
        self._rows[row.name] = row
        self._rows.move_to_end(row.name)

    def _touch(self, row: StoredSchedule, **changes: Any) -> StoredSchedule:
        """``row`` with ``changes``, a new ``change_seq`` and ``updated_at`` now, stored."""
        changes.update(change_seq=self._next_seq(), updated_at=self._clock.now())
        new = dataclasses.replace(row, **changes)
        self._put(new)
        return new

    def _parse(self, spec: ScheduleSpec, text: str) -> tuple[ScheduleSpec | None, str | None]:
        """The spec as a store reads it back from its canonical JSON ``text``."""
        return self._specs.parse(text, spec.task, spec.configuration)

    def _new_row(
        self, spec: ScheduleSpec, now: datetime, seq: int, *, owner: str = OWNER_DECLARED
    ) -> StoredSchedule:
        stored, error = self._parse(spec, spec_json(spec))
        return StoredSchedule(
            name=spec.name,
            task=spec.task,
            configuration=spec.configuration,
            kind=spec.kind,
            spec=stored,
            spec_error=error,
            stats=ScheduleStats(registered_at=now),
            active=True,
            paused=False,
            current_token=None,
            run_requested_at=None,
            change_seq=seq,
            updated_at=now,
            owner=owner,
        )

    def _new_run(self, **fields: Any) -> RunRecord:
        """A run record with the next row id (ids only go up, as in SQL)."""
        run = RunRecord(id=self._next_run_id, progress=None, fenced=False, **fields)
        self._next_run_id += 1
        return run
