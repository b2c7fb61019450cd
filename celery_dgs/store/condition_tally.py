"""The condition tally: how many active schedules are in each (level,
reason), kept by the database as rows change, so the fleet's counts at any
moment cost the rows that changed lately, not a pass over the fleet.

A schedule row's condition is a step function of time (the comparison of
:func:`~celery_dgs.core.kept_condition.condition_at`, as
:data:`.sql_status.LEVEL_AT` states it): its kept level and reason until
``warning_at`` (when that comes before ``error_at``), then WARNING with
``warning_reason``, then ERROR with ``error_reason`` after ``error_at``; a
kept ERROR (``kept_level = 2``) stays. Each row adds its steps to the
tally: ``+1`` to its kept (level, reason) from the start of time (``at =
0``), and at each moment a ``-1`` to the condition it leaves and a ``+1``
to the one it enters, the moment rounded down to :data:`BUCKET_S` seconds
(``at``, in seconds since the epoch).

Triggers on ``dgs_schedules`` write a changed row's steps to
``dgs_condition_deltas`` as it changes (its old steps taken away, its new
ones added, netted): in the transaction of the change, append-only, so
concurrent writers never wait on each other there. PostgreSQL: one
statement-level trigger per event over its transition tables (a bulk
statement nets its rows in one ``INSERT``); SQLite: a row-level trigger
per event. :func:`fold` moves the deltas into ``dgs_condition_tally`` (by
``at``, level and reason; every bucket more than :data:`FOLD_MARGIN_S` old
into ``at = 0``, that moment kept as the tally's horizon), beat's leader
every :data:`FOLD_INTERVAL_S` and the bulk writes at their end.

The counts at ``now`` (:func:`counts_at`), in one statement (one snapshot):
the tally's and the deltas' steps in buckets before the one ``now`` is in,
plus, for the rows with a moment in that bucket before ``now`` (two index
ranges: ``ix_dgs_schedules_warning_at``, ``ix_dgs_schedules_error_at``),
their condition at ``now`` less their condition at the bucket's start. A
``now`` before the horizon is not counted from the tally (the caller counts
the rows).

A migration that recreates ``dgs_schedules`` on SQLite (alembic's batch
mode) drops its triggers: it must create them again (:func:`create_triggers`).
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from datetime import datetime, timedelta, timezone
from typing import Any

from sqlalchemy import Connection, bindparam, text

from .kept import KEPT_COLUMNS
from .models import UTCDateTime

#: Seconds per bucket of the steps' moments: the rows read at each count are
#: those with a moment in the current bucket, before ``now``.
BUCKET_S = 15
#: Seconds between beat's folds of the deltas into the tally.
FOLD_INTERVAL_S = 10.0
#: A fold leaves the last this many seconds' buckets apart: a reader whose
#: clock is that far behind the folder's still counts from the tally.
FOLD_MARGIN_S = 600
#: The tally's row holding the moment before which the last fold put every
#: step into ``at = 0`` (its ``n``): ``at``, ``level``, ``reason``.
_HORIZON_KEY = (-1, -1, "")
_HORIZON = (-1, "")
#: pg_advisory_xact_lock key held while folding ("dgstaly" in ASCII).
PG_FOLD_LOCK_KEY = 0x64677374616C79

_TALLY, _DELTAS = "dgs_condition_tally", "dgs_condition_deltas"
#: The columns of ``dgs_schedules`` a row's steps depend on: whether it is an
#: active schedule, and its kept condition and moments.
STEP_COLUMNS = (
    "active",
    "kind",
    *KEPT_COLUMNS[KEPT_COLUMNS.index("kept_level") : KEPT_COLUMNS.index("error_reason") + 1],
)
_TRIGGER_PREFIX = "dgs_condition_steps"


def bucket_of(moment: datetime) -> int:
    """The start of ``moment``'s bucket, in seconds since the epoch."""
    return math.floor(moment.timestamp() / BUCKET_S) * BUCKET_S


def _bucket_sql(dialect: str, moment: str) -> str:
    if dialect == "sqlite":  # the stored naive UTC text; %s: whole seconds
        return f"(CAST(strftime('%s', {moment}) AS INTEGER) / {BUCKET_S}) * {BUCKET_S}"
    return f"(floor(extract(epoch FROM {moment}) / {BUCKET_S}) * {BUCKET_S})::bigint"


