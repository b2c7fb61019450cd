"""Writing the kept columns (:mod:`.kept`) in the SQL store.

* ORM writes (``sync``, a run's start and end, a pause, a run request, ...):
  :func:`keep_on_flush`, a ``before_flush`` hook of the store's write
  sessions, recomputes them on every new or changed schedule row, so they
  are written in the same transaction as the change.
* A run's start and end (:mod:`.sql_row_edit`, Core statements): the same
  computation, :func:`keep_row`, before the row's ``UPDATE``.
* Set-based writes (the runtime upsert): new rows get them in their
  ``INSERT``/``COPY`` (:class:`~.kept.NewRowTimes`); changed rows in their
  ``UPDATE``, computed first by :func:`kept_after_update` from the stored
  statistics and the new spec.
* Rows stored before the columns existed: :func:`backfill_kept` (the
  migration that adds them).
* Rows kept with another retry ladder: :func:`refresh_kept` at each row's
  ``updated_at`` with a new ``change_seq`` (:mod:`.sql_kept_ladder`).
"""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence
from datetime import datetime, timedelta
from typing import Any, cast

from sqlalchemy import Connection, Table, Update, bindparam, select, text, update
from sqlalchemy.orm import Session

from ..core.kept_condition import kept_times
from ..core.spec import ScheduleSpec
from ..core.timing import DEFAULT_RETRY_LADDER
from .convert import stats_of, utc
from .kept import KEPT_COLUMNS, kept_row, kept_values, times_of
from .loader import SCHEDULE_COLUMNS, SpecCache, ValueMemo, stored_schedule_from_values
from .models import ScheduleFields, ScheduleRow

_T = cast(Table, ScheduleRow.__table__)
#: ``Session.info`` key of the retry ladder the kept start times use.
RETRY_LADDER_KEY = "dgs_retry_ladder"
#: Names per ``WHERE name IN (...)`` read (SQLite limits bound parameters).
REFRESH_CHUNK = 500
#: Rows per batch of :func:`backfill_kept`.
BACKFILL_BATCH = 5_000


def update_kept(columns: Sequence[str]) -> Update:
    """The ``UPDATE`` of ``columns`` (kept columns) of the row ``b_name``."""
    return (
        update(_T)
        .where(_T.c.name == bindparam("b_name"))
        .values({column: bindparam(column) for column in columns})
    )


_UPDATE_KEPT = update_kept(KEPT_COLUMNS)
#: :data:`SCHEDULE_COLUMNS` with the kept ones read as NULL: they are what
#: is computed, and a migration may run this before the newest exist.
_COLUMNS = ", ".join(f"NULL AS {c}" if c in KEPT_COLUMNS else c for c in SCHEDULE_COLUMNS)
#: Parsed specs of the rows the hook recomputes (by shape: see :mod:`.loader`).
_SPECS = SpecCache()


def keep_on_flush(session: Session, _context: Any, _instances: Any) -> None:
    """``before_flush``: the kept columns of every new or changed schedule row,
    from its spec, statistics and declaration error, at its ``updated_at``."""
    ladder = session.info.get(RETRY_LADDER_KEY, DEFAULT_RETRY_LADDER)
    for row in (*session.new, *session.dirty):
        if not isinstance(row, ScheduleRow):
            continue
        if row not in session.new and not session.is_modified(row):
            continue
        keep_row(row, ladder)


def keep_row(row: ScheduleFields, retry_ladder: Sequence[timedelta]) -> None:
    """Set the kept columns of ``row`` (attached or not) from its spec,
    statistics and declaration error, at its ``updated_at``; a column already
    holding its value is not set."""
    spec, _ = _SPECS.parse(row.spec, row.task, row.configuration)
    times = kept_times(
        spec,
        stats_of(row),
        row.updated_at,
        declaration_error=row.declaration_error,
        retry_ladder=retry_ladder,
    )
    pool = None if spec is None else spec.pool
    for column, value in kept_values(times, pool).items():
        if getattr(row, column) != value:
            setattr(row, column, value)


