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
* WARNING: ``warning_at < now <= error_at``, as an idle schedule's warning
  from ``now`` less the largest margin on (``ix_dgs_schedules_warning_at``:
  its warning comes no earlier than its ``should_start_by``) and a run in
  progress's (``ix_dgs_schedules_running_warning``: few rows), and
  ``kept_level = 1`` while no moment passed (``ix_dgs_schedules_kept_warning``,
  in its order from ``now`` less the largest margin), by ``should_start_by``;
* OK: the rest (the count: all active schedules minus the others; the rows:
  ``ix_dgs_schedules_should_start`` in order from ``now`` less the largest
  margin, skipping the others).

So a read costs the rows in ERROR, those in WARNING and those whose
warning passed within the largest margin, plus one index-only count, not a
pass over every row. The counts of the whole fleet (or of its
conditions) do not read the rows at all: the condition tally keeps them
(:mod:`.condition_tally`). Every row (``status --json``) streams each part
in its index's order, merged as they stream: the first row comes once the
ERROR rows are read, not after a sort of the fleet (:mod:`.sql_status_parts`).

A selection by pool or by a word of the task reads the same parts within
each pool, or each task containing the word, along the same indexes with
the pool or the task leading (:mod:`.sql_status_keys`): the cost is that of
the selected schedules, not the fleet. A selection by name pattern or names
is one query over the matching rows (a ``CASE`` of the same comparison): a
name prefix is a range of the primary key; other patterns read every name.
"""

from __future__ import annotations

import itertools
from collections.abc import Iterable, Iterator, Sequence
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

from ..core.condition import Level
from ..core.kept_condition import KeptTimes
from ..errors import UnknownScheduleError
from .condition_tally import counts_at as tally_counts_at
from .condition_tally import fold as fold_tally
from .condition_tally import time_to_error_at as tally_time_to_error
from .convert import utc
from .engine import connection_transaction
from .kept import condition_of
from .loader import SCHEDULE_COLUMNS, ValueMemo, stored_schedule_from_values
from .models import ScheduleRow, UTCDateTime
from .records import StoredSchedule
from .selection import LIKE_ESCAPE, Selection, like_pattern, regex_pattern, sqlite_glob
from .sql_base import SqlStoreBase, chunks
from .sql_status_keys import keyed, within_of
from .sql_status_parts import (
    STREAM_BATCH_ROWS,
    Within,
    count_up_to,
    counts_by_part,
    rows_by_part,
)

_T = cast(Table, ScheduleRow.__table__)
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
#: The moment the urgency order sorts a level by: ``error_at`` in ERROR,
#: else ``should_start_by`` (``celery_dgs.status.urgency_key``).
_URGENT_AT = case((LEVEL_AT == _ERROR, _ERROR_AT), else_=_T.c.should_start_by)
#: Untyped: the driver's values go to the loader's memo as they are.
_ROW_COLUMNS: list[ColumnClause[Any]] = [column(name) for name in SCHEDULE_COLUMNS]


def _plain(selection: Selection) -> bool:
    """Whether ``selection`` is by condition at most (read by index ranges)."""
    return not (
        selection.patterns or selection.pools or selection.task_word or selection.names is not None
    )


def _levels(selection: Selection) -> set[int]:
    return {int(Level[name]) for name in selection.levels} or {_OK, _WARNING, _ERROR}


def _along(conn: Connection, selection: Selection) -> tuple[bool, Within | None]:
    """Whether ``selection`` is read by index ranges, and within which key
    (``None``: the whole fleet)."""
    if _plain(selection):
        return True, None
    if keyed(selection):
        return True, within_of(conn, selection)
    return False, None


class StatusMethods(SqlStoreBase):
    """``condition_counts``, ``count_selected``, ``status_rows`` and ``kept_times``
    of the SQL store."""

    def condition_counts(self, now: datetime, selection: Selection) -> dict[tuple[str, str], int]:
        """How many selected schedules are in each (level name, reason) at
        ``now``: the whole fleet, or its conditions, from the condition tally
        (:mod:`.condition_tally`); a selection by name, pool or task along
        its indexes or rows."""
        params = {"now": utc(now, "now")}
        with connection_transaction(self.engine, write=False) as conn:
            counted = tally_counts_at(conn, params["now"]) if _plain(selection) else None
            if counted is not None:
                levels = _levels(selection)
                return {
                    (Level(lv).name, why): n for (lv, why), n in counted.items() if lv in levels
                }
            by_index, within = _along(conn, selection)
            if not by_index:
                stmt = (
                    select(LEVEL_AT, REASON_AT, func.count())
                    .where(_where(selection, conn.dialect.name))
                    .group_by(literal_column("1"), literal_column("2"))
                )
                found = conn.execute(stmt, params)
                return {(Level(level).name, reason or ""): n for level, reason, n in found}
            return counts_by_part(conn, params, _levels(selection), within)

    def fold_condition_tally(self, now: datetime) -> int:
        """See :meth:`ScheduleStore.fold_condition_tally
        <celery_dgs.store.base.ScheduleStore.fold_condition_tally>`."""
        with connection_transaction(self.engine, write=True) as conn:
            return fold_tally(conn, utc(now, "now"))

    def count_selected(self, now: datetime, selection: Selection, at_most: int) -> int:
        """How many schedules ``selection`` has at ``now``, at most ``at_most``:
        each condition's parts (or the selection's one query) counted with a
        ``LIMIT`` of what is still wanted."""
        if at_most <= 0:
            return 0
        params = {"now": utc(now, "now")}
        with connection_transaction(self.engine, write=False) as conn:
            by_index, within = _along(conn, selection)
            if by_index:
                return count_up_to(conn, params, _levels(selection), at_most, within)
            matching = (
                select(literal_column("1"))
                .select_from(_T)
                .where(_where(selection, conn.dialect.name))
                .limit(at_most)
                .subquery()
            )
            counted = conn.execute(select(func.count()).select_from(matching), params)
            return int(counted.scalar_one())

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
            by_index, within = _along(conn, selection)
            if by_index:
                count = None if limit is None else offset + limit
                levels = _levels(selection)
                if offset and limit is not None:  # the rows before the page: names alone
                    named = rows_by_part(conn, params, levels, count, within, ("name",))
                    page = [values[0] for values in itertools.islice(named, offset, None)]
                    found: Iterable[Sequence[Any]] = _rows_named(conn, page)
                else:
                    found = itertools.islice(
                        rows_by_part(conn, params, levels, count, within), offset, None
                    )
                for values in found:
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
        <celery_dgs.store.base.ScheduleStore.time_to_error_counts>`: from the
        condition tally (:func:`.condition_tally.time_to_error_at`); at a
        moment before its horizon, one grouped query over
        ``ix_dgs_schedules_kept_level``, which holds both columns it
        compares."""
        params: dict[str, Any] = {"now": utc(now, "now")}
        with connection_transaction(self.engine, write=False) as conn:
            kept = tally_time_to_error(conn, params["now"], bounds)
        return kept if kept is not None else self.time_to_error_by_rows(now, bounds)

    def time_to_error_by_rows(self, now: datetime, bounds: Sequence[timedelta]) -> list[int]:
        """:meth:`time_to_error_counts` from the rows: one grouped query over
        ``ix_dgs_schedules_kept_level``."""
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


#: Names read by primary key per statement (within SQLite's variable limit).
NAMED_ROWS_PER_QUERY = 900


def _rows_named(conn: Connection, names: Sequence[str]) -> Iterator[Sequence[Any]]:
    """The rows of ``names`` (:data:`SCHEDULE_COLUMNS`' values) in that order,
    by primary key, :data:`NAMED_ROWS_PER_QUERY` at a time; a name no longer
    stored is left out."""
    stmt = (
        select(*_ROW_COLUMNS)
        .select_from(_T)
        .where(_T.c.name.in_(bindparam("names", expanding=True)))
    )
    for chunk in chunks(names, NAMED_ROWS_PER_QUERY):
        found = {values[0]: values for values in conn.execute(stmt, {"names": list(chunk)})}
        yield from (found[name] for name in chunk if name in found)


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
