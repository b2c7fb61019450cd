"""The deferred-check half of the SQL store (:mod:`celery_dgs.core.checks`).

A check is a ``dgs_schedules`` row of kind ``check`` (owner ``check``): beat,
leases, runs and the reaper treat it as any schedule. Adds are set-based (the
new rows in one insert: a ``COPY`` on PostgreSQL; one ``executemany`` for
updates; a chunk of names per lookup: one array parameter on PostgreSQL), in one
transaction with one new ``change_seq``, serialised with other check writers
(PostgreSQL: an advisory lock; SQLite: one writer). An ended check's row is
kept inactive (its runs refer to it) beside its ``dgs_check_history`` record,
until :meth:`CheckMethods.prune_checks` deletes both.
"""

from __future__ import annotations

from collections.abc import Sequence
from datetime import datetime, timezone
from typing import Any, cast

from sqlalchemy import (
    Connection,
    Select,
    Table,
    and_,
    bindparam,
    case,
    delete,
    exists,
    func,
    insert,
    or_,
    select,
    text,
    update,
)

from ..core.checks import (
    CHECK_CANCELLED,
    ON_EXISTS_MOVE,
    CheckEnded,
)
from ..core.spec import SPEC_FORMAT_VERSION, CheckSpec
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
from .convert import parse_spec, spec_json, utc
from .engine import connection_transaction
from .loader import SCHEDULE_COLUMNS, ValueMemo, stored_schedule_from_values
from .models import CheckHistoryRow, RunRow, ScheduleRow, utc_from_db
from .records import StoredSchedule
from .sql_base import BUMP_COUNTER, SqlStoreBase, chunks
from .sql_check_rows import copy_text, history_row_record, history_values

_T = cast(Table, ScheduleRow.__table__)
_H = cast(Table, CheckHistoryRow.__table__)
#: pg_advisory_xact_lock key held while checks are added or cancelled ("dgschk").
PG_CHECK_LOCK_KEY = 0x64677363686B
#: Names per ``WHERE name IN (...)`` query (SQLite limits bound parameters).
_NAMES_PER_QUERY = {"sqlite": 900, "postgresql": 10_000}
#: Names per ``name = ANY(%s)`` array parameter (PostgreSQL).
PG_NAMES_PER_QUERY = 100_000
_COLUMNS = [_T.c[name] for name in SCHEDULE_COLUMNS]
_PENDING = text("kind = 'check' AND active")  # as the partial index states it: the planner uses it
#: The new rows' columns, in the order :meth:`CheckMethods._insert_new` copies them.
NEW_CHECK_COLUMNS = (
    "name",
    "task",
    "configuration",
    "kind",
    "spec",
    "spec_format",
    "active",
    "paused",
    "registered_at",
    "updated_at",
    "owner",
    "next_target_at",
    "first_check_at",
    "earliest_check_at",
    "check_count",
    "change_seq",
)
_PG_COPY_NEW = f"COPY dgs_schedules ({', '.join(NEW_CHECK_COLUMNS)}) FROM STDIN"
_PG_STORED_CHECKS = (
    "SELECT name, kind, active, earliest_check_at FROM dgs_schedules "
    "WHERE name = ANY(%s) ORDER BY name FOR UPDATE"
)


#: As the partial index ``ix_dgs_schedules_checks_ended`` states it (literal
#: values: the planners then use it).
_ENDED_CHECK = text("kind = 'check' AND NOT active")


def ended_checks_statement(older_than: datetime, limit: int) -> Select[Any]:
    """The names of up to ``limit`` ended checks last written before
    ``older_than`` that no run refers to: a range of
    ``ix_dgs_schedules_checks_ended``, not a pass over the fleet."""
    return (
        select(_T.c.name)
        .where(
            _ENDED_CHECK,
            _T.c.updated_at < older_than,
            ~exists().where(RunRow.schedule == _T.c.name),
        )
        .order_by(_T.c.updated_at, _T.c.name)
        .limit(limit)
    )


