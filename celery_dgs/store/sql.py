"""The SQLAlchemy schedule store: SQLite by default, PostgreSQL in production.

Concurrency model
-----------------
* Every transaction that changes a schedule row ends by bumping the one-row
  ``dgs_counter`` (``UPDATE ... SET value = value + 1 RETURNING value``) and
  writing that value to the row's ``change_seq``. The counter's row lock is held
  until commit, so writers commit in ``change_seq`` order and a reader that
  reads the counter before the rows never misses a change.
* Schedule rows are locked (``SELECT ... FOR NO KEY UPDATE`` on PostgreSQL)
  before they are read for a read-modify-write; locks are always taken in the
  order run row, schedule row(s) (by name), counter, so writers cannot deadlock.
* On SQLite, write transactions start with ``BEGIN IMMEDIATE`` (see
  :mod:`.engine`): one writer at a time, readers unaffected (WAL).
"""

from __future__ import annotations

import logging
from collections.abc import Iterator, Mapping, Sequence
from contextlib import ExitStack
from datetime import datetime, timedelta
from itertools import chain
from typing import Any

from sqlalchemy import bindparam, select, text
from sqlalchemy.orm import Session

from ..core.clock import Clock
from ..core.spec import SPEC_FORMAT_VERSION, ScheduleSpec
from ..errors import UnknownScheduleError
from .convert import spec_json, stored_schedule, utc
from .engine import connection_transaction
from .kept_ladder import LadderAdoption
from .loader import SCHEDULE_COLUMNS, ValueMemo, stored_schedule_from_values
from .models import ScheduleRow, UTCDateTime
from .ownership import SyncRowState, declared_by_name, plan_sync
from .records import OWNER_DECLARED, StoredSchedule, SyncReport
from .sql_base import ANALYZE_AFTER_SYNC_ROWS, PG_SYNC_LOCK_KEY, READ_COUNTER  # noqa: F401
from .sql_checks import CheckMethods
from .sql_identity import (
    claim_declarations,
    read_declared_by,
    read_or_create_store_id,
    read_store_id,
)
from .sql_kept_ladder import REWRITE_BATCH, adopt_ladder, read_fingerprint
from .sql_runs import RunMethods
from .sql_runtime import NAMES_PER_QUERY, RuntimeMethods
from .sql_status import StatusMethods
from .sql_window import WindowMethods
from .streaming import streamed_rows

logger = logging.getLogger("celery_dgs.store")

#: Rows fetched from the driver at a time by :meth:`SqlScheduleStore.iter_active`
#: (PostgreSQL: a chunk of the streamed result, see :mod:`.streaming`), so
#: start-up memory does not hold every row.
LOAD_BATCH_ROWS = 10_000

_COLUMNS = ", ".join(SCHEDULE_COLUMNS)
_SELECT_ONE = text(f"SELECT {_COLUMNS} FROM dgs_schedules WHERE name = :name")
# Plain text, no column types: the loader converts the raw driver values itself.
_SELECT_ACTIVE = text(
    f"SELECT {_COLUMNS} FROM dgs_schedules WHERE active AND kind <> 'check' ORDER BY name"
)
_SELECT_CHANGED = text(
    f"SELECT {_COLUMNS} FROM dgs_schedules WHERE change_seq > :cursor ORDER BY change_seq, name"
)
#: Changed rows but the pending checks never due within beat's window (``:until``).
_SELECT_CHANGED_IN_WINDOW = text(
    f"SELECT {_COLUMNS} FROM dgs_schedules WHERE change_seq > :cursor AND (kind <> 'check' "
    "OR NOT active OR next_target_at <= :until OR earliest_check_at <= :until) "
    "ORDER BY change_seq, name"
).bindparams(bindparam("until", type_=UTCDateTime()))


