"""Runtime schedules at scale, on a real PostgreSQL: ``python -m benchmarks.runtime_scale``.

1. **Bulk upsert**: ``dgs.schedules.upsert_many`` of N new runtime schedules
   (``RuntimeSchedules`` on ``SqlScheduleStore``: validation, JSON, one
   transaction, the ANALYZE after it), against the baseline of the raw
   driver's bulk insert of the same rows (psycopg ``COPY`` of the final
   column values into the same, emptied table). Both run ``--repeats`` times,
   interleaved. Then the same N rows again: all unchanged, nothing written
   (checked: no ``change_seq`` moved). One row in 100,000 is bad (a negative
   period): it is reported with its line, schedule and field, the rest applied.
2. **Beat start-up** with 1,000 declared and N runtime schedules, in a fresh
   child process each: ``store.sync()`` of the declarations (as beat's start
   does), then ``BeatEngine.load()``; time and peak RSS (``VmHWM``). Baseline:
   the driver's fetch of the same rows (another child).
3. **A running beat** holding them (the same child): its idle tick (nothing
   due, with and without a store poll in the tick), then change batches of
   ``--batch`` schedules written by ``upsert_many`` (a new period) and applied by
   the engine's next store poll (``BeatEngine.refresh()``: ``changes_since``
   and re-indexing); baseline: the driver's fetch of the changed rows.

The rows are what a lister writes: one scraper task, each source its own
``args`` (its URL) and ``kwargs``; 50 periods, 1 in 10 with a blackout window.
Before start-up every row is given recent run statistics (as after a day of
running; one SQL ``UPDATE``, not timed), so nothing is due and the tick is idle.

Every figure is a median over repeats (``--repeats``); baselines are measured in
the same run. ``--quick``: 50,000 schedules, batches of 5,000, one repeat.
The table is also written as JSON to ``benchmarks/results-runtime-latest.json``.
"""

from __future__ import annotations

import argparse
import dataclasses
import gc
import json
import os
import subprocess
import sys
import time
from datetime import datetime, timedelta, timezone
from pathlib import Path
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from celery_dgs.core.spec import ScheduleSpec
    from celery_dgs.runtime_schedules import BulkReport, RuntimeSchedules
    from celery_dgs.store.sql import SqlScheduleStore

from .common import (
    RESULTS_DIR,
    Profile,
    Result,
    current_rss_mib,
    log,
    median,
    peak_rss_mib,
    table,
    write_json,
)

ROOT = Path(__file__).resolve().parents[1]
DECLARED = 1_000
BAD_EVERY = 100_000
GOAL_ROWS_PER_S = 20_000.0
GOAL_BATCH_S = 2.0
GOAL_TICK_MS = 2.0
GOAL_STARTUP_S = 30.0
GOAL_STARTUP_MIB = 2048.0
IDLE_TICKS = 200
_COPY_COLUMNS = (
    "name, task, configuration, kind, spec, spec_format, active, paused, registered_at, "
    "change_seq, updated_at, owner"
)


# -- the rows -------------------------------------------------------------------------------
def runtime_row(i: int, version: int = 0) -> dict[str, Any]:
    """Row ``i`` as a lister gives it (``version``: a later change of its period)."""
    period = 3600 + 60 * (i % 50) + 600 * version
    row: dict[str, Any] = {
        "name": f"scrape.fetch@src{i:07d}",
        "period": period,
        "cooldown": period - 600,
        "args": [f"https://src{i}.example.org/feed"],
        "kwargs": {"depth": i % 3},
    }
    if i % 10 == 1:
        row["blackouts"] = [["01:00", "02:00"]]
    if i % BAD_EVERY == BAD_EVERY // 2:
        row["period"] = -1  # a bad row: reported by line, schedule and field
    return row


def declared_specs() -> list[ScheduleSpec]:
    from celery_dgs.core.spec import PeriodicSpec

    return [
        PeriodicSpec(
            task="bench.declared",
            configuration=f"d{i:04d}",
            scheduling_period=timedelta(hours=2),
            cooldown_duration=timedelta(hours=2) - timedelta(minutes=10),
        )
        for i in range(DECLARED)
    ]


