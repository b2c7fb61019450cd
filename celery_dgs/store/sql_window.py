"""Beat's window of schedules in the SQL store: a slice of the active
schedules by their kept start times (:meth:`WindowMethods.window_schedules`),
read along the partial index in its order (``ix_dgs_schedules_window``); a
slice of one margin bucket by kept ``error_at`` along
``ix_dgs_schedules_margin_window``, and the buckets in use by a skip scan of
that index (:meth:`WindowMethods.window_margin_buckets`)."""

from __future__ import annotations

from collections.abc import Sequence
from datetime import datetime
from typing import Any, cast

from sqlalchemy import (
    ColumnClause,
    ColumnElement,
    Connection,
    Select,
    Table,
    TextClause,
    and_,
    bindparam,
    column,
    or_,
    select,
    text,
)

from .convert import utc
from .engine import connection_transaction
from .kept import START_COLUMNS, start_values
from .loader import SCHEDULE_COLUMNS, ValueMemo, stored_schedule_from_values
from .models import ScheduleRow
from .records import StoredSchedule
from .sql_base import SqlStoreBase
from .sql_kept import update_kept

_T = cast(Table, ScheduleRow.__table__)
#: The columns untyped: the driver's values go to the loader's memo as they
#: are (:func:`~.loader.stored_schedule_from_values`), not through each
#: column type's result processing first.
_COLUMNS: list[ColumnClause[Any]] = [column(name) for name in SCHEDULE_COLUMNS]
#: As the partial indexes state it: the planner then uses them.
_ACTIVE_SCHEDULE = text("kind <> 'check' AND active")
#: The margin buckets in use, ascending: a skip scan of
#: ``ix_dgs_schedules_margin_window``, one ``min`` (one index entry) a bucket.
MARGIN_BUCKETS: TextClause = text(
    "WITH RECURSIVE buckets(bucket) AS ("
    " SELECT min(margin_bucket) FROM dgs_schedules"
    " WHERE kind <> 'check' AND active AND margin_bucket IS NOT NULL"
    " UNION ALL"
    " SELECT (SELECT min(margin_bucket) FROM dgs_schedules"
    " WHERE kind <> 'check' AND active AND margin_bucket > buckets.bucket)"
    " FROM buckets WHERE buckets.bucket IS NOT NULL"
    ") SELECT bucket FROM buckets WHERE bucket IS NOT NULL"
)


def _after(
    first: ColumnElement[Any], key_after: tuple[datetime, datetime, str]
) -> ColumnElement[bool]:
    """The rows whose (``first``, ``next_can_start_at``, name) is above ``key_after``."""
    by, at = utc(key_after[0], "key_after"), utc(key_after[1], "key_after")
    can, name = _T.c.next_can_start_at, _T.c.name
    return or_(
        first > by,
        and_(first == by, can > at),
        and_(first == by, can == at, name > key_after[2]),
    )


def _until(key_until: tuple[datetime, datetime, str]) -> ColumnElement[bool]:
    """The rows whose (kept ``should_start_by``, ``next_can_start_at``, name)
    is at or below ``key_until``."""
    by, at = utc(key_until[0], "key_until"), utc(key_until[1], "key_until")
    should, can, name = _T.c.should_start_by, _T.c.next_can_start_at, _T.c.name
    return or_(
        should < by,
        and_(should == by, can < at),
        and_(should == by, can == at, name <= key_until[2]),
    )


def window_statement(
    can_after: datetime | None,
    can_until: datetime,
    key_after: tuple[datetime, datetime, str] | None,
    limit: int,
    *,
    key_until: tuple[datetime, datetime, str] | None = None,
    columns: list[ColumnClause[Any]] = _COLUMNS,
) -> Select[Any]:
    """The ``SELECT`` of one slice (the rows with kept times): a range of
    ``ix_dgs_schedules_window``, in its order."""
    can = _T.c.next_can_start_at
    stmt = (
        select(*columns).select_from(_T).where(_ACTIVE_SCHEDULE, can <= utc(can_until, "can_until"))
    )
    if can_after is not None:
        stmt = stmt.where(can > utc(can_after, "can_after"))
    if key_after is not None:
        stmt = stmt.where(_after(_T.c.should_start_by, key_after))
    if key_until is not None:
        stmt = stmt.where(_until(key_until))
    return stmt.order_by(_T.c.should_start_by, can, _T.c.name).limit(limit)


def bucket_statement(
    bucket: int,
    can_until: datetime,
    key_after: tuple[datetime, datetime, str] | None,
    limit: int,
    *,
    columns: list[ColumnClause[Any]] = _COLUMNS,
) -> Select[Any]:
    """The ``SELECT`` of one margin bucket's slice: a range of
    ``ix_dgs_schedules_margin_window``, in its order."""
    can, error_at = _T.c.next_can_start_at, _T.c.error_at
    stmt = (
        select(*columns)
        .select_from(_T)
        .where(_ACTIVE_SCHEDULE, _T.c.margin_bucket == bucket, can <= utc(can_until, "can_until"))
    )
    if key_after is not None:
        stmt = stmt.where(_after(error_at, key_after))
    return stmt.order_by(error_at, can, _T.c.name).limit(limit)


