"""The status filters by pool and by a word of the task at scale:
``python -m benchmarks.status_filters [--schedules N] [--tasks N] [--pools N]
[--pg] [--sqlite-file PATH]``.

A SQLite file (PostgreSQL with ``--pg``) holds N runtime schedules written
as :mod:`benchmarks.status_scale` writes them, then spread by one
``UPDATE`` over ``--tasks`` task names (``proj.t000``...) and ``--pools``
pools (``pool1``...; one in every ``--pools`` with none given: the default
pool). Timed in this process, through the store (no page around it):

* the distinct task names (a loose scan of the task index);
* for a pool, the default pool, a word in one task's name, in ten, in
  every one, and a pool with a word: the count of what it selects, its
  first page of 50, its page 41, and its first page of OK rows, each read
  along the indexes with the pool or the task leading (migration 0014);
* the baseline in the same run: the same selection with a ``*`` name
  pattern, which is read as one query over every row and sorted, as the
  filters were read before those indexes.

Goal: each read of a filter <= 300 ms (the status page's p95). Exit status 1
when one is not met. ``--sqlite-file PATH`` keeps the fleet there and reuses
it when it exists (filled, spread and analysed only the first time).
"""

from __future__ import annotations

import argparse
import sys
import tempfile
import time
from collections.abc import Callable
from dataclasses import replace
from datetime import datetime, timezone
from pathlib import Path
from typing import TYPE_CHECKING, Any

from .common import log
from .status_scale import fill as fill_fleet

if TYPE_CHECKING:
    from celery_dgs.store.selection import Selection
    from celery_dgs.store.sql import SqlScheduleStore

GOAL_MS = 300.0
PAGE = 50


def spread(url: str, tasks: int, pools: int) -> None:
    """Every schedule's task and kept pool from its row's hash, then ``ANALYZE``
    (``VACUUM ANALYZE`` on PostgreSQL)."""
    from sqlalchemy import create_engine

    engine = create_engine(url)
    try:
        with engine.begin() as conn:
            sqlite = conn.dialect.name == "sqlite"
            key = "abs(rowid)" if sqlite else "abs(hashtext(name))"
            mod = "%" if sqlite else "%%"
            padded = f"'00' || ({key} {mod} {tasks})"
            conn.exec_driver_sql(
                f"UPDATE dgs_schedules SET task = 'proj.t' || substr({padded}, "
                f"length({padded}) - 2), pool = CASE WHEN {key} {mod} {pools} = 0 THEN NULL "
                f"ELSE 'pool' || ({key} {mod} {pools}) END"
            )
        with engine.connect().execution_options(isolation_level="AUTOCOMMIT") as conn:
            # as autovacuum does after a bulk write: until then an index-only
            # count visits the table's rows too
            sqlite = conn.dialect.name == "sqlite"
            conn.exec_driver_sql(
                "ANALYZE dgs_schedules" if sqlite else "VACUUM ANALYZE dgs_schedules"
            )
    finally:
        engine.dispose()


def timed(fn: Callable[[], Any]) -> tuple[float, Any]:
    start = time.perf_counter()
    out = fn()
    return (time.perf_counter() - start) * 1e3, out


def reads(store: SqlScheduleStore, now: datetime, sel: Selection) -> tuple[int, list[float]]:
    """How many ``sel`` selects, and the milliseconds of its count, its first
    page, its page 41 and its first page of OK rows."""
    count, counts = timed(lambda: store.condition_counts(now, sel))
    first, _ = timed(lambda: list(store.status_rows(now, sel, limit=PAGE)))
    deep, _ = timed(lambda: list(store.status_rows(now, sel, limit=PAGE, offset=40 * PAGE)))
    ok_sel = replace(sel, conditions=("ok",))
    ok, _ = timed(lambda: list(store.status_rows(now, ok_sel, limit=PAGE)))
    return sum(counts.values()), [count, first, deep, ok]


def measure(url: str, pools: int) -> list[str]:
    from celery_dgs.store.selection import Selection
    from celery_dgs.store.sql import SqlScheduleStore
    from celery_dgs.store.sql_status_keys import task_names

    store = SqlScheduleStore.open(url)
    now = datetime.now(timezone.utc)
    lines, met = [], True
    try:
        with store.engine.connect() as conn:
            ms, names = min(timed(lambda: task_names(conn)) for _ in range(3))
        lines.append(f"distinct task names: {len(names)} in {ms:.1f} ms (best of 3)")
        cases = (
            (f"a pool (1 in {pools})", Selection(pools=("pool3",))),
            ("the default pool (no pool given)", Selection(pools=("celery",))),
            ("a word in 1 task's name", Selection(task_word="t042")),
            ("a word in 10 tasks' names", Selection(task_word="t04")),
            (f"a word in all {len(names)} tasks' names", Selection(task_word="proj")),
            ("a pool and a word in 10 tasks' names", Selection(pools=("pool3",), task_word="t04")),
        )
        for label, selection in cases:
            for way, chosen in (("indexed", selection), ("baseline", None)):
                sel = chosen or replace(selection, patterns=("*",))
                selected, (count, first, deep, ok) = reads(store, now, sel)
                slowest = max(count, first, deep, ok)
                verdict = ""
                if way == "indexed":
                    met = met and slowest <= GOAL_MS
                    verdict = " — met" if slowest <= GOAL_MS else " — NOT MET"
                lines.append(
                    f"{label}, {way}: {selected:,} selected; count {count:.0f} ms, "
                    f"page 1 {first:.0f} ms, page 41 {deep:.0f} ms, OK page 1 {ok:.0f} ms{verdict}"
                )
    finally:
        store.close()
    lines.append("ALL MET" if met else "SOME GOALS NOT MET")
    return lines


def run(url: str, args: argparse.Namespace, filled: bool) -> list[str]:
    if not filled:
        log(f"filling {args.schedules:,} schedules")
        fill_fleet(url, args.schedules, datetime.now(timezone.utc))
        log(f"spreading them over {args.tasks} tasks and {args.pools} pools")
        spread(url, args.tasks, args.pools)
    head = f"{args.schedules:,} schedules, {args.tasks} tasks, {args.pools} pools"
    return [head, *measure(url, args.pools)]


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m benchmarks.status_filters",
        description=__doc__,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    parser.add_argument("--schedules", type=int, default=1_000_000)
    parser.add_argument("--tasks", type=int, default=300)
    parser.add_argument("--pools", type=int, default=8)
    parser.add_argument("--pg", action="store_true", help="PostgreSQL instead of SQLite")
    parser.add_argument("--sqlite-file", type=Path, help="the SQLite fleet's file, kept")
    args = parser.parse_args(sys.argv[1:] if argv is None else argv)
    with tempfile.TemporaryDirectory(prefix="dgs-filters-") as tmp:
        if args.pg:
            from tests.support.postgres import PostgresServer

            pg = PostgresServer().start()
            try:
                lines = run(pg.create_database("filters"), args, filled=False)
            finally:
                pg.stop()
        else:
            path = args.sqlite_file or Path(tmp) / "filters.db"
            lines = run(f"sqlite:///{path}", args, filled=path.exists())
    print("\n".join(lines))
    return 0 if lines[-1] == "ALL MET" else 1


if __name__ == "__main__":
    raise SystemExit(main())
