"""Benchmark 4: beat start-up, loading N schedules from SQLite and from PostgreSQL.

The database is filled once per backend by a direct ``executemany`` (SQLAlchemy
Core ``insert`` of the ``dgs_schedules`` table in chunks of 10,000 rows, one
transaction, counter row bumped), not through ``store.sync``: ``sync`` takes the
whole declared set at once, in one ORM transaction. Every row holds a real
spec's canonical JSON and run statistics, as a schedule that has run has.

Each measurement is a fresh child process, so its peak RSS is that of the
start-up alone. The peak is /proc's ``VmHWM``: ``ru_maxrss`` carries the
parent's high-water mark over ``execve`` on Linux (it is kept in the JSON).
All of it is real: ``SqlScheduleStore`` on the migrated
database, ``BeatEngine.load()`` (``iter_active()`` streaming the rows,
``ScheduleLoader.apply_row`` → ``start_times`` per row, one ``DeadlineIndex.upsert_many``,
then the pending dispatch records from a real Redis server). A third child
times the store's part alone: ``iter_active()`` consumed, nothing kept. Each
child also reports its CPU time (``time.process_time``): on a shared machine
the wall time includes waiting for a core, and on PostgreSQL the server's
work on the same cores.

The rows are a mix (:func:`bench_spec`): 1 in 5 cron (four expressions, four
zones, two with DST), 1 in 10 periodic ones with a blackout window, 1 in 20
failed last time (backoff), 200 periods; 1 in 50 has arguments of its own, a
spec shape no other row shares (parsed and validated in full). The baseline, in another child,
is the floor: the driver's fetch of the same rows (``exec_driver_sql``, no
type conversion, no ORM, no parsing). The child also times ``changes_since()``
with nothing changed: the store poll an idle beat makes every
``dgs_store_poll_interval``. On PostgreSQL the table is ``ANALYZE``d after the
bulk load first, as autovacuum would within a minute (before that the planner
has no statistics and scans the whole table: that figure is in the notes).
"""

from __future__ import annotations

import argparse
import gc
import json
import subprocess
import sys
import tempfile
import time
from datetime import datetime, timedelta, timezone
from pathlib import Path
from typing import TYPE_CHECKING, Any, cast

from celery_dgs.core.blackout_periods import parse_blackouts

if TYPE_CHECKING:
    from celery_dgs.core.spec import ScheduleSpec

from .common import Profile, Result, current_rss_mib, log, median, peak_rss_mib, ru_maxrss_mib

ROOT = Path(__file__).resolve().parents[1]
CHUNK = 10_000
GOAL_1M_S = 30.0
GOAL_1M_MIB = 2048.0


def projected(within: bool) -> str:
    """The verdict of a goal on a projected figure: never "met"."""
    return "projected" if within else "projected over"


def one_million_goals(
    n: int, total_s: float, peak_mib: float, before_mib: float
) -> tuple[tuple[str, bool | None], tuple[str, bool | None]]:
    """The start-up goals at 1M schedules, load time and peak RSS, each as
    ``(goal, met)``. Met or not only when 1M schedules were loaded; from fewer,
    the figures are projected linearly, the goal says "projected" (or
    "projected over") and ``met`` is ``None``."""
    if n >= 1_000_000:
        return (
            (f"< {GOAL_1M_S:.0f} s", total_s < GOAL_1M_S),
            (f"< {GOAL_1M_MIB:.0f} MiB", peak_mib < GOAL_1M_MIB),
        )
    scale = 1_000_000 / n
    proj_t = total_s * scale
    proj_rss = before_mib + (peak_mib - before_mib) * scale
    time_goal = f"1M < {GOAL_1M_S:.0f} s: {projected(proj_t < GOAL_1M_S)}, {proj_t:.0f} s"
    rss_verdict = projected(proj_rss < GOAL_1M_MIB)
    rss_goal = f"1M < {GOAL_1M_MIB:.0f} MiB: {rss_verdict}, {proj_rss:.0f} MiB"
    of_run = f" (x{scale:.0f} this run)"
    return (time_goal + of_run, None), (rss_goal + of_run, None)