def expected_bad(n: int) -> list[int]:
    return [i + 1 for i in range(n) if i % BAD_EVERY == BAD_EVERY // 2]


# -- 1. bulk upsert ---------------------------------------------------------------------------
def _truncate(store: SqlScheduleStore) -> None:
    with store.engine.begin() as conn:
        conn.exec_driver_sql("TRUNCATE dgs_runs, dgs_schedules")


def _raw_copy(store: SqlScheduleStore, rows: list[tuple[Any, ...]]) -> float:
    """The baseline: psycopg ``COPY`` of the final column values, one transaction."""
    now = datetime.now(timezone.utc)
    start = time.perf_counter()
    with store.engine.begin() as conn:
        driver: Any = conn.connection.driver_connection
        sql = f"COPY dgs_schedules ({_COPY_COLUMNS}) FROM STDIN"
        with driver.cursor() as cur, cur.copy(sql) as copy:
            for name, task, configuration, kind, spec in rows:
                copy.write_row(
                    (name, task, configuration, kind, spec, 1, True, False, now, 1, now, "runtime")
                )
    return time.perf_counter() - start


CPU: list[float] = []  # this process's CPU time of each _upsert


def _upsert(api: RuntimeSchedules, rows: list[dict[str, Any]], n: int) -> tuple[float, BulkReport]:
    start, cpu = time.perf_counter(), time.process_time()
    report = api.upsert_many(rows)
    elapsed = time.perf_counter() - start
    CPU.append(time.process_time() - cpu)
    bad = expected_bad(n)
    assert [e.line for e in report.errors] == bad, report.errors[:3]
    assert all(e.field == "scheduling_period" for e in report.errors), report.errors[:3]
    return elapsed, report


def bulk(url: str, n: int, repeats: int) -> tuple[list[Result], dict[str, Any]]:
    from celery_dgs.runtime_schedules import RuntimeSchedules
    from celery_dgs.store.sql import SqlScheduleStore

    store = SqlScheduleStore.open(url)
    api = RuntimeSchedules(store)
    rows = [runtime_row(i) for i in range(n)]
    good = n - len(expected_bad(n))
    ours: list[float] = []
    cpu: list[float] = []
    raw: list[float] = []
    stored: list[tuple[Any, ...]] = []
    for r in range(repeats + 1):  # the first upsert gives the baseline its rows
        if stored:
            _truncate(store)
            gc.collect()
            raw.append(_raw_copy(store, stored))
        _truncate(store)
        gc.collect()
        elapsed, report = _upsert(api, rows, n)
        assert len(report.applied.inserted) == good, len(report.applied.inserted)
        ours.append(elapsed)
        cpu.append(CPU[-1])
        if not stored:
            with store.engine.connect() as conn:
                stored = [
                    tuple(v)
                    for v in conn.exec_driver_sql(
                        "SELECT name, task, configuration, kind, spec "
                        "FROM dgs_schedules ORDER BY name"
                    )
                ]
        log(
            f"  bulk repeat {r + 1}: upsert_many {good / ours[-1]:,.0f} rows/s ({ours[-1]:.1f} s)"
            + (f"; raw COPY {good / raw[-1]:,.0f} rows/s ({raw[-1]:.1f} s)" if raw else "")
        )
    # The table is as upsert_many wrote it: upsert everything again.
    _, cursor = store.changes_since(0)
    again, report = _upsert(api, rows, n)
    assert len(report.applied.unchanged) == good
    assert not report.applied.changed
    assert store.changes_since(cursor)[0] == [], "an unchanged upsert wrote rows"
    store.close()
    rate = good / median(ours)
    raw_rate = good / median(raw)
    results = [
        Result(
            name="upsert_many: new runtime schedules into PostgreSQL",
            n=n,
            median=rate,
            unit="rows/s",
            baseline=raw_rate,
            baseline_name="raw psycopg COPY of the same rows",
            ratio=rate / raw_rate,
            ratio_note="(dgs/COPY)",
            goal=f">= {GOAL_ROWS_PER_S:,.0f} rows/s",
            met=rate >= GOAL_ROWS_PER_S,
            samples=[good / s for s in ours],
            notes=f"median {median(ours):.1f} s for {good:,} rows; {n - good} bad rows reported "
            f"by line/schedule/field; raw COPY {median(raw):.1f} s; CPU time of the calling "
            f"process {median(cpu):.1f} s ({good / median(cpu):,.0f} rows per CPU-second; the "
            "rest is the server's work and waiting for a core)",
        ),
        Result(
            name="upsert_many again: all unchanged, nothing written",
            n=n,
            median=good / again,
            unit="rows/s",
            notes=f"{again:.1f} s (CPU {CPU[-1]:.1f} s); no change_seq moved "
            "(beat re-reads nothing)",
        ),
    ]
    return results, {"bulk_s": ours, "bulk_cpu_s": cpu, "raw_copy_s": raw, "unchanged_s": again}


def give_statistics(url: str) -> None:
    """Every row ran recently (fixture, not timed; ``change_seq`` untouched): nothing due."""
    from celery_dgs.store.sql import SqlScheduleStore

    store = SqlScheduleStore(url)
    now = datetime.now(timezone.utc)
    with store.engine.begin() as conn:
        conn.exec_driver_sql(
            "UPDATE dgs_schedules SET "
            "last_good_start_at = %(now)s - make_interval(secs => (hashtext(name) & 1023)), "
            "last_start_at = %(now)s - make_interval(secs => (hashtext(name) & 1023)), "
            "last_good_end_at = %(now)s - make_interval(secs => (hashtext(name) & 1023) - 30), "
            "last_end_at = %(now)s - make_interval(secs => (hashtext(name) & 1023) - 30), "
            "failure_count = 0, average_good_duration_s = 30",
            {"now": now},
        )
    with store.engine.connect().execution_options(isolation_level="AUTOCOMMIT") as conn:
        conn.exec_driver_sql("VACUUM ANALYZE dgs_schedules")
    store.close()


# -- 2 and 3: beat, in a child process -----------------------------------------------------------
def child_beat(
    url: str, redis_url: str, n: int, batch: int, batches: int, repeat: int
) -> dict[str, Any]:
    from celery_dgs.beat.engine import BeatEngine
    from celery_dgs.connection import redis_from_url
    from celery_dgs.core.clock import SystemClock
    from celery_dgs.dispatches import DispatchRecords
    from celery_dgs.keys import KeySpace
    from celery_dgs.leases.redis import RedisLeases
    from celery_dgs.registry import WorkerRegistry
    from celery_dgs.runtime_schedules import RuntimeSchedules
    from celery_dgs.settings import DgsSettings
    from celery_dgs.store.sql import SqlScheduleStore

    client = redis_from_url(redis_url)
    keys = KeySpace("bench-runtime")
    store = SqlScheduleStore(url)
    settings = DgsSettings()
    engine = BeatEngine(
        store=store,
        leases=RedisLeases(client, keys, ping_timeout=90, steal_delay=60),
        registry=WorkerRegistry(client, keys, ttl=60),
        dispatches=DispatchRecords(client, keys),
        publish=lambda orders: [],
        settings=settings,
        clock=SystemClock(),
    )
    declared = declared_specs()
    rss_before = current_rss_mib()
    start = time.perf_counter()
    cpu_start = time.process_time()
    sync_report = store.sync(declared, datetime.now(timezone.utc))
    sync_s = time.perf_counter() - start
    assert not sync_report.changed, "the declarations were synced before"
    engine.load()
    startup_s = time.perf_counter() - start
    cpu_s = time.process_time() - cpu_start
    peak = peak_rss_mib()
    tracked = len(engine.state.tracked)

    engine.tick()  # the first tick also runs the hourly prune and the reaper
    now = time.time()
    assert engine.ranking.index.peek(now) is None, "something is due: the tick would not be idle"

    def idle_ticks(poll: bool) -> float:
        engine.settings = dataclasses.replace(settings, store_poll_interval=1e-9 if poll else 2.0)
        samples = []
        for _ in range(5):
            t = time.perf_counter()
            for _ in range(IDLE_TICKS):
                engine.tick()
            samples.append((time.perf_counter() - t) / IDLE_TICKS)
        engine.settings = settings
        return median(samples)

    tick_s, tick_poll_s = idle_ticks(False), idle_ticks(True)
    api = RuntimeSchedules(store)
    writes, applies, fetches, ticks_after = [], [], [], []
    for b in range(batches):
        lo = (b * batch) % max(n - batch, 1)
        # A new period each batch of each repeat: every row of the batch changes.
        version = repeat * batches + b + 1
        rows = [runtime_row(i, version=version) for i in range(lo, lo + batch)]
        t = time.perf_counter()
        report = api.upsert_many(rows)
        writes.append(time.perf_counter() - t)
        changed = len(report.applied.updated)
        with store.engine.connect() as conn:
            t = time.perf_counter()
            fetched = conn.exec_driver_sql(
                "SELECT * FROM dgs_schedules WHERE change_seq > %(c)s", {"c": engine.state.cursor}
            ).fetchall()
            fetches.append(time.perf_counter() - t)
        t = time.perf_counter()
        applied = engine.loader.refresh()
        applies.append(time.perf_counter() - t)
        assert applied == changed == len(fetched) == len(rows), (applied, changed, len(fetched))
        assert engine.ranking.index.peek(time.time()) is None
        ticks_after.append(idle_ticks(False))
    return {
        "tracked": tracked,
        "sync_s": sync_s,
        "startup_s": startup_s,
        "cpu_s": cpu_s,
        "peak_rss_mib": peak,
        "rss_before_mib": rss_before,
        "tick_s": tick_s,
        "tick_poll_s": tick_poll_s,
        "batch_write_s": writes,
        "batch_apply_s": applies,
        "batch_fetch_s": fetches,
        "tick_after_s": ticks_after,
        "batch_rows": changed,
    }


def run_child(args: list[str]) -> dict[str, Any]:
    out = subprocess.run(
        [sys.executable, "-m", *args],
        capture_output=True,
        text=True,
        check=False,
        timeout=1800,
        cwd=ROOT,
    )
    if out.returncode != 0:
        raise RuntimeError(f"child {args} failed:\n{out.stdout}\n{out.stderr}")
    result: dict[str, Any] = json.loads(out.stdout.strip().splitlines()[-1])
    return result


def one_million_startup_goal(n: int, startup_s: float) -> tuple[str, bool | None]:
    """Beat's start-up goal at 1M runtime schedules as ``(goal, met)``: met or
    not only when 1M were loaded; from fewer, the time is projected linearly,
    the goal says "projected" (or "projected over") and ``met`` is ``None``."""
    if n >= 1_000_000:
        return f"< {GOAL_STARTUP_S:.0f} s at 1M", startup_s < GOAL_STARTUP_S
    scale = 1_000_000 / n
    proj = startup_s * scale
    verdict = "projected" if proj < GOAL_STARTUP_S else "projected over"
    return f"< {GOAL_STARTUP_S:.0f} s at 1M: {verdict}, {proj:.0f} s (x{scale:.0f} this run)", None


def beat(url: str, redis_url: str, n: int, batch: int, repeats: int) -> list[Result]:
    from celery_dgs.store.sql import SqlScheduleStore

    store = SqlScheduleStore(url)
    start = time.perf_counter()
    report = store.sync(declared_specs(), datetime.now(timezone.utc))
    first_sync_s = time.perf_counter() - start
    assert len(report.inserted) == DECLARED
    store.close()
    give_statistics(url)
    total = n - len(expected_bad(n)) + DECLARED
    runs, raws = [], []
    for r in range(repeats):
        raws.append(
            run_child(
                ["benchmarks.startup", "--child", "raw", "--url", url, "--redis-url", redis_url]
            )
        )
        runs.append(
            run_child(
                [
                    "benchmarks.runtime_scale",
                    "--child",
                    "--url",
                    url,
                    "--redis-url",
                    redis_url,
                    "--n",
                    str(n),
                    "--batch",
                    str(batch),
                    "--batches",
                    "3",
                    "--repeat",
                    str(r),
                ]
            )
        )
        got = runs[-1]
        assert got["tracked"] == raws[-1]["rows"] == total, (got["tracked"], raws[-1]["rows"])
        log(
            f"  beat repeat {r + 1}: sync {got['sync_s']:.2f} s + load = start-up "
            f"{got['startup_s']:.1f} s (CPU {got['cpu_s']:.1f} s), peak RSS "
            f"{got['peak_rss_mib']:.0f} MiB; raw fetch {raws[-1]['total_s']:.1f} s; idle tick "
            f"{got['tick_s'] * 1e6:.1f} us ({got['tick_poll_s'] * 1e6:.0f} us with a poll); "
            f"batches applied in {', '.join(f'{s:.2f}' for s in got['batch_apply_s'])} s"
        )
    startup_s = median([r["startup_s"] for r in runs])
    raw_s = median([r["total_s"] for r in raws])
    peak = median([r["peak_rss_mib"] for r in runs])
    applies = [s for r in runs for s in r["batch_apply_s"]]
    writes = [s for r in runs for s in r["batch_write_s"]]
    fetches = [s for r in runs for s in r["batch_fetch_s"]]
    ticks = [r["tick_s"] * 1e3 for r in runs] + [s * 1e3 for r in runs for s in r["tick_after_s"]]
    polls = [r["tick_poll_s"] * 1e3 for r in runs]
    rows = runs[0]["batch_rows"]
    scale = 1_000_000 / n if n < 1_000_000 else 1.0
    startup_goal, startup_met = one_million_startup_goal(n, startup_s)
    return [
        Result(
            name=f"beat start-up: sync of {DECLARED:,} declared + load",
            n=total,
            median=startup_s,
            unit="s",
            baseline=raw_s,
            baseline_name="driver fetch of the rows",
            ratio=startup_s / raw_s,
            ratio_note="(dgs/fetch)",
            goal=startup_goal,
            met=startup_met,
            samples=[r["startup_s"] for r in runs],
            notes=f"of which sync() {median([r['sync_s'] for r in runs]):.2f} s (the first "
            f"sync, inserting the declarations: {first_sync_s:.2f} s); CPU "
            f"{median([r['cpu_s'] for r in runs]):.1f} s",
        ),
        Result(
            name="beat start-up: peak RSS",
            n=total,
            median=peak,
            unit="MiB",
            baseline=median([r["rss_before_mib"] for r in runs]),
            baseline_name="RSS before start-up",
            goal=f"< {GOAL_STARTUP_MIB:.0f} MiB at 1M",
            met=peak < GOAL_STARTUP_MIB if scale == 1.0 else None,
            samples=[r["peak_rss_mib"] for r in runs],
        ),
        Result(
            name=f"running beat: change batch of {rows:,} applied (refresh)",
            n=total,
            median=median(applies),
            unit="s",
            baseline=median(fetches),
            baseline_name="driver fetch of the changed rows",
            ratio=median(applies) / median(fetches),
            ratio_note="(dgs/fetch)",
            goal=f"< {GOAL_BATCH_S:.0f} s",
            met=median(applies) < GOAL_BATCH_S,
            samples=applies,
            notes=f"written by upsert_many in {median(writes):.2f} s "
            f"({rows / median(writes):,.0f} rows/s) while beat holds them",
        ),
        Result(
            name="running beat: idle tick, nothing due",
            n=total,
            median=median(ticks),
            unit="ms",
            goal=f"< {GOAL_TICK_MS:.0f} ms",
            met=median(ticks) < GOAL_TICK_MS,
            samples=ticks,
            notes=f"before and after each change batch; with a store poll in every tick "
            f"(changes_since, nothing changed): {median(polls):.2f} ms",
        ),
    ]


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m benchmarks.runtime_scale",
        description=__doc__,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    parser.add_argument("--quick", action="store_true", help="50,000 schedules, one repeat")
    parser.add_argument("--n", type=int, help="runtime schedules (default 1,000,000)")
    parser.add_argument("--batch", type=int, help="change batch size (default 10,000)")
    parser.add_argument("--repeats", type=int, help="repeats per figure (default 3; quick 1)")
    parser.add_argument("--json", type=Path, default=RESULTS_DIR / "results-runtime-latest.json")
    parser.add_argument("--child", action="store_true", help=argparse.SUPPRESS)
    parser.add_argument("--url", help=argparse.SUPPRESS)
    parser.add_argument("--redis-url", help=argparse.SUPPRESS)
    parser.add_argument("--batches", type=int, default=3, help=argparse.SUPPRESS)
    parser.add_argument("--repeat", type=int, default=0, help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    n = args.n or (50_000 if args.quick else 1_000_000)
    batch = args.batch or (5_000 if args.quick else 10_000)
    if args.child:
        out = child_beat(args.url, args.redis_url, n, batch, args.batches, args.repeat)
        print(json.dumps(out))
        return 0
    repeats = args.repeats or (1 if args.quick else 3)
    return run(n, batch, repeats, args.json)


def run(n: int, batch: int, repeats: int, out: Path) -> int:
    from celery_dgs.embedded import RedisServerProcess
    from tests.support.postgres import PostgresServer, postgres_available

    if not postgres_available():
        log("runtime schedules: PostgreSQL (initdb/pg_ctl/postgres) is not on PATH")
        return 1
    started = time.perf_counter()
    log(f"runtime schedules: N={n:,}, change batches of {batch:,}, {repeats} repeats")
    pg = PostgresServer().start()
    try:
        with RedisServerProcess() as redis:
            url = pg.create_database("runtime_bench")
            results, extra = bulk(url, n, repeats)
            results += beat(url, redis.url, n, batch, repeats)
    finally:
        pg.stop()
    elapsed = time.perf_counter() - started
    print()
    print(
        f"celery-dgs runtime schedules, {os.cpu_count()} CPUs, {elapsed:.0f} s "
        f"(medians of {repeats} repeats; baselines from the same run)"
    )
    print(table(results))
    notes = [f"- {r.name} (N={r.n:,}): {r.notes}" for r in results if r.notes]
    print("\nNotes:\n" + "\n".join(notes))
    profile = Profile("runtime", (), (), 0, batch, n, repeats, repeats)
    write_json(out, profile, results, {**extra, "elapsed_s": round(elapsed, 1)})
    print(f"\nwritten: {out}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