def refresh_kept(
    conn: Connection,
    names: Sequence[str],
    now: datetime | None,
    *,
    retry_ladder: Sequence[timedelta] = DEFAULT_RETRY_LADDER,
    specs: SpecCache | None = None,
    change_seq: int | None = None,
    columns: Sequence[str] = KEPT_COLUMNS,
) -> None:
    """Recompute and write the kept columns of the rows ``names`` (in ``conn``'s
    transaction; the rows are already locked by the caller's write) at
    ``now`` (``None``: each row at its own ``updated_at``, the moment of its
    last write); with ``change_seq``, the rows get that ``change_seq`` too.
    ``columns``: the kept columns written (a migration names those its
    revision has)."""
    now = None if now is None else utc(now, "now")
    cache, memo = specs or SpecCache(), ValueMemo()
    statement = _UPDATE_KEPT if tuple(columns) == KEPT_COLUMNS else update_kept(columns)
    if change_seq is not None:
        statement = statement.values(change_seq=bindparam("b_seq"))
    seq = {} if change_seq is None else {"b_seq": change_seq}
    query = text(f"SELECT {_COLUMNS} FROM dgs_schedules WHERE name IN :names").bindparams(
        bindparam("names", expanding=True)
    )
    for i in range(0, len(names), REFRESH_CHUNK):
        chunk = list(names[i : i + REFRESH_CHUNK])
        batch = []
        for values in conn.execute(query, {"names": chunk}):
            stored = stored_schedule_from_values(values, cache, memo)
            pool = None if stored.spec is None else stored.spec.pool
            times = times_of(stored, now or stored.updated_at, retry_ladder)
            kept = kept_values(times, pool)
            batch.append({"b_name": stored.name, **seq, **{c: kept[c] for c in columns}})
        if batch:
            conn.execute(statement, batch)


def kept_after_update(
    conn: Connection,
    rows: Sequence[tuple[str, ScheduleSpec, datetime | None]],
    now: datetime,
    *,
    retry_ladder: Sequence[timedelta] = DEFAULT_RETRY_LADDER,
    specs: SpecCache | None = None,
) -> dict[str, tuple[Any, ...]]:
    """The kept columns (:data:`~.kept.KEPT_COLUMNS` order) of the stored rows
    ``rows`` (each its name, new spec and ``last_modified`` hint) once the
    runtime upsert writes them at ``now``: the new spec, the stored
    statistics with the hint (if any) as ``upstream_modified_at``, and no
    declaration error (the rows are locked by the caller)."""
    cache, memo = specs or SpecCache(), ValueMemo()
    query = text(f"SELECT {_COLUMNS} FROM dgs_schedules WHERE name IN :names").bindparams(
        bindparam("names", expanding=True)
    )
    wanted = {name: (spec, hint) for name, spec, hint in rows}
    kept: dict[str, tuple[Any, ...]] = {}
    names = list(wanted)
    for i in range(0, len(names), REFRESH_CHUNK):
        for values in conn.execute(query, {"names": names[i : i + REFRESH_CHUNK]}):
            stored = stored_schedule_from_values(values, cache, memo)
            spec, hint = wanted[stored.name]
            stats = stored.stats
            if hint is not None:
                stats = dataclasses.replace(stats, upstream_modified_at=hint)
            times = kept_times(spec, stats, now, retry_ladder=retry_ladder)
            kept[stored.name] = kept_row(times, spec.pool)
    return kept


def backfill_kept(conn: Connection, now: datetime, columns: Sequence[str] = KEPT_COLUMNS) -> int:
    """Write the kept ``columns`` of every row that has none yet
    (``kept_level`` NULL), a batch of names at a time; the number of rows
    written."""
    done = 0
    after = ""
    while True:
        stmt = (
            select(_T.c.name)
            .where(_T.c.kept_level.is_(None), _T.c.name > after)
            .order_by(_T.c.name)
            .limit(BACKFILL_BATCH)
        )
        names = list(conn.execute(stmt).scalars())
        if not names:
            return done
        refresh_kept(conn, names, now, columns=columns)
        done += len(names)
        after = names[-1]