# -- populating ------------------------------------------------------------------------
#: The declared mix: (share of the rows, spec fields). Schedules differ in their
#: configuration (the name); most share one of a few hundred shapes (period,
#: zone, cron expression, blackouts, args), as configurations of a few tasks do.
#: One row in UNIQUE_EVERY has args of its own: a shape nobody shares.
_CRON_EXPRESSIONS = (
    ("*/15 * * * *", "UTC"),
    ("0 2 * * *", "America/New_York"),
    ("30 * * * *", "Europe/Berlin"),
    ("0 6 * * 1-5", "Asia/Tokyo"),
)
CRON_EVERY = 5  # one row in 5 is a cron schedule
BLACKOUT_EVERY = 10  # one periodic row in 10 has a blackout window
FAILED_EVERY = 20  # one row in 20 failed its last run (retry backoff applies)
BLACKOUT = parse_blackouts("bench.task", [("01:00", "02:00")])
UNIQUE_EVERY = 50
PERIOD_SHAPES = 200


def bench_spec(i: int) -> ScheduleSpec:
    """The spec of row ``i`` of the benchmark's store."""
    from celery_dgs.core.spec import CronSpec, PeriodicSpec

    configuration = f"c{i:07d}"
    args = (i,) if i % UNIQUE_EVERY == 0 else (i % 3,)
    if i % CRON_EVERY == 0:
        expr, tz = _CRON_EXPRESSIONS[(i // CRON_EVERY) % len(_CRON_EXPRESSIONS)]
        return CronSpec(
            task="bench.cron",
            configuration=configuration,
            cron_schedule=expr,
            tz=tz,
            cron_max_schedule_duration=timedelta(minutes=10),
            args=args,
        )
    blackouts = BLACKOUT if i % BLACKOUT_EVERY == 1 else ()
    return PeriodicSpec(
        task="bench.task",
        configuration=configuration,
        scheduling_period=timedelta(minutes=30 + i % PERIOD_SHAPES),
        max_expected_duration=timedelta(minutes=5),
        args=args,
        blackout_periods=blackouts,
    )


def populate(url: str, n: int) -> float:
    """Migrate and fill the database with ``n`` active schedules (:func:`bench_spec`);
    returns seconds."""
    from sqlalchemy import Table, insert, update

    from celery_dgs.core.spec import SPEC_FORMAT_VERSION
    from celery_dgs.store.convert import spec_json
    from celery_dgs.store.models import CounterRow, ScheduleRow
    from celery_dgs.store.sql import SqlScheduleStore

    store = SqlScheduleStore.open(url)
    start = time.perf_counter()
    now = datetime.now(timezone.utc).replace(microsecond=0)
    table = cast(Table, ScheduleRow.__table__)
    with store.engine.begin() as conn:
        for lo in range(0, n, CHUNK):
            rows = []
            for i in range(lo, min(n, lo + CHUNK)):
                spec = bench_spec(i)
                good_start = now - timedelta(seconds=60 + i % 1800)
                failed = i % FAILED_EVERY == 3
                last_end = good_start + timedelta(seconds=30 + (600 if failed else 0))
                rows.append(
                    {
                        "name": spec.name,
                        "task": spec.task,
                        "configuration": spec.configuration,
                        "kind": spec.kind,
                        "spec": spec_json(spec),
                        "spec_format": SPEC_FORMAT_VERSION,
                        "active": True,
                        "paused": False,
                        "registered_at": now - timedelta(days=30),
                        "last_good_start_at": good_start,
                        "last_good_end_at": good_start + timedelta(seconds=30),
                        "last_start_at": last_end - timedelta(seconds=30),
                        "last_end_at": last_end,
                        "failure_count": 1 if failed else 0,
                        "average_good_duration_s": 30.0,
                        "current_token": i + 1,
                        "change_seq": 1,
                        "updated_at": now,
                    }
                )
            conn.execute(insert(table), rows)
        conn.execute(update(cast(Table, CounterRow.__table__)).values(value=1))
    elapsed = time.perf_counter() - start
    store.close()
    return elapsed


def changes_since_s(url: str) -> float:
    from celery_dgs.store.sql import SqlScheduleStore

    store = SqlScheduleStore(url)
    times = []
    for _ in range(5):
        start = time.perf_counter()
        store.changes_since(1)
        times.append(time.perf_counter() - start)
    store.close()
    return median(times)


def analyze(url: str) -> None:
    from celery_dgs.store.sql import SqlScheduleStore

    store = SqlScheduleStore(url)
    with store.engine.connect().execution_options(isolation_level="AUTOCOMMIT") as conn:
        conn.exec_driver_sql("ANALYZE dgs_schedules")
    store.close()


# -- the child processes -----------------------------------------------------------------
def child_real(url: str, redis_url: str) -> dict[str, Any]:
    from celery_dgs.beat.engine import BeatEngine
    from celery_dgs.connection import redis_from_url
    from celery_dgs.core.clock import SystemClock
    from celery_dgs.dispatches import DispatchRecords
    from celery_dgs.keys import KeySpace
    from celery_dgs.leases.redis import RedisLeases
    from celery_dgs.registry import WorkerRegistry
    from celery_dgs.settings import DgsSettings
    from celery_dgs.store.sql import SqlScheduleStore

    client = redis_from_url(redis_url)
    keys = KeySpace("bench")
    store = SqlScheduleStore(url)
    engine = BeatEngine(
        store=store,
        leases=RedisLeases(client, keys, ping_timeout=90, steal_delay=60),
        registry=WorkerRegistry(client, keys, ttl=60),
        dispatches=DispatchRecords(client, keys),
        publish=lambda orders: [],
        settings=DgsSettings(),
        clock=SystemClock(),
    )
    rss_before = current_rss_mib()
    cpu_start = time.process_time()
    start = time.perf_counter()
    engine.load()
    total = time.perf_counter() - start
    cpu = time.process_time() - cpu_start
    peak = peak_rss_mib()
    gc.collect()
    rss_after = current_rss_mib()
    polls = []
    for _ in range(20):
        t = time.perf_counter()
        rows, _cursor = store.changes_since(engine.state.cursor)
        polls.append(time.perf_counter() - t)
        assert not rows
    return {
        "rows": len(engine.state.tracked),
        "indexed": len(engine.ranking.index),
        "total_s": total,
        "cpu_s": cpu,
        "rss_before_mib": rss_before,
        "peak_rss_mib": peak,
        "ru_maxrss_mib": ru_maxrss_mib(),
        "rss_after_mib": rss_after,
        "changes_since_s": median(polls),
    }


def child_read(url: str) -> dict[str, Any]:
    """The store's part alone: ``iter_active()`` consumed, nothing kept."""
    from celery_dgs.store.sql import SqlScheduleStore

    store = SqlScheduleStore(url)
    cpu_start = time.process_time()
    start = time.perf_counter()
    _cursor, rows = store.iter_active()
    count = sum(1 for _ in rows)
    return {
        "rows": count,
        "total_s": time.perf_counter() - start,
        "cpu_s": time.process_time() - cpu_start,
        "peak_rss_mib": peak_rss_mib(),
    }


def child_raw(url: str) -> dict[str, Any]:
    from celery_dgs.store.sql import SqlScheduleStore

    store = SqlScheduleStore(url)
    rss_before = current_rss_mib()
    cpu_start = time.process_time()
    start = time.perf_counter()
    with store.engine.connect() as conn:
        rows = conn.exec_driver_sql("SELECT * FROM dgs_schedules WHERE active").fetchall()
    total = time.perf_counter() - start
    return {
        "rows": len(rows),
        "total_s": total,
        "cpu_s": time.process_time() - cpu_start,
        "rss_before_mib": rss_before,
        "peak_rss_mib": peak_rss_mib(),
    }


def run_child(kind: str, url: str, redis_url: str) -> dict[str, Any]:
    out = subprocess.run(
        [
            sys.executable,
            "-m",
            "benchmarks.startup",
            "--child",
            kind,
            "--url",
            url,
            "--redis-url",
            redis_url,
        ],
        capture_output=True,
        text=True,
        check=False,
        timeout=900,
        cwd=ROOT,
    )
    if out.returncode != 0:
        raise RuntimeError(f"start-up child {kind} failed:\n{out.stdout}\n{out.stderr}")
    result: dict[str, Any] = json.loads(out.stdout.strip().splitlines()[-1])
    return result


# -- the benchmark -----------------------------------------------------------------------
def _backend(name: str, url: str, redis_url: str, n: int, repeats: int) -> list[Result]:
    log(f"start-up {name}: populating {n:,} rows (Core executemany)")
    fill_s = populate(url, n)
    log(f"  populated in {fill_s:.1f}s")
    poll_note = ""
    if url.startswith("postgresql"):
        before_s = changes_since_s(url)
        analyze(url)
        poll_note = f"; {before_s * 1e6:.0f} us before ANALYZE (seq scan)"
    real, raw, read = [], [], []
    for i in range(repeats):
        raw.append(run_child("raw", url, redis_url))
        read.append(run_child("read", url, redis_url))
        real.append(run_child("real", url, redis_url))
        assert real[-1]["rows"] == read[-1]["rows"] == raw[-1]["rows"] == n, (real, read, raw)
        log(
            f"  repeat {i + 1}: load {real[-1]['total_s']:.2f}s (CPU {real[-1]['cpu_s']:.2f}s), "
            f"peak RSS {real[-1]['peak_rss_mib']:.0f} MiB; iter_active alone "
            f"{read[-1]['total_s']:.2f}s (CPU {read[-1]['cpu_s']:.2f}s); "
            f"raw SELECT {raw[-1]['total_s']:.2f}s (CPU {raw[-1]['cpu_s']:.2f}s)"
        )
    total = median([r["total_s"] for r in real])
    load_active = median([r["total_s"] for r in read])
    cpu = median([r["cpu_s"] for r in real])
    raw_s = median([r["total_s"] for r in raw])
    peak = median([r["peak_rss_mib"] for r in real])
    before = median([r["rss_before_mib"] for r in real])
    (time_goal, time_met), (rss_goal, rss_met) = one_million_goals(n, total, peak, before)
    return [
        Result(
            name=f"start-up {name}: BeatEngine.load()",
            n=n,
            median=total,
            unit="s",
            baseline=raw_s,
            baseline_name="driver fetch of the rows",
            ratio=total / raw_s,
            ratio_note="(dgs/fetch)",
            goal=time_goal,
            met=time_met,
            samples=[r["total_s"] for r in real],
            notes=f"iter_active() alone {load_active:.2f}s; CPU time {cpu:.2f}s "
            f"(the wall time includes waiting for a core on a shared machine); "
            f"populated in {fill_s:.1f}s",
        ),
        Result(
            name=f"start-up {name}: peak RSS of the beat process",
            n=n,
            median=peak,
            unit="MiB",
            baseline=before,
            baseline_name="RSS before load()",
            goal=rss_goal,
            met=rss_met,
            samples=[r["peak_rss_mib"] for r in real],
            notes=f"{median([r['rss_after_mib'] for r in real]):.0f} MiB after load() and a GC",
        ),
        Result(
            name=f"store poll {name}: changes_since(), nothing changed",
            n=n,
            median=median([r["changes_since_s"] for r in real]) * 1e6,
            unit="us",
            samples=[r["changes_since_s"] * 1e6 for r in real],
            notes="once per dgs_store_poll_interval (2 s); the idle-tick benchmark polls the "
            "in-memory store" + poll_note,
        ),
    ]


def run(profile: Profile) -> list[Result]:
    from celery_dgs.embedded import RedisServerProcess
    from tests.support.postgres import PostgresServer, postgres_available

    n, repeats = profile.startup_size, profile.startup_repeats
    results: list[Result] = []
    with RedisServerProcess() as server, tempfile.TemporaryDirectory(prefix="dgs-bench-") as tmp:
        url = f"sqlite:///{Path(tmp) / 'bench.sqlite3'}"
        results += _backend("SQLite", url, server.url, n, repeats)
        if not postgres_available():
            log("start-up PostgreSQL: skipped (initdb/pg_ctl/postgres not on PATH)")
            return results
        pg = PostgresServer().start()
        try:
            results += _backend("PostgreSQL", pg.create_database("bench"), server.url, n, repeats)
        finally:
            pg.stop()
    return results


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--child", choices=["real", "read", "raw"], required=True)
    parser.add_argument("--url", required=True)
    parser.add_argument("--redis-url", required=True)
    args = parser.parse_args()
    if args.child == "real":
        out = child_real(args.url, args.redis_url)
    else:
        out = child_read(args.url) if args.child == "read" else child_raw(args.url)
    print(json.dumps(out))


if __name__ == "__main__":
    main()