class SqlScheduleStore(CheckMethods, RuntimeMethods, RunMethods, StatusMethods, WindowMethods):
    """A :class:`~celery_dgs.store.base.ScheduleStore` on any SQLAlchemy URL.

    ``url``: ``sqlite:///path/to/file`` or ``postgresql+psycopg://user@host/db``.
    ``engine_options`` are passed to :func:`sqlalchemy.create_engine`. ``clock``
    gives ``updated_at`` for writes that take no time argument. The schema is
    not created here: call :meth:`upgrade` once (or use :meth:`open`).
    """

    @classmethod
    def open(
        cls,
        url: str,
        *,
        engine_options: Mapping[str, Any] | None = None,
        clock: Clock | None = None,
    ) -> SqlScheduleStore:
        """A store on ``url`` whose schema has been upgraded to the newest version
        (closed again if the upgrade fails)."""
        store = cls(url, engine_options=engine_options, clock=clock)
        try:
            store.upgrade()
        except BaseException:
            store.close()
            raise
        return store

    # -- schedules ----------------------------------------------------------------

    def sync(
        self,
        specs: Sequence[ScheduleSpec],
        now: datetime,
        *,
        invalid: Mapping[str, str] | None = None,
        dry_run: bool = False,
    ) -> SyncReport:
        """Make the stored schedules match the declared ``specs`` (one transaction).

        Inserted: new names, ``registered_at = now``. Updated: the spec's JSON
        differs, or the declaration was invalid and is valid again.
        Deactivated: stored, active, not declared (runs and stats kept).
        Reactivated: stored, inactive, declared again (its spec refreshed too).
        ``invalid`` maps the names of invalid declarations to their errors: a
        stored, active one keeps its stored spec and stays active, with the
        error in its ``declaration_error`` (listed in ``invalid``); any other
        one is left as it is. Statistics, ``paused`` and run requests are never
        touched. Active runtime schedules are left alone (a declared one is
        listed in ``refused``). Raises :class:`~celery_dgs.errors.ScheduleConfigError` if a
        name is declared twice with different fields (naming the first that
        differs). On PostgreSQL a sync that changed ``ANALYZE_AFTER_SYNC_ROWS``
        rows or more then ``ANALYZE``s the table (see :meth:`_analyze`).
        """
        report = self._sync(specs, now, dict(invalid or {}), dry_run)
        changed = len(report.inserted) + len(report.updated) + len(report.reactivated)
        if not dry_run and changed + len(report.deactivated) >= self.analyze_after_sync_rows:
            self._analyze()
        return report

    def _sync(
        self,
        specs: Sequence[ScheduleSpec],
        now: datetime,
        invalid: dict[str, str],
        dry_run: bool = False,
    ) -> SyncReport:
        now = utc(now, "now")
        declared = {
            name: (spec, spec_json(spec)) for name, spec in declared_by_name(specs, invalid).items()
        }
        with self._write() as session:
            if session.get_bind().dialect.name == "postgresql":
                session.execute(text("SELECT pg_advisory_xact_lock(:k)"), {"k": PG_SYNC_LOCK_KEY})
            rows = self._sync_rows(session, sorted(declared))
            states = {
                name: SyncRowState(
                    owner=row.owner,
                    active=row.active,
                    declaration_error=row.declaration_error,
                    same_spec=None
                    if name not in declared
                    else (row.spec == declared[name][1] and row.spec_format == SPEC_FORMAT_VERSION),
                )
                for name, row in rows.items()
            }
            report, marked = plan_sync(list(declared), states, invalid)
            if dry_run or not (report.changed or marked):
                return report
            seq = self._next_seq(session)
            for name in marked:
                rows[name].declaration_error = invalid[name]
                rows[name].change_seq, rows[name].updated_at = seq, now
            for name in report.inserted:
                session.add(self._new_row(*declared[name], now, seq))
            for name in report.updated + report.reactivated:
                spec, spec_text = declared[name]
                row = rows[name]
                row.task, row.configuration, row.kind = spec.task, spec.configuration, spec.kind
                row.spec, row.spec_format, row.active = spec_text, SPEC_FORMAT_VERSION, True
                row.declaration_error, row.owner = None, OWNER_DECLARED
                row.change_seq, row.updated_at = seq, now
            for name in report.deactivated:
                rows[name].active, rows[name].declaration_error = False, None
                rows[name].change_seq, rows[name].updated_at = seq, now
        return report

    #: Rows per transaction of :meth:`adopt_retry_ladder`'s rewrite.
    retry_rewrite_batch = REWRITE_BATCH

    def adopt_retry_ladder(self, ladder: tuple[timedelta, ...]) -> LadderAdoption:
        """See :meth:`ScheduleStore.adopt_retry_ladder
        <celery_dgs.store.base.ScheduleStore.adopt_retry_ladder>`: the
        fingerprint is kept in ``dgs_kept_settings``, the rows rewritten in
        batches (:mod:`.sql_kept_ladder`)."""
        self.retry_ladder = ladder
        return adopt_ladder(
            self.engine, ladder, specs=self._spec_cache, batch=self.retry_rewrite_batch
        )

    def store_id(self) -> str:
        """``store_id`` in ``dgs_kept_settings`` (:mod:`.sql_identity`),
        written by the first process that asks; read once per process."""
        if self._store_id is None:
            self._store_id = read_or_create_store_id(self.engine)
        return self._store_id

    def declarations_owner(self) -> str | None:
        """``declared_by`` in ``dgs_kept_settings``: one primary-key read."""
        return read_declared_by(self.engine)

    def claim_declarations(self, owner: str, *, take_over: bool = False) -> str | None:
        """``declared_by`` in ``dgs_kept_settings`` (:mod:`.sql_identity`)."""
        return claim_declarations(self.engine, owner, take_over=take_over)

    def stored_store_id(self) -> str | None:
        """One primary-key read until an id is found (``None``: none written);
        a found id is kept, as it never changes."""
        if self._store_id is None:
            self._store_id = read_store_id(self.engine)
        return self._store_id

    def stored_ladder_fingerprint(self) -> str | None:
        """The retry ladder's fingerprint in ``dgs_kept_settings`` (a
        :class:`~celery_dgs.store.kept_ladder.KeptLadderReader`): one
        primary-key read; ``None``: none recorded."""
        return read_fingerprint(self.engine)

    @staticmethod
    def _sync_rows(session: Session, names: list[str]) -> dict[str, ScheduleRow]:
        """The rows a sync may touch, locked: every active declared row, and
        the rows of the declared ``names`` whatever their owner. Runtime rows
        that are not declared are not read, so a sync costs the declared
        schedules, not every stored one."""
        size = NAMES_PER_QUERY.get(session.get_bind().dialect.name, 900)
        stmt = (
            select(ScheduleRow)
            .where(ScheduleRow.active, ScheduleRow.owner == OWNER_DECLARED)
            .order_by(ScheduleRow.name)
            .with_for_update(key_share=True)
        )
        rows = {row.name: row for row in session.scalars(stmt)}
        missing = [name for name in names if name not in rows]
        for i in range(0, len(missing), size):
            chunk = missing[i : i + size]
            stmt = (
                select(ScheduleRow)
                .where(ScheduleRow.name.in_(chunk))
                .order_by(ScheduleRow.name)
                .with_for_update(key_share=True)
            )
            rows.update((row.name, row) for row in session.scalars(stmt))
        return rows

    def insert_if_missing(self, spec: ScheduleSpec, now: datetime) -> bool:
        """Store ``spec`` as :meth:`sync` inserts a new name, unless the name is
        stored (active or not: that row is left exactly as it is). True if inserted.

        Serialised with :meth:`sync` (PostgreSQL: the same advisory lock; SQLite:
        one writer), so a sync running at the same time never meets a row it did
        not read, and sees this one as stored and unchanged when the specs agree.
        """
        now = utc(now, "now")
        spec_text = spec_json(spec)
        with self._write() as session:
            if session.get_bind().dialect.name == "postgresql":
                session.execute(text("SELECT pg_advisory_xact_lock(:k)"), {"k": PG_SYNC_LOCK_KEY})
            if session.get(ScheduleRow, spec.name) is not None:
                return False
            session.add(self._new_row(spec, spec_text, now, self._next_seq(session)))
        return True

    @staticmethod
    def _new_row(spec: ScheduleSpec, spec_text: str, now: datetime, seq: int) -> ScheduleRow:
        return ScheduleRow(
            name=spec.name,
            task=spec.task,
            configuration=spec.configuration,
            kind=spec.kind,
            spec=spec_text,
            spec_format=SPEC_FORMAT_VERSION,
            active=True,
            paused=False,
            registered_at=now,
            change_seq=seq,
            updated_at=now,
        )

    def load_active(self) -> tuple[list[StoredSchedule], int]:
        """All active schedules (by name) and the cursor for :meth:`changes_since`."""
        cursor, rows = self.iter_active()
        return list(rows), cursor

    def iter_active(self) -> tuple[int, Iterator[StoredSchedule]]:
        """The cursor, then the active schedules by name, read in batches of
        ``LOAD_BATCH_ROWS`` as the iterator is consumed (one read transaction,
        held until the iterator ends or is closed). Rows go from the driver to
        :func:`~.loader.stored_schedule_from_values`, without the ORM; specs
        come from the store's :class:`~.loader.SpecCache`."""
        stack = ExitStack()
        try:
            conn = stack.enter_context(connection_transaction(self.engine, write=False))
            if conn.dialect.name == "postgresql":
                # psycopg then hands out datetimes in timezone.utc, which the
                # loader keeps as they are (any other zone costs a conversion).
                conn.exec_driver_sql("SET LOCAL TIME ZONE 'UTC'")
            # The cursor is read before the rows (see the module docstring).
            cursor = int(conn.execute(READ_COUNTER).scalar_one())
            streamed = streamed_rows(conn, _SELECT_ACTIVE.text, LOAD_BATCH_ROWS)
            rows: Iterator[Sequence[Any]]
            if streamed is not None:
                # Closed before the transaction ends: the stream holds the connection.
                stack.callback(streamed.close)
                rows = streamed
            else:
                result = conn.execution_options(yield_per=LOAD_BATCH_ROWS).execute(_SELECT_ACTIVE)
                # fetch (and buffer) this many at a time
                rows = chain.from_iterable(result.yield_per(LOAD_BATCH_ROWS).partitions())
        except BaseException:
            stack.close()
            raise
        return cursor, self._stream(stack, rows)

    def _stream(self, stack: ExitStack, rows: Iterator[Sequence[Any]]) -> Iterator[StoredSchedule]:
        specs, memo = self._spec_cache, ValueMemo()
        with stack:
            for values in rows:
                yield stored_schedule_from_values(values, specs, memo)

    def change_cursor(self) -> int:
        """The store's change counter (see :meth:`changes_since`)."""
        with connection_transaction(self.engine, write=False) as conn:
            return int(conn.execute(READ_COUNTER).scalar_one())

    def changes_since(
        self, cursor: int, *, check_until: datetime | None = None
    ) -> tuple[list[StoredSchedule], int]:
        """Every schedule row, active or not, with ``change_seq > cursor`` (in
        ``change_seq`` order), and the cursor to pass next time.

        Because writers commit in ``change_seq`` order, no change is skipped: one
        committed concurrently is returned now or by the next call. A cursor ahead
        of the store's counter (the database was replaced) returns every row.
        """
        with connection_transaction(self.engine, write=False) as conn:
            counter = int(conn.execute(READ_COUNTER).scalar_one())
            if cursor > counter:
                cursor = 0
            memo = ValueMemo()
            if check_until is None:
                found = conn.execute(_SELECT_CHANGED, {"cursor": cursor})
            else:
                until = utc(check_until, "check_until")
                found = conn.execute(_SELECT_CHANGED_IN_WINDOW, {"cursor": cursor, "until": until})
            rows = [stored_schedule_from_values(v, self._spec_cache, memo) for v in found]
        return rows, max([counter, *(r.change_seq for r in rows)])

    def get(self, name: str) -> StoredSchedule:
        """The named schedule (active or not); ``UnknownScheduleError`` naming it if none."""
        with connection_transaction(self.engine, write=False) as conn:
            values = conn.execute(_SELECT_ONE, {"name": name}).one_or_none()
        if values is None:
            raise UnknownScheduleError(f"no schedule named {name!r} in the store")
        return stored_schedule_from_values(values, self._spec_cache, ValueMemo())

    def list_schedules(
        self,
        include_inactive: bool = False,
        *,
        owner: str | None = None,
        after: str | None = None,
        limit: int | None = None,
    ) -> list[StoredSchedule]:
        """Schedules ordered by name; inactive ones only with ``include_inactive``;
        only ``owner``'s when given; those named after ``after``, at most
        ``limit`` (a range of the primary key)."""
        stmt = select(ScheduleRow).where(ScheduleRow.kind != "check").order_by(ScheduleRow.name)
        if not include_inactive:
            stmt = stmt.where(ScheduleRow.active)
        if owner is not None:
            stmt = stmt.where(ScheduleRow.owner == owner)
        if after is not None:
            stmt = stmt.where(ScheduleRow.name > after)
        if limit is not None:
            stmt = stmt.limit(limit)
        with self._read() as session:
            return [stored_schedule(r) for r in session.scalars(stmt)]

    def names_near(self, name: str, limit: int) -> list[str]:
        """At most ``limit`` stored names on each side of ``name`` (two range
        reads of the primary key)."""
        column = ScheduleRow.name
        after = select(column).where(column >= name).order_by(column).limit(limit)
        before = select(column).where(column < name).order_by(column.desc()).limit(limit)
        with self._read() as session:
            return [*reversed(session.scalars(before).all()), *session.scalars(after)]

    def set_paused(self, name: str, paused: bool) -> bool:
        """Pause (``True``) or resume a schedule. Returns True if the flag changed.
        Resuming also enables a disabled adaptive schedule (True then too)."""
        with self._write() as session:
            row = self._locked(session, name)
            if row.paused == paused and (paused or row.disabled_reason is None):
                return False
            row.paused = paused
            if not paused:
                row.disabled_reason = None
            self._touch(session, row)
            return True

    def request_run(self, name: str, now: datetime, *, priority: int | None = None) -> None:
        """Ask beat for an ad-hoc run; a request already pending keeps its time."""
        now = utc(now, "now")
        with self._write() as session:
            row = self._locked(session, name)
            if row.run_requested_at is None or row.run_requested_priority != priority:
                row.run_requested_at = row.run_requested_at or now
                row.run_requested_priority = priority
                self._touch(session, row)

    def clear_run_request(self, name: str, *, requested_at: datetime | None = None) -> None:
        """Consume the pending run request. With ``requested_at`` (the value beat
        saw), a newer request made meanwhile is left in place."""
        with self._write() as session:
            row = self._locked(session, name)
            if row.run_requested_at is None:
                return
            if requested_at is not None and row.run_requested_at != utc(requested_at, "at"):
                return
            row.run_requested_at = None
            row.run_requested_priority = None
            self._touch(session, row)
