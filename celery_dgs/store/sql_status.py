"""Status reads of the SQL store: count, filter and page the schedules by
their kept columns (:mod:`.kept`), with ``now`` as a query parameter.

A schedule's level at ``now`` is the comparison of
:func:`~celery_dgs.core.kept_condition.condition_at`: ERROR when
``kept_level`` is 2 or ``error_at < now``, else WARNING when ``warning_at <
now`` or ``kept_level`` is 1, else OK. Each condition is a range of one
partial index (active schedules, not the deferred checks), which covers its
count and gives its order:

* ERROR: ``kept_level = 2`` (``ix_dgs_schedules_kept_level``), and
  ``error_at < now`` (``ix_dgs_schedules_error_at``), by ``error_at``;
* WARNING: ``warning_at < now <= error_at`` (``ix_dgs_schedules_warning_at``),
  and ``kept_level = 1`` while no moment passed, by ``should_start_by``;
* OK: the rest (the count: all active schedules minus the others; the rows:
  ``ix_dgs_schedules_should_start`` in order, skipping the others).

So a read costs the rows in ERROR and WARNING plus one index-only count,
not a pass over every row. Every row (``status --json``) streams each part
in its index's order, merged as they stream: the first row comes once the
ERROR rows are read, not after a sort of the fleet. A selection by name
pattern, pool, a word of the task or names is one query over the matching
rows (a ``CASE`` of the same comparison): a name prefix is a range of the
primary key; other patterns, a pool and a task word read every row.
"""

from __future__ import annotations

import heapq
import itertools
from collections.abc import Iterator, Sequence
from datetime import datetime, timedelta
from typing import Any, cast

from sqlalchemy import (
    ColumnClause,
    ColumnElement,
    Connection,
    Table,
    and_,
    bindparam,
    case,
    column,
    func,
    literal_column,
    or_,
    select,
    text,
)

from ..core.condition import Level, Reason
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
#: Distinct datetimes a streaming read shares before it starts over (its
#: memory stays flat however many rows it streams).
STREAM_MEMO_ENTRIES = 20_000

_NOW = bindparam("now", type_=UTCDateTime())
_OK, _WARNING, _ERROR = int(Level.OK), int(Level.WARNING), int(Level.ERROR)
#: The partial indexes' condition, as they state it (so the planner uses them).
ACTIVE_SCHEDULE = text("active AND kind <> 'check'")
#: ``ix_dgs_schedules_failing``'s condition: the schedules whose last runs failed.
FAILING_SCHEDULE = "active AND kind <> 'check' AND failure_count > 0"
_LEVEL, _ERROR_AT, _WARNING_AT = _T.c.kept_level, _T.c.error_at, _T.c.warning_at
#: The level at ``:now`` (``condition_at``: strictly after a moment).
LEVEL_AT = case(
    (_LEVEL == _ERROR, _ERROR),
    (_ERROR_AT < _NOW, _ERROR),
    (_WARNING_AT < _NOW, _WARNING),
    else_=func.coalesce(_LEVEL, _ERROR),
)
#: The reason at ``:now``.
REASON_AT = case(
    (_LEVEL == _ERROR, _T.c.kept_reason),
    (_ERROR_AT < _NOW, _T.c.error_reason),
    (_WARNING_AT < _NOW, _T.c.warning_reason),
    else_=_T.c.kept_reason,
)
_LATER = "error_at >= :now AND (warning_at IS NULL OR warning_at >= :now)"
#: Each condition's parts: its level, the rows' reason column, their range
#: (with ``:now``) and the partial index that covers it.
_PARTS: tuple[tuple[int, str, str, str], ...] = (
    (_ERROR, "kept_reason", "kept_level = 2", "ix_dgs_schedules_kept_level"),
    (_ERROR, "error_reason", "error_at < :now AND kept_level < 2", "ix_dgs_schedules_error_at"),
    (
        _WARNING,
        "warning_reason",
        "warning_at < :now AND error_at >= :now AND kept_level < 2",
        "ix_dgs_schedules_warning_at",
    ),
    (_WARNING, "kept_reason", f"kept_level = 1 AND {_LATER}", "ix_dgs_schedules_kept_level"),
    (_OK, "kept_reason", f"kept_level = 0 AND {_LATER}", "ix_dgs_schedules_should_start"),
)
_ROWS_SQL = ", ".join(SCHEDULE_COLUMNS)


