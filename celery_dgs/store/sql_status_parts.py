"""Each condition's parts as ranges of the partial indexes that cover them,
counted and read in urgency order: over every active schedule, or
:class:`Within` the values of a pool or a task.

A part is one range of one index (:data:`PARTS`): a count groups it by
reason, a read takes its first rows in its moment's order. Within a key,
each part is read once per value (``pool = 'a'``, ``pool IS NULL``, ``task
= 'p.x'``) along the same index with that key leading
(``ix_dgs_schedules_pool_...``, ``ix_dgs_schedules_task_...``), and the
ranges are merged in order by the database (one ``UNION ALL`` statement
per part), so a read costs the rows it gives plus one index probe per part
and value, not the rows of the other values.
"""

from __future__ import annotations

import heapq
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from datetime import timedelta
from typing import Any

from sqlalchemy import Connection, TextClause, bindparam, text

from ..core.condition import Level, Reason
from ..core.laxity import margin_bucket_edges
from .loader import SCHEDULE_COLUMNS
from .models import UTCDateTime, utc_from_db

#: Rows fetched from the driver at a time while a status read streams.
STREAM_BATCH_ROWS = 2_000
#: Ranges of a part in one SQLite statement (its limit of a compound
#: ``SELECT`` is 500); more are read as several, merged here.
SQLITE_ARMS = 400

_OK, _WARNING, _ERROR = int(Level.OK), int(Level.WARNING), int(Level.ERROR)
#: Every level: a read of every condition.
ALL_LEVELS = frozenset({_OK, _WARNING, _ERROR})
_LATER = "error_at >= :now AND (warning_at IS NULL OR warning_at >= :now)"
_IDLE = Reason.LIKELY_LATE.value
#: The active schedules ``ix_dgs_schedules_running_warning`` holds: those
#: whose warning comes from a run in progress (``likely_late_running``,
#: ``over_expected_duration``); an idle schedule's warning is ``likely_late``.
_RUNNING_WARNING = f"warning_reason <> '{_IDLE}'"


@dataclass(frozen=True)
class Part:
    """One range of a condition: its level, the rows' reason column, the
    range (with ``:now``, and ``:margin_floor``) and the partial index that
    covers it."""

    level: int
    reason: str
    where: str
    index: str


#: Each condition's parts. ERROR and WARNING are read before OK; the second
#: WARNING part (a run in progress warns) is few rows: the runs in progress.
PARTS: tuple[Part, ...] = (
    Part(_ERROR, "kept_reason", "kept_level = 2", "ix_dgs_schedules_kept_level"),
    Part(_ERROR, "error_reason", "error_at < :now AND kept_level < 2", "ix_dgs_schedules_error_at"),
    # An idle schedule's warning_at is error_at less its expected run, which
    # its margin (error_at - should_start_by) is not below: one not in ERROR
    # warned at margin_floor (now less the largest margin) or later, so the
    # range skips the rows whose warning passed long ago (most in ERROR)
    Part(
        _WARNING,
        "warning_reason",
        f"warning_at < :now AND warning_at >= :margin_floor AND warning_reason = '{_IDLE}' "
        "AND error_at >= :now AND kept_level < 2",
        "ix_dgs_schedules_warning_at",
    ),
    Part(
        _WARNING,
        "warning_reason",
        f"{_RUNNING_WARNING} AND warning_at < :now AND error_at >= :now AND kept_level < 2",
        "ix_dgs_schedules_running_warning",
    ),
    # WARNING while no moment passed (the last run failed): not in ERROR
    # either, so from margin_floor on, in its index's order
    Part(
        _WARNING,
        "kept_reason",
        f"kept_level = 1 AND {_LATER} AND should_start_by >= :margin_floor",
        "ix_dgs_schedules_kept_warning",
    ),
    # OK: error_at >= now, so should_start_by >= margin_floor: the range
    # skips the long-overdue rows before it
    Part(
        _OK,
        "kept_reason",
        f"kept_level = 0 AND {_LATER} AND should_start_by >= :margin_floor",
        "ix_dgs_schedules_should_start",
    ),
)
_PREFIX = "ix_dgs_schedules_"


@dataclass(frozen=True)
class Within:
    """The schedules whose ``column`` (``pool`` or ``task``) is one of
    ``values`` (``None``: NULL), and, when ``also`` is given (another
    column, its values), whose other column is one of those."""

    column: str
    values: tuple[str | None, ...]
    also: tuple[str, tuple[str | None, ...]] | None = None

    def index(self, index: str) -> str:
        """``index`` with this key leading (migration 0014)."""
        return f"{_PREFIX}{self.column}_{index.removeprefix(_PREFIX)}"

    def ranges(self) -> list[tuple[str, dict[str, Any]]]:
        """The ``WHERE`` terms of each range of the key with their parameters:
        its values as a list, and NULL apart."""
        found = [v for v in self.values if v is not None]
        out = [(f" AND {self.column} IN :keys", {"keys": found})] if found else []
        if None in self.values:
            out.append((f" AND {self.column} IS NULL", {}))
        return out

    def also_sql(self) -> str:
        """The ``WHERE`` term of ``also`` (none without it)."""
        if self.also is None:
            return ""
        column, values = self.also
        terms = [f"{column} IN :also"] if any(v is not None for v in values) else []
        if None in values:
            terms.append(f"{column} IS NULL")
        return " AND (" + " OR ".join(terms) + ")"


