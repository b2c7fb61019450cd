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

import bisect
import dataclasses
from collections.abc import Iterator, Mapping, Sequence
from datetime import datetime, timedelta

from ..core.spec import ScheduleSpec
from ..core.stats import ScheduleStats
from .convert import spec_json, utc
from .kept_ladder import LadderAdoption, ladder_fingerprint
from .memory_checks import MemoryCheckMethods
from .memory_runs import MemoryRunMethods
from .memory_status import MemoryStatusMethods
from .memory_window import MemoryWindowMethods
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
    StoredSchedule,
    SyncReport,
    UpsertReport,
)


class MemoryScheduleStore(
    MemoryCheckMethods, MemoryRunMethods, MemoryStatusMethods, MemoryWindowMethods
):
    """Schedules, statistics and run history in this process's memory.

    ``clock`` gives ``updated_at`` for writes that take no time argument (as
    the SQL store's). Not durable: everything is gone with the object. The
    schedule methods are here; the run and check methods are
    :class:`~celery_dgs.store.memory_runs.MemoryRunMethods` and
    :class:`~celery_dgs.store.memory_checks.MemoryCheckMethods`, on the state
    of :class:`~celery_dgs.store.memory_base.MemoryStoreBase`.
    """

    def sync(
        self,
        specs: Sequence[ScheduleSpec],
        now: datetime,
        *,
        invalid: Mapping[str, str] | None = None,
        dry_run: bool = False,
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
            if dry_run or not (report.changed or marked):
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

    def adopt_retry_ladder(self, ladder: tuple[timedelta, ...]) -> LadderAdoption:
        """See :meth:`ScheduleStore.adopt_retry_ladder
        <celery_dgs.store.base.ScheduleStore.adopt_retry_ladder>`: the
        fingerprint lives as long as the store; the failing rows are stored
        again with ``ladder`` (kept at their ``updated_at``), one new
        ``change_seq`` for them all."""
        fingerprint = ladder_fingerprint(ladder)
        with self._lock:
            self.retry_ladder = ladder
            previous = self._ladder_fingerprint
            if previous == fingerprint:
                return LadderAdoption(ladder, previous, None)
            rows = self._rows
            failing = [
                rows[n] for n in sorted(rows) if rows[n].active and rows[n].stats.failure_count
            ]
            if failing:
                seq = self._next_seq()
                for row in failing:
                    self._put(dataclasses.replace(row, change_seq=seq))
            self._ladder_fingerprint = fingerprint
            return LadderAdoption(ladder, previous, len(failing))

    def stored_ladder_fingerprint(self) -> str | None:
        """The fingerprint of the ladder last adopted (a
        :class:`~celery_dgs.store.kept_ladder.KeptLadderReader`); ``None``: none."""
        with self._lock:
            return self._ladder_fingerprint

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

    def change_cursor(self) -> int:
        """The last ``change_seq`` handed out."""
        with self._lock:
            return self._seq

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
        self,
        include_inactive: bool = False,
        *,
        owner: str | None = None,
        after: str | None = None,
        limit: int | None = None,
    ) -> list[StoredSchedule]:
        """Schedules ordered by name; inactive ones only with ``include_inactive``;
        only ``owner``'s when given; those named after ``after``, at most ``limit``."""
        with self._lock:
            rows = self._rows
            found = [
                rows[n]
                for n in sorted(rows)
                if (after is None or n > after)
                and (include_inactive or rows[n].active)
                and owner in (None, rows[n].owner)
                and rows[n].kind != "check"
            ]
        return found if limit is None else found[:limit]

    def names_near(self, name: str, limit: int) -> list[str]:
        """At most ``limit`` stored names on each side of ``name``."""
        with self._lock:
            names = sorted(self._rows)
        at = bisect.bisect_left(names, name)
        return names[max(0, at - limit) : at + limit]

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