def _part_query(sql: str) -> Any:
    """``sql`` with its ``:now`` (if any) bound as a stored moment."""
    query = text(sql)
    return query.bindparams(bindparam("now", type_=UTCDateTime())) if ":now" in sql else query


def _from(index: str, dialect: str) -> str:
    """``dgs_schedules``, on SQLite with the index the part reads (its planner
    does not pick a partial index over a scan by itself)."""
    return f"dgs_schedules INDEXED BY {index}" if dialect == "sqlite" else "dgs_schedules"


#: The moment the urgency order sorts a level by: ``error_at`` in ERROR,
#: else ``should_start_by`` (``celery_dgs.status.urgency_key``).
_URGENT_AT = case((LEVEL_AT == _ERROR, _ERROR_AT), else_=_T.c.should_start_by)
#: Untyped: the driver's values go to the loader's memo as they are.
_ROW_COLUMNS: list[ColumnClause[Any]] = [column(name) for name in SCHEDULE_COLUMNS]
_WIDTH = len(SCHEDULE_COLUMNS)


def _plain(selection: Selection) -> bool:
    """Whether ``selection`` is by condition at most (read by index ranges)."""
    return not (
        selection.patterns or selection.pools or selection.task_word or selection.names is not None
    )


def _levels(selection: Selection) -> set[int]:
    return {int(Level[name]) for name in selection.levels} or {_OK, _WARNING, _ERROR}