def _query(sql: str, within: Within | None = None) -> TextClause:
    """``sql`` with its ``:now`` bound as a stored moment, and its lists."""
    query = text(sql)
    if ":now" in sql:
        query = query.bindparams(bindparam("now", type_=UTCDateTime()))
    if ":margin_floor" in sql:
        query = query.bindparams(bindparam("margin_floor", type_=UTCDateTime()))
    if ":keys" in sql:
        query = query.bindparams(bindparam("keys", expanding=True))
    if within is not None and within.also is not None and ":also" in sql:
        found = [v for v in within.also[1] if v is not None]
        query = query.bindparams(bindparam("also", value=found, expanding=True))
    return query


def margin_floor(conn: Connection, params: dict[str, Any]) -> dict[str, Any]:
    """``params`` with ``margin_floor``: ``now`` less the largest margin an
    active schedule has (its margin bucket's upper edge, one index probe of
    ``ix_dgs_schedules_margin_window``). A schedule not in ERROR has its
    ``error_at`` at ``now`` or later, and its ``should_start_by`` is
    ``error_at`` less its margin: none comes before ``margin_floor``; nor
    does an idle one's ``warning_at`` (``error_at`` less its expected run,
    which the margin is not below: ``core.timing.start_margin``)."""
    if "margin_floor" in params or "now" not in params:
        return params
    table = _from("ix_dgs_schedules_margin_window", conn.dialect.name)
    found = conn.exec_driver_sql(
        f"SELECT max(margin_bucket) FROM {table} WHERE active AND kind <> 'check'"
    ).scalar_one()
    if found is None:
        return {**params, "margin_floor": params["now"]}
    widest = margin_bucket_edges(int(found))[1]
    now = utc_from_db(params["now"])
    assert now is not None
    return {**params, "margin_floor": now - timedelta(seconds=widest)}


def _bound(conn: Connection, params: dict[str, Any], parts: Sequence[Part]) -> dict[str, Any]:
    """``params`` with :func:`margin_floor` when one of ``parts`` reads it."""
    if any(":margin_floor" in p.where for p in parts):
        return margin_floor(conn, params)
    return params


def _from(index: str, dialect: str) -> str:
    """``dgs_schedules``, on SQLite with the index the part reads (its planner
    does not pick a partial index over a scan by itself)."""
    return f"dgs_schedules INDEXED BY {index}" if dialect == "sqlite" else "dgs_schedules"


def count_within(conn: Connection, within: Within | None) -> int:
    """How many active schedules (not deferred checks) are ``within`` (``None``:
    all of them): an index-only count."""
    return count_up_to(conn, {}, ALL_LEVELS, None, within)


def counts_by_part(
    conn: Connection, params: dict[str, Any], levels: set[int], within: Within | None = None
) -> dict[tuple[str, str], int]:
    """The counts of each condition's parts (one grouped query each, over its
    index, per range of the key); OK as every selected schedule less the
    ERROR and WARNING ones."""
    dialect = conn.dialect.name
    counts: dict[tuple[str, str], int] = {}
    ranges = [("", {})] if within is None else within.ranges()
    also = "" if within is None else within.also_sql()
    # OK: what the others leave
    parts = [p for p in PARTS if p.level != _OK and (p.level in levels or _OK in levels)]
    params = _bound(conn, params, parts)
    for part in parts:
        table = _from(part.index if within is None else within.index(part.index), dialect)
        for terms, keys in ranges:
            sql = (
                f"SELECT {part.reason}, count(*) FROM {table} "
                f"WHERE active AND kind <> 'check' AND {part.where}{terms}{also} "
                f"GROUP BY {part.reason}"
            )
            for why, n in conn.execute(_query(sql, within), {**params, **keys}):
                key = (Level(part.level).name, why or "")
                counts[key] = counts.get(key, 0) + n
    ok = count_within(conn, within) - sum(counts.values()) if _OK in levels else 0
    counts = {k: n for k, n in counts.items() if int(Level[k[0]]) in levels}
    if ok:
        counts[(Level.OK.name, Reason.OK.value)] = ok
    return counts