def steps_sql(dialect: str, col: Callable[[str], str], sign: int, source: str = "") -> str:
    """The steps (``at``, ``level``, ``reason``, ``n``) of the rows of
    ``source`` (``""``: the one row a row-level trigger names), each column
    read as ``col(name)``, times ``sign``: a ``UNION ALL`` of five
    ``SELECT``s."""
    kl, kr = col("kept_level"), f"coalesce({col('kept_reason')}, '')"
    w, wr = col("warning_at"), f"coalesce({col('warning_reason')}, '')"
    e, er = col("error_at"), f"coalesce({col('error_reason')}, '')"
    live = f"{col('active')} AND {col('kind')} <> 'check'"
    moving = f"{live} AND ({kl} IS NULL OR {kl} < 2)"
    warns = f"{moving} AND {w} IS NOT NULL AND ({e} IS NULL OR {w} < {e})"
    errs = f"{moving} AND {e} IS NOT NULL"
    level = f"coalesce({kl}, 2)"
    warned = f"{w} IS NOT NULL AND {w} < {e}"  # WARNING just before error_at
    before_error = (
        f"CASE WHEN {warned} THEN 1 ELSE {level} END, CASE WHEN {warned} THEN {wr} ELSE {kr} END"
    )
    at_w, at_e = _bucket_sql(dialect, w), _bucket_sql(dialect, e)
    minus = -sign
    arms = (
        f"SELECT 0, {level}, {kr}, {sign}{source} WHERE {live}",
        f"SELECT {at_w}, {level}, {kr}, {minus}{source} WHERE {warns}",
        f"SELECT {at_w}, 1, {wr}, {sign}{source} WHERE {warns}",
        f"SELECT {at_e}, {before_error}, {minus}{source} WHERE {errs}",
        f"SELECT {at_e}, 2, {er}, {sign}{source} WHERE {errs}",
    )
    return " UNION ALL ".join(arms)


def _named(steps: str) -> str:
    """``steps`` with its columns named ``at``, ``level``, ``reason``, ``n``
    (a first arm that gives no row: both databases name a ``UNION``'s
    columns by its first arm)."""
    return f"SELECT 0 AS at, 0 AS level, '' AS reason, 0 AS n WHERE 1 = 0 UNION ALL {steps}"


def _netted_insert(steps: str) -> str:
    """``INSERT`` of ``steps`` into the deltas, netted (no zero rows)."""
    return (
        f"INSERT INTO {_DELTAS} (at, level, reason, n) "
        f"SELECT at, level, reason, sum(n) FROM ({_named(steps)}) AS s "
        "GROUP BY at, level, reason HAVING sum(n) <> 0"
    )


def _of(row: str) -> Callable[[str], str]:
    """A row-level trigger's column reader: ``NEW.kind``, ``OLD.kind``."""
    return lambda column: f"{row}.{column}"