def next_can_statement(
    can_after: datetime, key_after: tuple[datetime, datetime, str]
) -> Select[Any]:
    """The ``SELECT`` of the earliest kept next start after ``can_after`` past
    ``key_after``: the first rows of a range of ``ix_dgs_schedules_can_start``."""
    can = cast(ColumnClause[Any], _T.c.next_can_start_at)  # typed: an aware datetime
    return (
        select(can)
        .select_from(_T)
        .where(_ACTIVE_SCHEDULE, can > utc(can_after, "can_after"))
        .where(_after(_T.c.should_start_by, key_after))
        .order_by(can)
        .limit(1)
    )


#: The ``UPDATE`` of a row's kept start times (``b_name``: the row), unless
#: it changed since it was read (``b_seq``: its ``change_seq`` then).
_UPDATE_START = update_kept(START_COLUMNS).where(_T.c.change_seq == bindparam("b_seq"))
#: :data:`_UPDATE_START` of many rows in one PostgreSQL statement (arrays of
#: the names, their ``change_seq`` then, and the new times).
_PG_UPDATE_START = text(
    "UPDATE dgs_schedules AS s SET next_can_start_at = v.can, should_start_by = v.should,"
    " margin_bucket = v.bucket"
    " FROM unnest(CAST(:names AS text[]), CAST(:seqs AS bigint[]),"
    " CAST(:cans AS timestamptz[]), CAST(:shoulds AS timestamptz[]),"
    " CAST(:buckets AS integer[])) AS v(name, seq, can, should, bucket)"
    " WHERE s.name = v.name AND s.change_seq = v.seq"
)


class WindowMethods(SqlStoreBase):
    """``window_schedules`` of the SQL store."""

    def _window_schedules(
        self,
        can_after: datetime | None,
        can_until: datetime,
        key_after: tuple[datetime, datetime, str] | None,
        limit: int,
        bucket: int | None,
        key_until: tuple[datetime, datetime, str] | None = None,
    ) -> list[StoredSchedule]:
        found: list[Any] = []
        with connection_transaction(self.engine, write=False) as conn:
            if bucket is not None:
                found.extend(conn.execute(bucket_statement(bucket, can_until, key_after, limit)))
            else:
                found.extend(
                    self._window_rows(conn, can_after, can_until, key_after, limit, key_until)
                )
            memo = ValueMemo()
            return [stored_schedule_from_values(v, self._spec_cache, memo) for v in found]

    @staticmethod
    def _window_rows(
        conn: Connection,
        can_after: datetime | None,
        can_until: datetime,
        key_after: tuple[datetime, datetime, str] | None,
        limit: int,
        key_until: tuple[datetime, datetime, str] | None = None,
    ) -> list[Any]:
        """The rows of a slice of the window's order: from the start, the rows
        with no kept times first."""
        found: list[Any] = []
        if can_after is None and key_after is None:
            unkept = (
                select(*_COLUMNS)
                .select_from(_T)
                .where(_ACTIVE_SCHEDULE, _T.c.next_can_start_at.is_(None))
            )
            found.extend(conn.execute(unkept.order_by(_T.c.name).limit(limit)))
        if len(found) < limit:
            stmt = window_statement(
                can_after, can_until, key_after, limit - len(found), key_until=key_until
            )
            found.extend(conn.execute(stmt))
        return found

    def window_margin_buckets(self) -> list[int]:
        """See :meth:`ScheduleStore.window_margin_buckets
        <celery_dgs.store.base.ScheduleStore.window_margin_buckets>`."""
        with connection_transaction(self.engine, write=False) as conn:
            return sorted(int(b) for b in conn.execute(MARGIN_BUCKETS).scalars())

    def window_next_can(
        self, *, can_after: datetime, key_after: tuple[datetime, datetime, str]
    ) -> datetime | None:
        """See :meth:`ScheduleStore.window_next_can
        <celery_dgs.store.base.ScheduleStore.window_next_can>`."""
        with connection_transaction(self.engine, write=False) as conn:
            found = conn.execute(next_can_statement(can_after, key_after)).scalar()
            return cast(datetime | None, found)

    def _window_should_at(
        self, can_until: datetime, key_after: tuple[datetime, datetime, str], offset: int
    ) -> datetime | None:
        should = cast(ColumnClause[Any], _T.c.should_start_by)  # typed: an aware datetime
        stmt = window_statement(None, can_until, key_after, 1, columns=[should]).offset(offset)
        with connection_transaction(self.engine, write=False) as conn:
            found = conn.execute(stmt).scalar()
        return cast(datetime | None, found)

    def _keep_past_blackout(self, moved: Sequence[StoredSchedule]) -> int:
        with connection_transaction(self.engine, write=True) as conn:
            if conn.dialect.name == "postgresql":  # one statement, not one a row
                arrays = {
                    "names": [r.name for r in moved],
                    "seqs": [r.change_seq for r in moved],
                    "cans": [r.kept_can_start_at for r in moved],
                    "shoulds": [r.kept_should_start_by for r in moved],
                    "buckets": [r.kept_margin_bucket for r in moved],
                }
                return conn.execute(_PG_UPDATE_START, arrays).rowcount
            params = [{"b_name": r.name, "b_seq": r.change_seq, **start_values(r)} for r in moved]
            return conn.execute(_UPDATE_START, params).rowcount