class StatusMethods(SqlStoreBase):
    """``condition_counts``, ``status_rows`` and ``kept_times`` of the SQL store."""

    def condition_counts(self, now: datetime, selection: Selection) -> dict[tuple[str, str], int]:
        """How many selected schedules are in each (level name, reason) at ``now``."""
        params = {"now": utc(now, "now")}
        with connection_transaction(self.engine, write=False) as conn:
            if not _plain(selection):
                stmt = (
                    select(LEVEL_AT, REASON_AT, func.count())
                    .where(_where(selection, conn.dialect.name))
                    .group_by(literal_column("1"), literal_column("2"))
                )
                found = conn.execute(stmt, params)
                return {(Level(level).name, reason or ""): n for level, reason, n in found}
            return _counts_by_part(conn, params, _levels(selection))

    def status_rows(
        self, now: datetime, selection: Selection, *, limit: int | None = None, offset: int = 0
    ) -> Iterator[StoredSchedule]:
        """The selected schedules, most urgent first at ``now`` (ERROR, WARNING,
        OK; by ``error_at`` in ERROR, else by ``should_start_by``; then by name),
        from ``offset``, at most ``limit`` (``None``: all, streamed in batches
        of :data:`STREAM_BATCH_ROWS` within one read transaction)."""
        params = {"now": utc(now, "now")}
        memo = ValueMemo(STREAM_MEMO_ENTRIES)  # bounded: a stream of every row
        with connection_transaction(self.engine, write=False) as conn:
            if _plain(selection):
                count = None if limit is None else offset + limit
                found = _by_part(conn, params, _levels(selection), count)
                for values in itertools.islice(found, offset, None):
                    yield stored_schedule_from_values(values, self._spec_cache, memo)
                return
            stmt = (
                select(*_ROW_COLUMNS)
                .select_from(_T)
                .where(_where(selection, conn.dialect.name))
                .order_by(LEVEL_AT.desc(), _URGENT_AT.is_not(None), _URGENT_AT, _T.c.name)
            )
            if limit is not None:
                stmt = stmt.limit(limit)
            if offset:
                stmt = stmt.offset(offset)
            result = conn.execution_options(yield_per=STREAM_BATCH_ROWS).execute(stmt, params)
            for values in result:
                yield stored_schedule_from_values(values, self._spec_cache, memo)

    def time_to_error_counts(self, now: datetime, bounds: Sequence[timedelta]) -> list[int]:
        """See :meth:`ScheduleStore.time_to_error_counts
        <celery_dgs.store.base.ScheduleStore.time_to_error_counts>`: one
        grouped query over ``ix_dgs_schedules_kept_level``, which holds both
        columns it compares."""
        params: dict[str, Any] = {"now": utc(now, "now")}
        in_error = or_(_LEVEL.is_(None), _LEVEL == _ERROR, _ERROR_AT < _NOW)
        whens: list[Any] = [(in_error, 0)]
        for i, bound in enumerate(bounds):
            params[f"b{i}"] = params["now"] + bound
            whens.append((bindparam(f"b{i}", type_=UTCDateTime()) > _ERROR_AT, i + 1))
        bucket = case(*whens, else_=len(bounds) + 1)
        stmt = (
            select(bucket, func.count())
            .where(ACTIVE_SCHEDULE, or_(_ERROR_AT.is_not(None), in_error))
            .group_by(literal_column("1"))
            .with_hint(_T, "INDEXED BY ix_dgs_schedules_kept_level", "sqlite")
        )
        counts = [0] * (len(bounds) + 2)
        with connection_transaction(self.engine, write=False) as conn:
            for index, n in conn.execute(stmt, params):
                counts[index] = n
        return counts

    def failing_schedules(self, limit: int) -> list[StoredSchedule]:
        """See :meth:`ScheduleStore.failing_schedules
        <celery_dgs.store.base.ScheduleStore.failing_schedules>`: the last
        entries of ``ix_dgs_schedules_failing``."""
        stmt = (
            select(*_ROW_COLUMNS)
            .select_from(_T)
            .where(text(FAILING_SCHEDULE))
            .order_by(_T.c.last_end_at.desc().nulls_last(), _T.c.name)
            .limit(limit)
        )
        memo = ValueMemo(STREAM_MEMO_ENTRIES)
        with connection_transaction(self.engine, write=False) as conn:
            found = conn.execute(stmt).all()
        return [stored_schedule_from_values(v, self._spec_cache, memo) for v in found]

    def kept_times(self, name: str) -> KeptTimes:
        """The kept columns of the named schedule; ``UnknownScheduleError`` if none."""
        columns = (_LEVEL, _T.c.kept_reason, _WARNING_AT, _T.c.warning_reason, _ERROR_AT)
        stmt = select(
            *columns, _T.c.error_reason, _T.c.next_can_start_at, _T.c.should_start_by
        ).where(_T.c.name == name)
        with connection_transaction(self.engine, write=False) as conn:
            row = conn.execute(stmt).one_or_none()
        if row is None:
            raise UnknownScheduleError(f"no schedule named {name!r} in the store")
        return KeptTimes(condition_of(row[:6]), row[6], row[7])


def _counts_by_part(
    conn: Connection, params: dict[str, Any], levels: set[int]
) -> dict[tuple[str, str], int]:
    """The counts of each condition's parts (one grouped query each, over its
    index); OK as every active schedule less the ERROR and WARNING ones."""
    dialect = conn.dialect.name
    counts: dict[tuple[str, str], int] = {}
    for level, reason, where, index in _PARTS[:4]:
        if level in levels or _OK in levels:  # OK: what the others leave
            sql = (
                f"SELECT {reason}, count(*) FROM {_from(index, dialect)} "
                f"WHERE active AND kind <> 'check' AND {where} GROUP BY {reason}"
            )
            for why, n in conn.execute(_part_query(sql), params):
                key = (Level(level).name, why or "")
                counts[key] = counts.get(key, 0) + n
    ok = 0
    if _OK in levels:
        every = (
            f"SELECT count(*) FROM {_from('ix_dgs_schedules_can_start', dialect)} "
            "WHERE active AND kind <> 'check'"
        )
        ok = int(conn.execute(text(every)).scalar_one()) - sum(counts.values())
    counts = {k: n for k, n in counts.items() if int(Level[k[0]]) in levels}
    if ok:
        counts[(Level.OK.name, Reason.OK.value)] = ok
    return counts


