"""Connection handling and row helpers shared by the two halves of the SQL store."""

from __future__ import annotations

import logging
from collections.abc import Iterator, Mapping, Sequence
from contextlib import AbstractContextManager, contextmanager
from datetime import datetime, timedelta
from typing import Any, TypeVar

from sqlalchemy import Connection, Engine, bindparam, event, select, text
from sqlalchemy.exc import SQLAlchemyError
from sqlalchemy.orm import Session

from ..core.clock import Clock, SystemClock
from ..core.timing import DEFAULT_RETRY_LADDER
from ..errors import UnknownScheduleError
from .base import ScheduleStore
from .engine import connection_transaction, make_engine, session_transaction
from .loader import SCHEDULE_COLUMNS, SpecCache, ValueMemo, stored_schedule_from_values
from .migrate import upgrade_engine
from .models import COUNTER_ID, ScheduleFields, ScheduleRow
from .records import StoredSchedule
from .sql_kept import RETRY_LADDER_KEY, keep_on_flush

logger = logging.getLogger("celery_dgs.store")

_T = TypeVar("_T")

BUMP_COUNTER = text(
    f"UPDATE dgs_counter SET value = value + 1 WHERE id = {COUNTER_ID} RETURNING value"
)
READ_COUNTER = text(f"SELECT value FROM dgs_counter WHERE id = {COUNTER_ID}")
#: The schedule row named ``name``, locked for a change of its non-key columns.
LOCK_SCHEDULE = (
    select(ScheduleRow).where(ScheduleRow.name == bindparam("name")).with_for_update(key_share=True)
)


def next_seq(conn: Connection) -> int:
    """A new ``change_seq``, in ``conn``'s transaction (take row locks before this)."""
    return int(conn.execute(BUMP_COUNTER).scalar_one())


class KeptSession(Session):
    """The session of the store's write transactions: each flush keeps the
    kept columns of the schedule rows it writes (:func:`~.sql_kept.keep_on_flush`,
    with the retry ladder in ``info[RETRY_LADDER_KEY]``)."""


event.listen(KeptSession, "before_flush", keep_on_flush)


def chunks(names: Sequence[_T], size: int) -> Iterator[Sequence[_T]]:
    """``names`` in consecutive slices of at most ``size`` (one query's worth)."""
    for i in range(0, len(names), size):
        yield names[i : i + size]


#: pg_advisory_xact_lock key held by :meth:`SqlScheduleStore.sync` ("dgssync").
PG_SYNC_LOCK_KEY = 0x64677373796E63
#: A sync or runtime upsert that changes at least this many rows ANALYZEs
#: dgs_schedules (PostgreSQL).
ANALYZE_AFTER_SYNC_ROWS = 1_000


class SqlStoreBase(ScheduleStore):
    """Engine, transactions, locking and ``change_seq`` helpers."""

    #: See :data:`ANALYZE_AFTER_SYNC_ROWS`.
    analyze_after_sync_rows = ANALYZE_AFTER_SYNC_ROWS

    def __init__(
        self,
        url: str,
        *,
        engine_options: Mapping[str, Any] | None = None,
        clock: Clock | None = None,
    ) -> None:
        self.url = url
        self._engine = make_engine(url, engine_options)
        self._clock: Clock = clock or SystemClock()
        #: Parsed specs by shape, shared by every bulk read (see :mod:`.loader`).
        self._spec_cache = SpecCache()
        #: The retry ladder of the kept ``next_can_start_at`` (``dgs_retry_ladder``).
        self.retry_ladder: tuple[timedelta, ...] = DEFAULT_RETRY_LADDER
        #: The store's id once read (``SqlScheduleStore.store_id``).
        self._store_id: str | None = None

    @property
    def engine(self) -> Engine:
        return self._engine

    def close(self) -> None:
        """Close every pooled connection (the store can still be used afterwards)."""
        self._engine.dispose()

    def upgrade(self) -> None:
        """Run the alembic migrations to head. Idempotent; concurrent callers are
        serialised (PostgreSQL advisory lock, SQLite write lock)."""
        upgrade_engine(self._engine)

    # -- transactions and helpers -------------------------------------------------

    def _analyze(self) -> None:
        """Refresh the planner's statistics of ``dgs_schedules`` (PostgreSQL).

        Without them, after a bulk insert, the planner guesses and the poll of
        :meth:`changes_since` (``change_seq > cursor``, one row in a million)
        scans the whole table (46 ms at 100k rows instead of ~0.2 ms) until
        autovacuum gets to it. Best effort: a failure is logged, never raised.
        """
        if self.engine.dialect.name != "postgresql":
            return
        try:
            with self.engine.connect().execution_options(isolation_level="AUTOCOMMIT") as conn:
                conn.exec_driver_sql("ANALYZE dgs_schedules")
        except SQLAlchemyError as exc:
            logger.warning("celery-dgs: ANALYZE dgs_schedules after a large write failed: %s", exc)

    @contextmanager
    def _write(self) -> Iterator[Session]:
        """A write transaction (flushed before its commit) whose flushes keep
        the kept columns of the schedule rows they write (:class:`KeptSession`)."""
        with (
            connection_transaction(self._engine, write=True) as conn,
            KeptSession(bind=conn, autoflush=True, expire_on_commit=False) as session,
        ):
            session.info[RETRY_LADDER_KEY] = self.retry_ladder
            yield session
            session.flush()

    def _read(self) -> AbstractContextManager[Session]:
        return session_transaction(self._engine, write=False)

    def _next_seq(self, session: Session) -> int:
        # The counter's UPDATE needs none of the session's pending changes: run
        # on the session's connection (no autoflush), a changed row is written
        # once, at the next flush, with its kept columns computed once.
        return next_seq(session.connection())

    def _touch(self, session: Session, row: ScheduleRow, now: datetime | None = None) -> None:
        """Mark ``row`` changed: a new ``change_seq`` (take row locks before this)."""
        row.change_seq = self._next_seq(session)
        row.updated_at = now or self._clock.now()

    def _locked(self, session: Session, name: str) -> ScheduleRow:
        row = session.scalars(LOCK_SCHEDULE, {"name": name}).one_or_none()
        if row is None:
            raise UnknownScheduleError(f"no schedule named {name!r} in the store")
        return row

    def _stored(self, row: ScheduleFields) -> StoredSchedule:
        """``row`` as the store returns it, as :func:`~.convert.stored_schedule`
        gives it, its spec from the store's :class:`~.loader.SpecCache` (a
        spec of a shape already parsed is a copy with the row's names and
        arguments, not a parse and validation of its JSON)."""
        values = [getattr(row, column) for column in SCHEDULE_COLUMNS]
        return stored_schedule_from_values(values, self._spec_cache, ValueMemo())
