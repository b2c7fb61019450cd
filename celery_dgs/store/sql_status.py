"""Status reads of the SQL store: count, filter and page the schedules by
their kept columns (:mod:`.kept`), with ``now`` as a query parameter.

The level at ``now`` is a ``CASE`` over ``kept_level``, ``error_at`` and
``warning_at`` (the comparison of :func:`~celery_dgs.core.kept_condition.condition_at`);
name patterns are ``GLOB`` (SQLite) or ``LIKE`` / ``~`` (PostgreSQL)
(:mod:`.selection`). Nothing is computed per row in Python but the rows returned.
"""

from __future__ import annotations

from collections.abc import Iterator
from datetime import datetime
from typing import Any, cast

from sqlalchemy import (
    ColumnElement,
    Select,
    Table,
    and_,
    bindparam,
    case,
    false,
    func,
    literal_column,
    or_,
    select,
)

from ..core.condition import Level
from ..core.kept_condition import KeptTimes
from ..errors import UnknownScheduleError
from .convert import utc
from .engine import connection_transaction
from .kept import condition_of
from .loader import SCHEDULE_COLUMNS, ValueMemo, stored_schedule_from_values
from .models import ScheduleRow, UTCDateTime
from .records import StoredSchedule
from .selection import LIKE_ESCAPE, Selection, like_pattern, regex_pattern, sqlite_glob
from .sql_base import SqlStoreBase

_T = cast(Table, ScheduleRow.__table__)
#: Rows fetched from the driver at a time while a status read streams.
STREAM_BATCH_ROWS = 2_000

_NOW = bindparam("now", type_=UTCDateTime())
_ERROR, _WARNING = int(Level.ERROR), int(Level.WARNING)
#: The level at ``:now`` (``condition_at``: strictly after a moment).
LEVEL_AT = case(
    (_T.c.kept_level == _ERROR, _ERROR),
    (_T.c.error_at < _NOW, _ERROR),
    (_T.c.warning_at < _NOW, _WARNING),
    else_=func.coalesce(_T.c.kept_level, _ERROR),
)
#: The reason at ``:now``.
REASON_AT = case(
    (_T.c.kept_level == _ERROR, _T.c.kept_reason),
    (_T.c.error_at < _NOW, _T.c.error_reason),
    (_T.c.warning_at < _NOW, _T.c.warning_reason),
    else_=_T.c.kept_reason,
)
#: The moment the urgency order sorts a level by: ``error_at`` in ERROR,
#: else ``should_start_by`` (``celery_dgs.status.urgency_key``).
_URGENT_AT = case((LEVEL_AT == _ERROR, _T.c.error_at), else_=_T.c.should_start_by)
_ROW_COLUMNS = [_T.c[name] for name in SCHEDULE_COLUMNS]


class StatusMethods(SqlStoreBase):
    """``condition_counts``, ``status_rows`` and ``kept_times`` of the SQL store."""

    def _where(self, selection: Selection, dialect: str) -> ColumnElement[bool]:
        """The selection as a ``WHERE`` clause (active schedules, no checks)."""
        clauses: list[ColumnElement[bool]] = [_T.c.active, _T.c.kind != "check"]
        if selection.names is not None:
            if not selection.names:
                return false()
            clauses.append(_T.c.name.in_(selection.names))
        if selection.patterns:
            clauses.append(or_(*(_name_clause(p, dialect) for p in selection.patterns)))
        if selection.levels:
            clauses.append(LEVEL_AT.in_([int(Level[name]) for name in selection.levels]))
        if selection.pools:
            pool = func.coalesce(_T.c.pool, selection.default_pool)
            clauses.append(pool.in_(selection.pools))
        return and_(*clauses)

    def condition_counts(self, now: datetime, selection: Selection) -> dict[tuple[str, str], int]:
        """How many selected schedules are in each (level name, reason) at
        ``now``: one grouped query."""
        with connection_transaction(self.engine, write=False) as conn:
            stmt = (
                select(LEVEL_AT, REASON_AT, func.count())
                .where(self._where(selection, conn.dialect.name))
                .group_by(literal_column("1"), literal_column("2"))
            )
            found = conn.execute(stmt, {"now": utc(now, "now")})
            return {(Level(level).name, reason or ""): n for level, reason, n in found}

    def _ordered(self, selection: Selection, dialect: str) -> Select[Any]:
        return (
            select(*_ROW_COLUMNS)
            .where(self._where(selection, dialect))
            .order_by(LEVEL_AT.desc(), _URGENT_AT.is_not(None), _URGENT_AT, _T.c.name)
        )

    def status_rows(
        self, now: datetime, selection: Selection, *, limit: int | None = None, offset: int = 0
    ) -> Iterator[StoredSchedule]:
        """The selected schedules, most urgent first at ``now`` (ERROR, WARNING,
        OK; by ``error_at`` in ERROR, else by ``should_start_by``; then by name),
        from ``offset``, at most ``limit`` (``None``: all, streamed in batches
        of :data:`STREAM_BATCH_ROWS` within one read transaction)."""
        params = {"now": utc(now, "now")}
        memo = ValueMemo()
        with connection_transaction(self.engine, write=False) as conn:
            stmt = self._ordered(selection, conn.dialect.name)
            if limit is not None:
                stmt = stmt.limit(limit)
            if offset:
                stmt = stmt.offset(offset)
            result = conn.execution_options(yield_per=STREAM_BATCH_ROWS).execute(stmt, params)
            for values in result:
                yield stored_schedule_from_values(values, self._spec_cache, memo)

    def kept_times(self, name: str) -> KeptTimes:
        """The kept columns of the named schedule; ``UnknownScheduleError`` if none."""
        columns = (
            _T.c.kept_level,
            _T.c.kept_reason,
            _T.c.warning_at,
            _T.c.warning_reason,
            _T.c.error_at,
            _T.c.error_reason,
        )
        stmt = select(*columns, _T.c.next_can_start_at, _T.c.should_start_by).where(
            _T.c.name == name
        )
        with connection_transaction(self.engine, write=False) as conn:
            row = conn.execute(stmt).one_or_none()
        if row is None:
            raise UnknownScheduleError(f"no schedule named {name!r} in the store")
        return KeptTimes(condition_of(row[:6]), row[6], row[7])


def _name_clause(pattern: str, dialect: str) -> ColumnElement[bool]:
    """The names matching ``pattern`` (:mod:`.selection`)."""
    if dialect == "sqlite":
        return _T.c.name.op("GLOB")(sqlite_glob(pattern))
    like = like_pattern(pattern)
    if like is not None:
        return _T.c.name.like(like, escape=LIKE_ESCAPE)
    return _T.c.name.regexp_match(regex_pattern(pattern))