def _by_part(
    conn: Connection, params: dict[str, Any], levels: set[int], count: int | None
) -> Iterator[Sequence[Any]]:
    """The rows (:data:`SCHEDULE_COLUMNS`' values) of the selected levels in
    urgency order, at most ``count`` (``None``: every one, streamed): each
    part read in its index's order and merged as it streams, a level read
    only while rows are still wanted. Nothing is sorted but the rows of a
    part whose index is not in its order (the ERROR and WARNING ones)."""
    given = 0
    for level in (_ERROR, _WARNING, _OK):
        if level not in levels or (count is not None and given >= count):
            continue
        moment = "error_at" if level == _ERROR else "should_start_by"
        parts = []
        for part, (part_level, _, where, index) in enumerate(_PARTS):
            if part_level != level:
                continue
            # Only a fixed ERROR (an invalid spec) may have no moment: first.
            order = f"{moment} IS NOT NULL, {moment}, name" if part == 0 else f"{moment}, name"
            limit = "" if count is None else f" LIMIT {count - given}"
            sql = (
                f"SELECT {_ROWS_SQL}, {moment} FROM {_from(index, conn.dialect.name)} "
                f"WHERE active AND kind <> 'check' AND {where} ORDER BY {order}{limit}"
            )
            options = {"yield_per": STREAM_BATCH_ROWS} if count is None else {}
            parts.append(conn.execution_options(**options).execute(_part_query(sql), params))
        for values in heapq.merge(*parts, key=_urgency):
            if count is not None and given >= count:
                break
            given += 1
            yield values[:_WIDTH]


def _urgency(values: Sequence[Any]) -> tuple[bool, Any, str]:
    """The order of a part's row within its level: without a moment first,
    then by the moment (its last column), then by name."""
    at = values[_WIDTH]
    return (at is not None, at, values[0])


def _where(selection: Selection, dialect: str) -> ColumnElement[bool]:
    """The selection as one ``WHERE`` clause."""
    clauses: list[ColumnElement[bool]] = [ACTIVE_SCHEDULE]  # type: ignore[list-item]
    if selection.names is not None:
        clauses.append(_T.c.name.in_(selection.names))
    if selection.patterns:
        clauses.append(or_(*(_name_clause(p, dialect) for p in selection.patterns)))
    if selection.levels:
        clauses.append(LEVEL_AT.in_([int(Level[name]) for name in selection.levels]))
    if selection.pools:
        pool = func.coalesce(_T.c.pool, selection.default_pool)
        clauses.append(pool.in_(selection.pools))
    if selection.task_word:
        # Case-sensitive, as the memory store's ``in`` (SQLite's LIKE is not).
        position = func.instr if dialect == "sqlite" else func.strpos
        clauses.append(position(_T.c.task, selection.task_word) > 0)
    return and_(*clauses)


def _name_clause(pattern: str, dialect: str) -> ColumnElement[bool]:
    """The names matching ``pattern`` (:mod:`.selection`)."""
    if dialect == "sqlite":
        return _T.c.name.op("GLOB")(sqlite_glob(pattern))
    like = like_pattern(pattern)
    if like is not None:
        return _T.c.name.like(like, escape=LIKE_ESCAPE)
    return _T.c.name.regexp_match(regex_pattern(pattern))
