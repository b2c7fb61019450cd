"""Run statistics written over a bulk-loaded fleet by bucket of rows.

A benchmark fleet is named ``proj.scrape@srcNNNNNNNN`` (the source's number in
its last 8 characters). Its rows are grouped into ``buckets`` by that number
modulo ``buckets``; every row of a bucket gets the same statistics, and the
kept columns the store computes from them (computed once per bucket by the
caller, with the store's own :func:`~celery_dgs.core.kept_condition.kept_times`
and :func:`~celery_dgs.store.kept.kept_values`). The buckets go into a small
temporary table and one set-based ``UPDATE dgs_schedules ... FROM`` writes
them all (on PostgreSQL in bucket order): minutes at 10M where a per-row
``UPDATE`` and the migration's backfill took hours. Used by
:mod:`benchmarks.fleet_scale` (the seed-001 mix) and
:mod:`benchmarks.status_scale` (the status fleet).
"""

from __future__ import annotations

import time
from collections.abc import Mapping, Sequence
from datetime import datetime
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from celery_dgs.store.sql import SqlScheduleStore

#: The temporary table of the buckets (created and dropped in one transaction).
BUCKET_TABLE = "dgs_fleet_buckets"
#: Rows whose kept columns the backfill's timing writes again.
BACKFILL_SLICE = 100_000
#: SQLite's page cache during the ``UPDATE`` (KiB): at 1M rows its random
#: writes to some 20 indexes take several times as long in the default 2 MiB.
SQLITE_CACHE_KIB = 512 * 1024


def name_of(i: int) -> str:
    from .status_scale import TASK

    return f"{TASK}@src{i:08d}"


def buckets_held(store: SqlScheduleStore, buckets: int) -> int:
    """The buckets that hold a row: the highest source number plus one, at most
    ``buckets`` (a fleet smaller than ``buckets`` fills only its first ones)."""
    with store.engine.connect() as conn:
        highest = conn.exec_driver_sql("SELECT max(name) FROM dgs_schedules").scalar_one()
    return buckets if highest is None else min(buckets, int(highest[-8:]) + 1)


def update_by_bucket(
    store: SqlScheduleStore,
    buckets: int,
    rows: Sequence[Mapping[str, Any]],
    columns: Mapping[str, Any],
    sets: Mapping[str, str],
) -> None:
    """Write ``rows`` (one a bucket: its number ``k``, its ``columns`` and every
    kept column) over the rows of their buckets, in one transaction: the
    schedules' columns ``sets`` (column: an SQL expression, whose bucket
    columns are ``b."name"``) and every kept column. A bucket without a row
    in ``rows`` leaves its schedules as they are. ``columns``: each bucket
    column's SQL type."""
    from sqlalchemy import Column, Integer, MetaData, Table, insert

    from celery_dgs.store.kept import KEPT_COLUMNS
    from celery_dgs.store.models import ScheduleRow

    kept_types = ScheduleRow.__table__.c
    table = Table(
        BUCKET_TABLE,
        MetaData(),
        Column("k", Integer, primary_key=True),
        *(Column(name, kind) for name, kind in columns.items()),
        *(Column(c, kept_types[c].type) for c in KEPT_COLUMNS),
    )
    with store.engine.begin() as conn:
        pg = conn.dialect.name == "postgresql"
        if not pg:  # the indexes' pages the UPDATE rewrites at random, held in memory
            cache = conn.exec_driver_sql("PRAGMA cache_size").scalar_one()
            conn.exec_driver_sql(f"PRAGMA cache_size = {-SQLITE_CACHE_KIB}")
        table.create(conn)
        if rows:
            conn.execute(insert(table), list(rows))
        assignments = [f"{column} = {value}" for column, value in sets.items()]
        assignments += [f'{c} = b."{c}"' for c in KEPT_COLUMNS]
        if pg:
            # The rows in bucket order, not the heap's: a bucket's rows share
            # their kept values, so the kept columns' indexes take their new
            # entries side by side (1.6x as fast at 1M). Nested loops keep the
            # sorted rows' order (a hash join of 10M rows spills in batches).
            conn.exec_driver_sql(f"ANALYZE {BUCKET_TABLE}")
            conn.exec_driver_sql("SET LOCAL enable_hashjoin = off")
            conn.exec_driver_sql("SET LOCAL enable_mergejoin = off")
            conn.exec_driver_sql(
                f"UPDATE dgs_schedules AS s SET {', '.join(assignments)} "
                "FROM (SELECT ctid AS tid, "
                f"CAST(right(name, 8) AS integer) %% {buckets} AS k "  # %%: psycopg's placeholders
                f"FROM dgs_schedules ORDER BY 2, 1) AS o, {BUCKET_TABLE} AS b "
                "WHERE b.k = o.k AND s.ctid = o.tid"
            )
        else:
            conn.exec_driver_sql(
                f"UPDATE dgs_schedules AS s SET {', '.join(assignments)} FROM {BUCKET_TABLE} "
                f"AS b WHERE b.k = CAST(substr(s.name, -8) AS INTEGER) % {buckets}"
            )
        table.drop(conn)
        if not pg:
            conn.exec_driver_sql(f"PRAGMA cache_size = {cache}")


def backfill_us(store: SqlScheduleStore, n: int, now: datetime) -> float:
    """µs per row of the migration's backfill of the kept columns
    (:func:`~celery_dgs.store.sql_kept.backfill_kept`), over a slice of the
    first ``BACKFILL_SLICE`` names (their kept columns emptied, then written
    again at ``now``)."""
    from celery_dgs.store.sql_kept import backfill_kept

    size = min(BACKFILL_SLICE, n)
    with store.engine.begin() as conn:
        conn.exec_driver_sql(
            f"UPDATE dgs_schedules SET kept_level = NULL WHERE name <= '{name_of(size - 1)}'"
        )
    with store.engine.begin() as conn:
        start = time.perf_counter()
        done = backfill_kept(conn, now)
        took = time.perf_counter() - start
    assert done == size, done
    return took / size * 1e6