def trigger_ddl(dialect: str) -> list[str]:
    """The statements that create the triggers keeping the deltas."""
    if dialect == "sqlite":
        # a row's steps as they are (one row: a bucket's steps rarely meet);
        # an update's netted, and only when a column they read changed
        changed = " OR ".join(f"OLD.{c} IS NOT NEW.{c}" for c in STEP_COLUMNS)
        both = (
            f"{steps_sql('sqlite', _of('OLD'), -1)} UNION ALL {steps_sql('sqlite', _of('NEW'), 1)}"
        )
        insert = f"INSERT INTO {_DELTAS} (at, level, reason, n) "
        bodies = (
            ("insert", "INSERT", insert + steps_sql("sqlite", _of("NEW"), 1)),
            ("update", f"UPDATE OF {', '.join(STEP_COLUMNS)}", None),
            ("delete", "DELETE", insert + steps_sql("sqlite", _of("OLD"), -1)),
        )
        out = []
        for name, event, body in bodies:
            when = f" WHEN {changed}" if body is None else ""
            out.append(
                f"CREATE TRIGGER {_TRIGGER_PREFIX}_{name} AFTER {event} ON dgs_schedules"
                f"{when} BEGIN {body or _netted_insert(both)}; END"
            )
        return out
    new = steps_sql("postgresql", lambda c: c, 1, " FROM new_rows")
    old = steps_sql("postgresql", lambda c: c, -1, " FROM old_rows")
    function = (
        f"CREATE FUNCTION {_TRIGGER_PREFIX}() RETURNS trigger LANGUAGE plpgsql AS $$ BEGIN "
        f"IF TG_OP = 'INSERT' THEN {_netted_insert(new)}; "
        f"ELSIF TG_OP = 'UPDATE' THEN {_netted_insert(f'{old} UNION ALL {new}')}; "
        f"ELSIF TG_OP = 'DELETE' THEN {_netted_insert(old)}; "
        f"ELSE DELETE FROM {_TALLY}; DELETE FROM {_DELTAS}; "  # TRUNCATE
        "END IF; RETURN NULL; END $$"
    )
    tables = {"INSERT": "NEW TABLE AS new_rows", "DELETE": "OLD TABLE AS old_rows"}
    tables["UPDATE"] = "OLD TABLE AS old_rows NEW TABLE AS new_rows"
    out = [function]
    for event, referencing in tables.items():
        out.append(
            f"CREATE TRIGGER {_TRIGGER_PREFIX}_{event.lower()} AFTER {event} ON dgs_schedules "
            f"REFERENCING {referencing} FOR EACH STATEMENT EXECUTE FUNCTION {_TRIGGER_PREFIX}()"
        )
    out.append(
        f"CREATE TRIGGER {_TRIGGER_PREFIX}_truncate AFTER TRUNCATE ON dgs_schedules "
        f"FOR EACH STATEMENT EXECUTE FUNCTION {_TRIGGER_PREFIX}()"
    )
    return out


def drop_trigger_ddl(dialect: str) -> list[str]:
    """The statements that drop what :func:`trigger_ddl` creates."""
    events = ("insert", "update", "delete") + (() if dialect == "sqlite" else ("truncate",))
    out = [f"DROP TRIGGER IF EXISTS {_TRIGGER_PREFIX}_{e}" for e in events]
    if dialect != "sqlite":
        out = [f"{sql} ON dgs_schedules" for sql in out]
        out.append(f"DROP FUNCTION IF EXISTS {_TRIGGER_PREFIX}()")
    return out


def create_triggers(conn: Connection) -> None:
    for sql in trigger_ddl(conn.dialect.name):
        conn.exec_driver_sql(sql)


def drop_triggers(conn: Connection) -> None:
    for sql in drop_trigger_ddl(conn.dialect.name):
        conn.exec_driver_sql(sql)


def rebuild(conn: Connection) -> None:
    """The tally from every row anew (the deltas emptied): the migration's
    fill, and a repair."""
    dialect = conn.dialect.name
    steps = steps_sql(dialect, lambda c: c, 1, " FROM dgs_schedules")
    conn.exec_driver_sql(f"DELETE FROM {_DELTAS}")
    conn.exec_driver_sql(f"DELETE FROM {_TALLY}")
    conn.exec_driver_sql(
        f"INSERT INTO {_TALLY} (at, level, reason, n) SELECT at, level, reason, sum(n) "
        f"FROM ({_named(steps)}) AS s GROUP BY at, level, reason "
        "HAVING sum(n) <> 0"
    )


def _condition_at(moment: str) -> tuple[str, str]:
    """A row's level and reason at ``moment``, as :data:`.sql_status.LEVEL_AT`
    and ``REASON_AT`` state them."""
    level = (
        f"CASE WHEN kept_level = 2 THEN 2 WHEN error_at < {moment} THEN 2 "
        f"WHEN warning_at < {moment} THEN 1 ELSE coalesce(kept_level, 2) END"
    )
    reason = (
        f"coalesce(CASE WHEN kept_level = 2 THEN kept_reason WHEN error_at < {moment} "
        f"THEN error_reason WHEN warning_at < {moment} THEN warning_reason "
        "ELSE kept_reason END, '')"
    )
    return level, reason