def count_up_to(
    conn: Connection,
    params: dict[str, Any],
    levels: set[int] | frozenset[int],
    at_most: int | None,
    within: Within | None = None,
) -> int:
    """How many rows :func:`rows_by_part` gives for ``levels``, at most
    ``at_most`` (``None``: all): every level as one count of the selected
    schedules, else each part of the levels, per range of the key; with a
    bound, each read with a ``LIMIT`` of what is still wanted (index-only
    reads that stop there)."""
    dialect = conn.dialect.name
    ranges = [("", {})] if within is None else within.ranges()
    also = "" if within is None else within.also_sql()
    if levels >= ALL_LEVELS:
        every = "ix_dgs_schedules_can_start" if within is None else within.index(PARTS[0].index)
        reads = [(_from(every, dialect), "")]
    else:
        parts = [p for p in PARTS if p.level in levels]
        params = _bound(conn, params, parts)
        reads = [
            (
                _from(p.index if within is None else within.index(p.index), dialect),
                f" AND {p.where}",
            )
            for p in parts
        ]
    total = 0
    for table, where in reads:
        for terms, keys in ranges:
            if at_most is not None and total >= at_most:
                return at_most
            selected = f"FROM {table} WHERE active AND kind <> 'check'{where}{terms}{also}"
            sql = (
                f"SELECT count(*) {selected}"
                if at_most is None
                else f"SELECT count(*) FROM (SELECT 1 {selected} LIMIT {at_most - total}) AS c"
            )
            total += int(conn.execute(_query(sql, within), {**params, **keys}).scalar_one())
    return total if at_most is None else min(total, at_most)


def rows_by_part(
    conn: Connection,
    params: dict[str, Any],
    levels: set[int],
    count: int | None,
    within: Within | None = None,
    columns: Sequence[str] = SCHEDULE_COLUMNS,
) -> Iterator[Sequence[Any]]:
    """The rows (the values of ``columns``, the name first) of the selected
    levels in urgency order, at most ``count`` (``None``: every one,
    streamed): each part (within each value of the key) read in its index's
    order and merged as it streams, a level read only while rows are still
    wanted. Nothing is sorted but the rows of a part whose index is not in
    its order: the fixed ERROR ones, and the WARNING ones by time (within
    the largest margin, or a run in progress)."""
    given = 0
    width = len(columns)
    params = _bound(conn, params, [p for p in PARTS if p.level in levels])
    for level in (_ERROR, _WARNING, _OK):
        if level not in levels or (count is not None and given >= count):
            continue
        limit = "" if count is None else f" LIMIT {count - given}"
        parts = []
        for part in PARTS:
            if part.level == level:
                dialect = conn.dialect.name
                for sql, key in _part_reads(part, within, dialect, limit, ", ".join(columns)):
                    options = {"yield_per": STREAM_BATCH_ROWS} if count is None else {}
                    query = _query(sql, within)
                    found = conn.execution_options(**options).execute(query, {**params, **key})
                    parts.append(found)
        for values in heapq.merge(*parts, key=lambda values: _urgency(values, width)):
            if count is not None and given >= count:
                break
            given += 1
            yield values[:width]


def _part_reads(
    part: Part, within: Within | None, dialect: str, limit: str, columns: str
) -> list[tuple[str, dict[str, Any]]]:
    """The ordered reads of one part: one over the fleet, or, within a key,
    one ``UNION ALL`` of a range per value that the database merges in
    order, each range read only while wanted (SQLite: arms without an order
    of their own, their index giving it, at most :data:`SQLITE_ARMS` a
    statement; PostgreSQL: each ordered by the key first, so that a NULL
    range is in its index's order too)."""
    moment = "error_at" if part.level == _ERROR else "should_start_by"
    # Only a fixed ERROR (an invalid spec) may have no moment: first.
    fixed = part is PARTS[0]
    order = f"{moment} IS NOT NULL, {moment}, name" if fixed else f"{moment}, name"
    select = f"SELECT {columns}, {moment} AS urgent_at FROM "
    where = f"WHERE active AND kind <> 'check' AND {part.where}"
    if within is None:
        return [(f"{select}{_from(part.index, dialect)} {where} ORDER BY {order}{limit}", {})]
    table = _from(within.index(part.index), dialect)
    column = within.column
    where += within.also_sql()
    arms: list[tuple[str, dict[str, Any]]] = []
    for i, value in enumerate(within.values):
        term = f"{column} IS NULL" if value is None else f"{column} = :key{i}"
        arms.append(
            (f"{select}{table} {where} AND {term}", {} if value is None else {f"key{i}": value})
        )
    if dialect == "sqlite":  # NULLs sort first there: no fixed ERROR comes later
        chunks = [arms[lo : lo + SQLITE_ARMS] for lo in range(0, len(arms), SQLITE_ARMS)]
        return [_union(chunk, "", f" ORDER BY urgent_at, name{limit}") for chunk in chunks]
    arms = [(f"({sql} ORDER BY {column}, {order}{limit})", keys) for sql, keys in arms]
    urgent = "urgent_at IS NOT NULL, urgent_at, name" if fixed else "urgent_at, name"
    return [_union(arms, "SELECT * FROM (", f") AS arms ORDER BY {urgent}{limit}")] if arms else []


def _union(
    arms: list[tuple[str, dict[str, Any]]], head: str, tail: str
) -> tuple[str, dict[str, Any]]:
    """``arms`` as one ``UNION ALL`` statement between ``head`` and ``tail``."""
    keys = {k: v for _, params in arms for k, v in params.items()}
    return head + " UNION ALL ".join(sql for sql, _ in arms) + tail, keys


def _urgency(values: Sequence[Any], width: int) -> tuple[bool, Any, str]:
    """The order of a part's row (``width`` columns, the name first, then
    its moment) within its level: without a moment first, then by the
    moment, then by name."""
    at = values[width]
    return (at is not None, at, values[0])
