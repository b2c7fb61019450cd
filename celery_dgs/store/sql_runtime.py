"""The runtime half of the SQL store: schedules the runtime API owns.

Written set-based, for lists of up to millions of schedules at a time: the
stored rows of a batch are read (and locked) a chunk of names per query, new
rows and changed rows are written at the driver level (:mod:`.sql_bulk`:
``COPY`` on PostgreSQL, one ``executemany`` on SQLite), and removals in one
``UPDATE ... WHERE name IN`` per chunk, never one ORM object per row. The
whole batch is one transaction with one new ``change_seq``, serialised with
``sync`` (PostgreSQL: its advisory lock; SQLite: one writer).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from datetime import datetime, timezone
from typing import NamedTuple, cast

from sqlalchemy import Connection, Table, select, text, update

from ..core.spec import SPEC_FORMAT_VERSION, ScheduleSpec
from .convert import spec_json, utc
from .engine import connection_transaction
from .kept import NewRowTimes
from .models import ScheduleRow
from .ownership import declared_by_name, remove_action, state_unchanged, upsert_action
from .records import RemoveReport, UpsertReport
from .sql_base import BUMP_COUNTER, PG_SYNC_LOCK_KEY, SqlStoreBase, chunks
from .sql_bulk import StoredState, insert_new, pg_lock_rows, pg_read_rows, update_changed
from .sql_kept import kept_after_update

_T = cast(Table, ScheduleRow.__table__)
#: Names per ``WHERE name IN (...)`` query (SQLite limits bound parameters).
NAMES_PER_QUERY = {"sqlite": 900, "postgresql": 10_000}


class _Stored(NamedTuple):
    spec: str
    spec_format: int
    active: bool
    owner: str
    disabled_reason: str | None
    upstream_modified_at: datetime | None


def _by_name(specs: Sequence[tuple[ScheduleSpec, str]]) -> dict[str, tuple[ScheduleSpec, str]]:
    """The batch by name; a name given twice with different fields raises
    ScheduleConfigError naming the first field that differs (as ``sync``)."""
    wanted: dict[str, tuple[ScheduleSpec, str]] = {}
    for spec, spec_text in specs:
        name = spec.name
        first = wanted.get(name)
        if first is None:
            wanted[name] = (spec, spec_text)
        elif first[1] != spec_text:
            declared_by_name([first[0], spec], {})  # raises, naming the field
    return wanted


class RuntimeMethods(SqlStoreBase):
    """``upsert_runtime`` and ``remove_runtime`` of the SQL store."""

    def upsert_runtime(
        self,
        specs: Sequence[ScheduleSpec],
        now: datetime,
        *,
        last_modified: Mapping[str, datetime] | None = None,
    ) -> UpsertReport:
        """See :meth:`ScheduleStore.upsert_runtime
        <celery_dgs.store.base.ScheduleStore.upsert_runtime>`: :meth:`upsert_runtime_texts`
        of the specs and their ``spec_json``."""
        return self.upsert_runtime_texts(
            [(spec, spec_json(spec)) for spec in specs], now, last_modified=last_modified
        )

    def upsert_runtime_texts(
        self,
        specs: Sequence[tuple[ScheduleSpec, str]],
        now: datetime,
        *,
        last_modified: Mapping[str, datetime] | None = None,
    ) -> UpsertReport:
        """See :meth:`ScheduleStore.upsert_runtime_texts
        <celery_dgs.store.base.ScheduleStore.upsert_runtime_texts>`. An unchanged
        spec is compared by its canonical JSON text: nothing is written for it.
        The rows are read, locked and written at the driver level
        (:mod:`.sql_bulk`). A batch that writes ``analyze_after_sync_rows`` rows
        or more ANALYZEs the table afterwards (PostgreSQL) and folds the
        condition tally."""
        now = utc(now, "now")
        hints = {n: utc(t, "last_modified") for n, t in (last_modified or {}).items()}
        wanted = _by_name(specs)
        report = UpsertReport()
        if not wanted:
            return report
        names = sorted(wanted)
        with connection_transaction(self.engine, write=True) as conn:
            if conn.dialect.name == "postgresql":
                stored: Mapping[str, StoredState] = pg_read_rows(conn, names)
            else:
                stored = self._lock_rows(conn, names)
            for name in names:
                row = stored.get(name)
                if row is None:
                    report.inserted.append(name)
                    continue
                spec_text, spec_format, active, owner, disabled, stored_hint = row
                same = spec_text == wanted[name][1] and spec_format == SPEC_FORMAT_VERSION
                same = same and state_unchanged(disabled, stored_hint, hints.get(name))
                getattr(report, upsert_action(owner, active, same)).append(name)
            if not report.changed:
                return report
            changed = report.updated + report.reactivated
            if changed and conn.dialect.name == "postgresql":
                pg_lock_rows(conn, sorted(changed))
            seq = int(conn.execute(BUMP_COUNTER).scalar_one())
            if report.inserted:
                new = [(n, *wanted[n], hints.get(n)) for n in report.inserted]
                insert_new(conn, new, now, seq, NewRowTimes(now, self.retry_ladder))
            if changed:
                rows = [(n, *wanted[n], hints.get(n)) for n in changed]
                kept = kept_after_update(
                    conn,
                    [(n, spec, hint) for n, spec, _, hint in rows],
                    now,
                    retry_ladder=self.retry_ladder,
                    specs=self._spec_cache,
                )
                update_changed(conn, rows, now, seq, kept)
        if len(report.inserted) + len(changed) >= self.analyze_after_sync_rows:
            self._analyze()
            # so that a count does not read this batch's steps one by one
            # until beat's next fold (none runs yet, maybe): as of the wall clock
            self.fold_condition_tally(datetime.now(timezone.utc))
        return report

    def remove_runtime(self, names: Sequence[str], now: datetime) -> RemoveReport:
        """See :meth:`ScheduleStore.remove_runtime
        <celery_dgs.store.base.ScheduleStore.remove_runtime>`."""
        now = utc(now, "now")
        unique = sorted(set(names))
        report = RemoveReport()
        if not unique:
            return report
        with connection_transaction(self.engine, write=True) as conn:
            stored = self._lock_rows(conn, unique)
            for name in unique:
                row = stored.get(name)
                owner, active = (row.owner, row.active) if row is not None else (None, False)
                getattr(report, remove_action(owner, active)).append(name)
            if not report.removed:
                return report
            seq = int(conn.execute(BUMP_COUNTER).scalar_one())
            size = NAMES_PER_QUERY.get(conn.dialect.name, 900)
            for chunk in chunks(report.removed, size):
                conn.execute(
                    update(_T)
                    .where(_T.c.name.in_(chunk))
                    .values(active=False, change_seq=seq, updated_at=now)
                )
        return report

    def _lock_rows(self, conn: Connection, names: list[str]) -> dict[str, _Stored]:
        """``name -> (spec, spec_format, active, owner, disabled_reason,
        upstream_modified_at)`` of the stored rows among
        ``names`` (sorted), locked for the transaction; first, on PostgreSQL,
        ``sync``'s advisory lock, so the two never interleave."""
        if conn.dialect.name == "postgresql":
            conn.execute(text("SELECT pg_advisory_xact_lock(:k)"), {"k": PG_SYNC_LOCK_KEY})
        size = NAMES_PER_QUERY.get(conn.dialect.name, 900)
        stored: dict[str, _Stored] = {}
        for chunk in chunks(names, size):
            stmt = (
                select(
                    _T.c.name,
                    _T.c.spec,
                    _T.c.spec_format,
                    _T.c.active,
                    _T.c.owner,
                    _T.c.disabled_reason,
                    _T.c.upstream_modified_at,
                )
                .where(_T.c.name.in_(chunk))
                .order_by(_T.c.name)
                .with_for_update(key_share=True)
            )
            for name, spec, spec_format, active, owner, disabled, hint in conn.execute(stmt):
                stored[name] = _Stored(spec, spec_format, bool(active), owner, disabled, hint)
        return stored