_COLUMNS = "name, kept_level, kept_reason, warning_at, warning_reason, error_at, error_reason"
_LIVE = "active AND kind <> 'check'"
_NOW_LEVEL, _NOW_REASON = _condition_at(":now")
_START_LEVEL, _START_REASON = _condition_at(":bucket_start")
_COUNTS_SQL = (
    f"WITH moving AS ("
    f"SELECT {_COLUMNS} FROM dgs_schedules WHERE {_LIVE} "
    "AND warning_at >= :bucket_start AND warning_at < :now "
    f"UNION SELECT {_COLUMNS} FROM dgs_schedules WHERE {_LIVE} "
    "AND error_at >= :bucket_start AND error_at < :now) "
    "SELECT level, reason, sum(n) FROM ("
    f"SELECT level, reason, n FROM {_TALLY} WHERE at < :bucket "
    f"UNION ALL SELECT level, reason, n FROM {_DELTAS} WHERE at < :bucket "
    f"UNION ALL SELECT {_NOW_LEVEL}, {_NOW_REASON}, 1 FROM moving "
    f"UNION ALL SELECT {_START_LEVEL}, {_START_REASON}, -1 FROM moving"
    ") AS c GROUP BY level, reason"
)
_COUNTS = text(_COUNTS_SQL).bindparams(
    bindparam("now", type_=UTCDateTime()), bindparam("bucket_start", type_=UTCDateTime())
)


def counts_at(conn: Connection, now: datetime) -> dict[tuple[int, str], int] | None:
    """How many active schedules (not deferred checks) are in each (level,
    reason) at ``now``, those with none left out; ``None`` when ``now`` is
    before what the last fold put into ``at = 0`` (a clock more than
    :data:`FOLD_MARGIN_S` behind the folder's: count the rows instead)."""
    bucket = bucket_of(now)
    start = datetime.fromtimestamp(bucket, timezone.utc)
    found = conn.execute(_COUNTS, {"now": now, "bucket_start": start, "bucket": bucket})
    counts = {(int(level), reason): int(n) for level, reason, n in found if n}
    if counts.pop(_HORIZON, 0) > bucket:
        return None
    return counts


def time_to_error_at(
    conn: Connection, now: datetime, bounds: Sequence[timedelta]
) -> list[int] | None:
    """``time_to_error_counts`` at ``now`` from the tally: the schedules in
    ERROR (:func:`counts_at`), then those entering it before ``now`` plus
    each of ``bounds`` (ascending), then the rest. A schedule not in ERROR
    has one step into ERROR at its ``error_at``'s bucket, never folded (the
    future is not): the steps of the buckets wholly within a range are
    summed; the rows with ``error_at`` in the bucket ``now`` is in, or in a
    bucket a range's end cuts, are read (index ranges of 15 s) and placed
    exactly. ``None`` when :func:`counts_at` is (count the rows)."""
    counts = counts_at(conn, now)
    if counts is None:
        return None
    ends = [now + bound for bound in bounds]
    first = bucket_of(now)
    edges = sorted({first, *(bucket_of(end) for end in ends)})
    moments: dict[str, datetime] = {f"e{i}": end for i, end in enumerate(ends)}
    for j, edge in enumerate(edges):  # the rows of each edge bucket, from now on
        moments[f"s{j}"] = max(now, datetime.fromtimestamp(edge, timezone.utc))
        moments[f"t{j}"] = datetime.fromtimestamp(edge + BUCKET_S, timezone.utc)
    buckets = {f"b{i}": bucket_of(end) for i, end in enumerate(ends)}
    # the range a moment is in: 1 before the first end, ..., the last after them
    ranges = "CASE " + " ".join(f"WHEN {{m}} < :{{p}}{i} THEN {i + 1}" for i in range(len(ends)))
    ranges = f"{ranges} ELSE {len(ends) + 1} END" if ends else "1"
    whole = ranges.format(m="at", p="b")
    cut = " ".join(  # one range of ix_dgs_schedules_error_at per edge bucket
        f"UNION ALL SELECT {ranges.format(m='error_at', p='e')}, 1 FROM dgs_schedules "
        f"WHERE {_LIVE} AND error_at >= :s{j} AND error_at < :t{j} AND kept_level < 2"
        for j in range(len(edges))
    )
    steps = f"level = 2 AND at > {first} AND at NOT IN ({', '.join(map(str, edges))})"
    sql = (
        f"SELECT k, sum(n) FROM ("
        f"SELECT {whole} AS k, n FROM {_TALLY} WHERE {steps} "
        f"UNION ALL SELECT {whole}, n FROM {_DELTAS} WHERE {steps} {cut}"
        ") AS c GROUP BY k"
    )
    query = text(sql).bindparams(*(bindparam(k, type_=UTCDateTime()) for k in moments))
    params: dict[str, Any] = {**moments, **buckets}
    found = [0] * (len(bounds) + 2)
    found[0] = sum(n for (level, _), n in counts.items() if level == 2)
    for k, n in conn.execute(query, params):
        found[int(k)] += int(n)
    return found