class CheckMethods(SqlStoreBase):
    """The deferred-check methods of :class:`~celery_dgs.store.sql.SqlScheduleStore`."""

    def add_checks(
        self, checks: Sequence[NewCheck], now: datetime, *, on_exists: str = "keep"
    ) -> CheckAddReport:
        check_on_exists(on_exists)
        now = utc(now, "now")
        wanted: dict[str, tuple[NewCheck, str]] = {}
        for check in checks:
            spec = check.spec
            if not isinstance(spec, CheckSpec):
                raise TypeError(f"add_checks takes CheckSpec checks, got {spec!r}")
            name = spec.name
            spec_text = check.spec_text or spec_json(spec)
            at = check.at
            if at.tzinfo is not timezone.utc:
                at = utc(at, "at")
                check = NewCheck(spec, at, spec_text)
            first = wanted.get(name)
            if first is not None and (first[1] != spec_text or first[0].at != at):
                raise ScheduleConfigError(name, "key", "given twice with different fields")
            wanted[name] = (check, spec_text)
        report = CheckAddReport()
        if not wanted:
            return report
        with connection_transaction(self.engine, write=True) as conn:
            if conn.dialect.name == "postgresql":
                conn.execute(text("SELECT pg_advisory_xact_lock(:k)"), {"k": PG_CHECK_LOCK_KEY})
            stored = self._stored_checks(conn, list(wanted))
            inserts: list[tuple[NewCheck, str]] = []
            renewals: list[dict[str, Any]] = []
            moves: list[dict[str, Any]] = []
            for name, (check, spec_text) in wanted.items():
                found = stored.get(name)
                if found is None:
                    inserts.append((check, spec_text))
                    report.added.append(name)
                    continue
                kind, active, earliest = found
                if kind != "check":
                    raise ScheduleConfigError(
                        name, "key", f"is stored as a {kind} schedule, not a deferred check"
                    )
                if not active:
                    renewals.append({"b_name": name, **self._renewal_values(check, spec_text, now)})
                    report.added.append(name)
                elif on_exists == ON_EXISTS_MOVE:
                    moves.append(
                        {
                            "b_name": name,
                            "spec": spec_text,
                            "next_target_at": check.at,
                            "earliest_check_at": check.at
                            if earliest is None
                            else min(utc(earliest, "earliest_check_at"), check.at),
                        }
                    )
                    report.moved.append(name)
                else:
                    report.kept.append(name)
            if not (inserts or renewals or moves):
                return report
            seq = int(conn.execute(BUMP_COUNTER).scalar_one())
            if inserts:
                self._insert_new(conn, inserts, now, seq)
            by_name = _T.c.name == bindparam("b_name")
            for batch in (renewals, moves):
                if batch:
                    for values in batch:
                        values["change_seq"], values["updated_at"] = seq, now
                    keys = [k for k in batch[0] if k != "b_name"]
                    conn.execute(
                        update(_T).where(by_name).values({k: bindparam(k) for k in keys}), batch
                    )
        return report

    def _stored_checks(
        self, conn: Connection, names: list[str]
    ) -> dict[str, tuple[str, bool, datetime | None]]:
        """(kind, active, earliest_check_at) of the stored rows of ``names``, locked."""
        found: dict[str, tuple[str, bool, datetime | None]] = {}
        if conn.dialect.name == "postgresql":
            # The driver's own array parameter: SQLAlchemy would bind (and
            # compile) one parameter per name.
            with conn.connection.driver_connection.cursor() as cur:  # type: ignore[union-attr]
                for chunk in chunks(names, PG_NAMES_PER_QUERY):
                    cur.execute(_PG_STORED_CHECKS, (chunk,))
                    for name, kind, active, earliest in cur:
                        found[name] = (kind, bool(active), utc_from_db(earliest))
            return found
        size = _NAMES_PER_QUERY.get(conn.dialect.name, 900)
        for chunk in chunks(names, size):
            stmt = select(_T.c.name, _T.c.kind, _T.c.active, _T.c.earliest_check_at).where(
                _T.c.name.in_(chunk)
            )
            if conn.dialect.name == "postgresql":
                stmt = stmt.with_for_update()
            for name, kind, active, earliest in conn.execute(stmt):
                found[name] = (kind, bool(active), earliest)
        return found

    def _insert_new(
        self, conn: Connection, rows: list[tuple[NewCheck, str]], now: datetime, seq: int
    ) -> None:
        """Insert the new checks ``rows`` (check, spec text) with ``change_seq``
        ``seq``. PostgreSQL: one ``COPY`` in text format on the driver's
        connection, in ``conn``'s transaction, the constant fields formatted
        once (SQLAlchemy's ``executemany`` spent more on binding each row than
        the server spent storing it); elsewhere one ``INSERT``."""
        if conn.dialect.name != "postgresql":
            inserts = [self._new_values(check, spec_text, now) for check, spec_text in rows]
            for values in inserts:
                values["change_seq"] = seq
            conn.execute(insert(_T), inserts)
            return
        stamp = now.isoformat()
        # After next_target_at, first_check_at and earliest_check_at (one time).
        tail = f"\t0\t{seq}\n"
        head = f"\t{SPEC_FORMAT_VERSION}\tt\tf\t{stamp}\t{stamp}\t{OWNER_CHECK}\t"
        driver: Any = conn.connection.driver_connection
        lines = []
        for check, spec_text in rows:
            spec = check.spec
            at = check.at.isoformat()
            lines.append(
                "\t".join(
                    (
                        copy_text(spec.name),
                        copy_text(spec.task),
                        copy_text(spec.configuration),
                        spec.kind,
                        copy_text(spec_text),
                    )
                )
                + head
                + at
                + "\t"
                + at
                + "\t"
                + at
                + tail
            )
        with driver.cursor() as cur, cur.copy(_PG_COPY_NEW) as copy:
            copy.write("".join(lines))

    @staticmethod
    def _new_values(check: NewCheck, spec_text: str, now: datetime) -> dict[str, Any]:
        spec = check.spec
        return {
            "name": spec.name,
            "task": spec.task,
            "configuration": spec.configuration,
            "kind": spec.kind,
            "spec": spec_text,
            "spec_format": SPEC_FORMAT_VERSION,
            "active": True,
            "paused": False,
            "registered_at": now,
            "updated_at": now,
            "owner": OWNER_CHECK,
            "next_target_at": check.at,
            "first_check_at": check.at,
            "earliest_check_at": check.at,
            "check_count": 0,
        }

    @staticmethod
    def _renewal_values(check: NewCheck, spec_text: str, now: datetime) -> dict[str, Any]:
        """An ended check added again: a new check on the old row (its durations kept)."""
        return {
            "spec": spec_text,
            "active": True,
            "paused": False,
            "registered_at": now,
            "next_target_at": check.at,
            "first_check_at": check.at,
            "earliest_check_at": check.at,
            "check_count": 0,
            "failure_count": None,
            "last_good_start_at": None,
            "last_good_end_at": None,
            "run_requested_at": None,
            "run_requested_priority": None,
        }

    def cancel_checks(self, names: Sequence[str], now: datetime) -> list[str]:
        now = utc(now, "now")
        cancelled: list[str] = []
        wanted = list(dict.fromkeys(names))
        if not wanted:
            return cancelled
        with self._write() as session:
            dialect = session.get_bind().dialect.name
            if dialect == "postgresql":
                session.execute(text("SELECT pg_advisory_xact_lock(:k)"), {"k": PG_CHECK_LOCK_KEY})
            size = _NAMES_PER_QUERY.get(dialect, 900)
            rows: list[ScheduleRow] = []
            for chunk in chunks(wanted, size):
                stmt = select(ScheduleRow).where(ScheduleRow.name.in_(chunk), _PENDING)
                rows.extend(session.scalars(stmt.with_for_update()))
            if not rows:
                return cancelled
            seq = int(session.execute(BUMP_COUNTER).scalar_one())
            history: list[dict[str, Any]] = []
            for row in sorted(rows, key=lambda r: r.name):
                spec = parse_spec(row.spec)[0]
                if isinstance(spec, CheckSpec):
                    ended = CheckEnded(CHECK_CANCELLED, "cancelled", row.check_count or 0)
                    history.append(
                        history_values(
                            history_record(
                                spec,
                                ended,
                                failure_count=row.failure_count,
                                added_at=row.registered_at,
                                first_check_at=row.first_check_at,
                                last_check_at=row.last_start_at,
                                ended_at=now,
                            )
                        )
                    )
                row.active = False
                row.change_seq, row.updated_at = seq, now
                cancelled.append(row.name)
            if history:
                session.execute(insert(_H), history)
        return cancelled

    def due_checks(
        self, after: tuple[datetime, str] | None, until: datetime, limit: int
    ) -> list[StoredSchedule]:
        if limit < 1:
            return []
        stmt = select(*_COLUMNS).where(_PENDING, _T.c.next_target_at <= utc(until, "until"))
        if after is not None:
            at, name = utc(after[0], "after"), after[1]
            stmt = stmt.where(
                or_(_T.c.next_target_at > at, and_(_T.c.next_target_at == at, _T.c.name > name))
            )
        stmt = stmt.order_by(_T.c.next_target_at, _T.c.name).limit(limit)
        return self._schedules(stmt)

    def pending_checks(
        self, *, task: str | None = None, due_before: datetime | None = None, limit: int = 50
    ) -> list[StoredSchedule]:
        stmt = select(*_COLUMNS).where(_PENDING)
        if task is not None:
            stmt = stmt.where(_T.c.task == task)
        if due_before is not None:
            stmt = stmt.where(_T.c.next_target_at < utc(due_before, "due_before"))
        return self._schedules(stmt.order_by(_T.c.next_target_at, _T.c.name).limit(limit))

    def _schedules(self, stmt: Any) -> list[StoredSchedule]:
        memo = ValueMemo()
        with connection_transaction(self.engine, write=False) as conn:
            return [
                stored_schedule_from_values(v, self._spec_cache, memo) for v in conn.execute(stmt)
            ]

    def check_summary(self, now: datetime) -> CheckSummary:
        now = utc(now, "now")
        stmt = (
            select(
                _T.c.task,
                func.count(),
                func.sum(case((_T.c.next_target_at < now, 1), else_=0)),
                func.min(_T.c.next_target_at),
            )
            .where(_PENDING)
            .group_by(_T.c.task)
            .order_by(_T.c.task)
        )
        summary = CheckSummary()
        with self._read() as session:
            for task, count, overdue, oldest in session.execute(stmt):
                summary.pending[task] = int(count)
                if overdue:
                    summary.overdue[task] = int(overdue)
                if oldest is not None:
                    summary.oldest_due[task] = oldest
        return summary

    def check_history(
        self, *, name: str | None = None, task: str | None = None, limit: int = 50
    ) -> list[CheckHistoryRecord]:
        stmt = select(CheckHistoryRow)
        if name is not None:
            stmt = stmt.where(CheckHistoryRow.name == name)
        if task is not None:
            stmt = stmt.where(CheckHistoryRow.task == task)
        stmt = stmt.order_by(CheckHistoryRow.ended_at.desc(), CheckHistoryRow.id.desc())
        with self._read() as session:
            return [history_row_record(r) for r in session.scalars(stmt.limit(limit))]

    def prune_checks(self, older_than: datetime, batch_size: int = 1000) -> int:
        if batch_size < 1:
            raise ValueError(f"batch_size must be at least 1, got {batch_size}")
        older_than = utc(older_than, "older_than")
        pick = (
            select(_H.c.id)
            .where(_H.c.ended_at < older_than)
            .order_by(_H.c.ended_at, _H.c.id)
            .limit(batch_size)
        )
        ended_rows = ended_checks_statement(older_than, batch_size)
        total = 0
        while True:
            with self._write() as session:
                ids = list(session.scalars(pick))
                if ids:
                    session.execute(delete(_H).where(_H.c.id.in_(ids)))
            total += len(ids)
            if len(ids) < batch_size:
                break
        while True:
            with self._write() as session:
                names = list(session.scalars(ended_rows))
                if names:
                    session.execute(delete(_T).where(_T.c.name.in_(names), ~_T.c.active))
            if len(names) < batch_size:
                return total
