"""The fleet's counts by condition from the condition tally, against the
counts of the rows: ``python -m benchmarks.condition_tally [--schedules N]
[--repeats N] [--no-postgres]``.

A SQLite file and a PostgreSQL database of its own each hold N runtime
schedules written as :mod:`benchmarks.status_scale` writes them (24 periods
from 1 h to 24 h; 1 % never ran, 2 % failed last, about 17 % past their
deadline), so the triggers of migration 0017 keep their steps as the fill
writes them. Timed in this process, medians of ``--repeats`` reads at the
present moment:

* the baseline in the same run: the counts of the rows (each condition's
  partial index ranges and an index-only count of every active schedule,
  ``sql_status_parts.counts_by_part``), as ``status`` counted before the
  tally;
* the counts from the tally before beat's first fold (every step the fill
  wrote is still a delta), the fold itself, and the counts after it;
* the status page's counts by time to ERROR (``time_to_error_counts``, the
  page's bounds): from the rows (one grouped pass over an index of every
  active schedule, the baseline) and from the folded tally.

Both answers of each are compared (they must be equal). Goal: the counts,
and the counts by time to ERROR, after the fold <= 10 ms, whatever N. Exit
status 1 when not met (or when they differ).
"""

from __future__ import annotations

import argparse
import statistics
import sys
import tempfile
import time
from collections.abc import Callable
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

from .common import log
from .status_scale import fill as fill_fleet

#: The goal for one count of the fleet from a folded tally.
GOAL_MS = 10.0


def _timed(read: Callable[[], Any], repeats: int) -> tuple[float, Any]:
    """The median milliseconds of ``repeats`` calls of ``read``, and its last answer."""
    times, answer = [], None
    for _ in range(repeats):
        started = time.perf_counter()
        answer = read()
        times.append((time.perf_counter() - started) * 1000)
    return statistics.median(times), answer


def measure(url: str, label: str, n: int, repeats: int) -> tuple[list[str], list[str], bool]:
    """Fill ``url`` with ``n`` schedules and time its counts; the two tables'
    rows and whether the goals were met."""
    from sqlalchemy import text

    from celery_dgs.store.convert import utc
    from celery_dgs.store.engine import connection_transaction
    from celery_dgs.store.selection import Selection
    from celery_dgs.store.sql import SqlScheduleStore
    from celery_dgs.store.sql_status_parts import ALL_LEVELS, counts_by_part
    from celery_dgs.web.snapshot import TIME_TO_ERROR_BOUNDS as BOUNDS

    started = time.perf_counter()
    steps = fill_fleet(url, n, datetime.now(timezone.utc))
    log(f"{label}: filled {n:,} in {time.perf_counter() - started:.0f} s ({steps})")
    store = SqlScheduleStore.open(url)
    try:
        with store.engine.connect() as conn:
            deltas = conn.execute(text("SELECT count(*) FROM dgs_condition_deltas")).scalar_one()

        def by_rows(at: datetime | None = None) -> dict[tuple[str, str], int]:
            now = utc(at or datetime.now(timezone.utc), "now")
            with connection_transaction(store.engine, write=False) as conn:
                return counts_by_part(conn, {"now": now}, set(ALL_LEVELS))

        def from_tally(at: datetime | None = None) -> dict[tuple[str, str], int]:
            return store.condition_counts(at or datetime.now(timezone.utc), Selection())

        baseline_ms, _ = _timed(by_rows, repeats)
        unfolded_ms, _ = _timed(from_tally, repeats)
        fold_started = time.perf_counter()
        folded = store.fold_condition_tally(datetime.now(timezone.utc))
        fold_ms = (time.perf_counter() - fold_started) * 1000
        tally_ms, _ = _timed(from_tally, repeats)
        at = datetime.now(timezone.utc)  # both answers at one moment
        equal = from_tally(at) == by_rows(at)
        rows_ahead_ms, _ = _timed(
            lambda: store.time_to_error_by_rows(datetime.now(timezone.utc), BOUNDS), repeats
        )
        tally_ahead_ms, _ = _timed(
            lambda: store.time_to_error_counts(datetime.now(timezone.utc), BOUNDS), repeats
        )
        at = datetime.now(timezone.utc)
        ahead_equal = store.time_to_error_counts(at, BOUNDS) == store.time_to_error_by_rows(
            at, BOUNDS
        )
    finally:
        store.close()
    met = tally_ms <= GOAL_MS and equal
    ahead_met = tally_ahead_ms <= GOAL_MS and ahead_equal
    verdict = "met" if met else "**not met**"
    ahead = (
        f"| {label} | {n:,} | {rows_ahead_ms:,.1f} ms | {tally_ahead_ms:,.2f} ms "
        f"| {rows_ahead_ms / max(tally_ahead_ms, 1e-6):,.0f}x | {'yes' if ahead_equal else 'NO'} "
        f"| <= {GOAL_MS:.0f} ms: {'met' if ahead_met else '**not met**'} |"
    )
    counts = (
        f"| {label} | {n:,} | {baseline_ms:,.1f} ms | {unfolded_ms:,.1f} ms ({deltas:,} deltas) "
        f"| {fold_ms:,.0f} ms ({folded:,} moved) | {tally_ms:,.2f} ms "
        f"| {baseline_ms / max(tally_ms, 1e-6):,.0f}x | {'yes' if equal else 'NO'} "
        f"| <= {GOAL_MS:.0f} ms: {verdict} |"
    )
    return [ahead], [counts], met and ahead_met


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m benchmarks.condition_tally",
        description=__doc__,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    parser.add_argument("--schedules", type=int, default=200_000)
    parser.add_argument("--repeats", type=int, default=7)
    parser.add_argument("--no-postgres", action="store_true", help="SQLite only")
    args = parser.parse_args(sys.argv[1:] if argv is None else argv)
    lines = [
        "| store | schedules | the rows' counts (baseline) | the tally, before the fold "
        "| the fold | the tally, folded | ratio | equal | goal |",
        "|---|---|---|---|---|---|---|---|---|",
    ]
    ahead = [
        "| store | schedules | counts by time to ERROR from the rows (baseline) "
        "| from the tally, folded | ratio | equal | goal |",
        "|---|---|---|---|---|---|---|",
    ]
    all_met = True
    with tempfile.TemporaryDirectory(prefix="dgs-tally-") as tmp:
        ahead_rows, rows, met = measure(
            f"sqlite:///{Path(tmp) / 'tally.db'}", "SQLite", args.schedules, args.repeats
        )
        lines += rows
        ahead += ahead_rows
        all_met &= met
        if not args.no_postgres:
            from tests.support.postgres import PostgresServer

            pg = PostgresServer().start()
            try:
                url = pg.create_database("tally")
                ahead_rows, rows, met = measure(url, "PostgreSQL", args.schedules, args.repeats)
            finally:
                pg.stop()
            lines += rows
            ahead += ahead_rows
            all_met &= met
    print("\n".join(lines))
    print()
    print("\n".join(ahead))
    print("ALL MET" if all_met else "NOT ALL MET")
    return 0 if all_met else 1


if __name__ == "__main__":
    raise SystemExit(main())