def fold(conn: Connection, now: datetime) -> int:
    """Move the deltas into the tally, with every bucket more than
    :data:`FOLD_MARGIN_S` before ``now`` put into ``at = 0`` (and that
    moment kept: :func:`counts_at` does not count an earlier moment from
    the tally); drop the tally's zero rows. Returns the delta rows moved.
    In a write transaction of its own; folds that overlap take turns."""
    bucket = bucket_of(now - timedelta(seconds=FOLD_MARGIN_S))
    if conn.dialect.name == "sqlite":  # the write lock is held from BEGIN IMMEDIATE
        moved = conn.exec_driver_sql(f"SELECT count(*) FROM {_DELTAS}").scalar_one()
        if moved:
            _sqlite_add(conn, f"SELECT at, level, reason, n FROM {_DELTAS}", bucket)
            conn.exec_driver_sql(f"DELETE FROM {_DELTAS}")
        past = f"SELECT at, level, reason, n FROM {_TALLY} WHERE at > 0 AND at < :b"
        _sqlite_add(conn, past, bucket)
        conn.execute(text(f"DELETE FROM {_TALLY} WHERE at > 0 AND at < :b"), {"b": bucket})
        latest = "max(n, excluded.n)"
    else:
        conn.execute(text("SELECT pg_advisory_xact_lock(:k)"), {"k": PG_FOLD_LOCK_KEY})
        moved = _pg_move(conn, f"DELETE FROM {_DELTAS} RETURNING at, level, reason, n", bucket)
        _pg_move(
            conn,
            f"DELETE FROM {_TALLY} WHERE at > 0 AND at < :b RETURNING 0, level, reason, n",
            bucket,
        )
        latest = f"greatest({_TALLY}.n, excluded.n)"
    conn.exec_driver_sql(f"DELETE FROM {_TALLY} WHERE n = 0")
    at, level, reason = _HORIZON_KEY
    conn.execute(
        text(
            f"INSERT INTO {_TALLY} (at, level, reason, n) VALUES ({at}, {level}, '{reason}', :b) "
            f"ON CONFLICT (at, level, reason) DO UPDATE SET n = {latest}"
        ),
        {"b": bucket},
    )
    return int(moved)


def _sqlite_add(conn: Connection, steps: str, bucket: int) -> None:
    conn.execute(
        text(
            f"INSERT INTO {_TALLY} (at, level, reason, n) "
            "SELECT CASE WHEN at < :b THEN 0 ELSE at END AS a, level, reason, sum(n) "
            f"FROM ({steps}) WHERE true GROUP BY a, level, reason "
            "ON CONFLICT (at, level, reason) DO UPDATE SET n = n + excluded.n"
        ),
        {"b": bucket},
    )


def _pg_move(conn: Connection, delete_returning: str, bucket: int) -> int:
    """Add what ``delete_returning`` removes to the tally (one statement: a
    delta committed meanwhile is either moved or left for the next fold)."""
    found = conn.execute(
        text(
            f"WITH moved(at, level, reason, n) AS ({delete_returning}), "
            f"added AS (INSERT INTO {_TALLY} AS t (at, level, reason, n) "
            "SELECT CASE WHEN at < :b THEN 0 ELSE at END, level, reason, sum(n) FROM moved "
            "GROUP BY 1, 2, 3 "
            "ON CONFLICT (at, level, reason) DO UPDATE SET n = t.n + excluded.n) "
            "SELECT count(*) FROM moved"
        ),
        {"b": bucket},
    )
    return int(found.scalar_one())
