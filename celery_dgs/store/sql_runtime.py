"""The runtime half of the SQL store: schedules the runtime API owns.

Written set-based, for lists of thousands of schedules at a time: the stored
rows of a batch are read (and locked) a chunk of names per query, new rows go
in one executemany ``INSERT`` (psycopg pipelines it on PostgreSQL, without a
round trip per row), changed rows in one executemany ``UPDATE``, and
removals in one ``UPDATE ... WHERE name IN`` per chunk, never one ORM object
per row. The
whole batch is one transaction with one new ``change_seq``, serialised with
``sync`` (PostgreSQL: its advisory lock; SQLite: one writer).
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping, Sequence
from datetime import datetime
from typing import Any, NamedTuple, cast

from sqlalchemy import Connection, Table, bindparam, func, insert, select, text, update

from ..core.spec import SPEC_FORMAT_VERSION, ScheduleSpec
from .base import (
    OWNER_RUNTIME,
    RemoveReport,
    UpsertReport,
    declared_by_name,
    remove_action,
    state_unchanged,
    upsert_action,
)
from .convert import spec_json, utc
from .engine import connection_transaction
from .models import ScheduleRow, UTCDateTime
from .sql_base import BUMP_COUNTER, PG_SYNC_LOCK_KEY, SqlStoreBase

_T = cast(Table, ScheduleRow.__table__)
#: Names per ``WHERE name IN (...)`` query (SQLite limits bound parameters).
NAMES_PER_QUERY = {"sqlite": 900, "postgresql": 10_000}

_SPEC_VALUES: dict[str, Any] = {
    "task": bindparam("b_task"), "configuration": bindparam("b_configuration"),
    "kind": bindparam("b_kind"), "spec": bindparam("b_spec"), "spec_format": SPEC_FORMAT_VERSION,
    "active": True, "declaration_error": None, "owner": OWNER_RUNTIME,
    "change_seq": bindparam("b_seq"), "updated_at": bindparam("b_now"),
}  # fmt: skip
_UPDATE_SPEC = update(_T).where(_T.c.name == bindparam("b_name")).values(**_SPEC_VALUES)
#: An upsert enables an adaptive schedule again and keeps its hint unless given.
_UPDATE_SPEC = _UPDATE_SPEC.values(disabled_reason=None, upstream_modified_at=func.coalesce(
    bindparam("b_hint", type_=UTCDateTime()), _T.c.upstream_modified_at))  # fmt: skip


class _Stored(NamedTuple):
    spec: str
    spec_format: int
    active: bool
    owner: str
    disabled_reason: str | None = None
    upstream_modified_at: datetime | None = None


def _chunks(names: list[str], size: int) -> Iterator[list[str]]:
    for i in range(0, len(names), size):
        yield names[i : i + size]


class RuntimeMethods(SqlStoreBase):
    """``upsert_runtime`` and ``remove_runtime`` of the SQL store."""

    def upsert_runtime(
        self, specs: Sequence[ScheduleSpec], now: datetime, *,
        last_modified: Mapping[str, datetime] | None = None,
    ) -> UpsertReport:  # fmt: skip
        """See :meth:`ScheduleStore.upsert_runtime
        <celery_dgs.store.base.ScheduleStore.upsert_runtime>`. An unchanged spec
        is compared by its canonical JSON text: nothing is written for it. A
        batch that writes ``analyze_after_sync_rows`` rows or more ANALYZEs the
        table afterwards (PostgreSQL)."""
        now = utc(now, "now")
        hints = {n: utc(t, "last_modified") for n, t in (last_modified or {}).items()}
        wanted = {name: (spec, spec_json(spec)) for name, spec in
                  declared_by_name(specs, {}).items()}  # fmt: skip
        report = UpsertReport()
        if not wanted:
            return report
        with connection_transaction(self.engine, write=True) as conn:
            stored = self._lock_rows(conn, sorted(wanted))
            for name in sorted(wanted):
                row = stored.get(name)
                if row is None:
                    report.inserted.append(name)
                    continue
                same = row.spec == wanted[name][1] and row.spec_format == SPEC_FORMAT_VERSION
                same = same and state_unchanged(
                    row.disabled_reason, row.upstream_modified_at, hints.get(name))
                getattr(report, upsert_action(row.owner, row.active, same)).append(name)
            if not report.changed:
                return report
            seq = int(conn.execute(BUMP_COUNTER).scalar_one())
            if report.inserted:
                conn.execute(insert(_T), [
                    {**self._insert_values(*wanted[n], now, seq),
                     "upstream_modified_at": hints.get(n)} for n in report.inserted
                ])  # fmt: skip
            changed = report.updated + report.reactivated
            if changed:
                conn.execute(_UPDATE_SPEC, [
                    {"b_name": n, "b_task": wanted[n][0].task,
                     "b_configuration": wanted[n][0].configuration, "b_kind": wanted[n][0].kind,
                     "b_spec": wanted[n][1], "b_seq": seq, "b_now": now, "b_hint": hints.get(n)}
                    for n in changed
                ])  # fmt: skip
        if len(report.inserted) + len(changed) >= self.analyze_after_sync_rows:
            self._analyze()
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
            for chunk in _chunks(report.removed, size):
                conn.execute(
                    update(_T).where(_T.c.name.in_(chunk))
                    .values(active=False, change_seq=seq, updated_at=now)
                )  # fmt: skip
        return report

    def _lock_rows(self, conn: Connection, names: list[str]) -> dict[str, _Stored]:
        """``name -> (spec, spec_format, active, owner)`` of the stored rows among
        ``names`` (sorted), locked for the transaction; first, on PostgreSQL,
        ``sync``'s advisory lock, so the two never interleave."""
        if conn.dialect.name == "postgresql":
            conn.execute(text("SELECT pg_advisory_xact_lock(:k)"), {"k": PG_SYNC_LOCK_KEY})
        size = NAMES_PER_QUERY.get(conn.dialect.name, 900)
        stored: dict[str, _Stored] = {}
        for chunk in _chunks(names, size):
            stmt = (
                select(_T.c.name, _T.c.spec, _T.c.spec_format, _T.c.active, _T.c.owner,
                       _T.c.disabled_reason, _T.c.upstream_modified_at)
                .where(_T.c.name.in_(chunk))
                .order_by(_T.c.name)
                .with_for_update(key_share=True)
            )
            for name, spec, spec_format, active, owner, disabled, hint in conn.execute(stmt):
                stored[name] = _Stored(spec, spec_format, bool(active), owner, disabled, hint)
        return stored

    @staticmethod
    def _insert_values(
        spec: ScheduleSpec, spec_text: str, now: datetime, seq: int
    ) -> dict[str, Any]:
        return {
            "name": spec.name, "task": spec.task, "configuration": spec.configuration,
            "kind": spec.kind, "spec": spec_text, "spec_format": SPEC_FORMAT_VERSION,
            "active": True, "paused": False, "registered_at": now, "change_seq": seq,
            "updated_at": now, "owner": OWNER_RUNTIME,
        }  # fmt: skip
