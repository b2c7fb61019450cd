"""Deferred checks at scale (PostgreSQL, valkey): ``python -m benchmarks.deferred_checks``.

1. **Bulk add**: N checks of one ``@dgs.deferred`` task (each its own key,
   ``args`` and ``kwargs``; due a day ahead, spread over the day) added by
   ``DeferredChecks.at_many`` in calls of ``--batch`` (validation, spec
   JSON, one transaction per call) into ``SqlScheduleStore``. Baseline: the
   raw driver's ``COPY`` of the same final rows (every column ``at_many``
   wrote) into the same, emptied table, one transaction per ``--batch`` rows.
   Both ``--repeats`` times, interleaved (the order of the pair alternates).
2. **Beat's memory** with the N checks pending: a fresh child process each
   builds a real ``BeatEngine`` on the store, runs ``store.sync()`` of 1,000
   declared schedules (as beat's start does), ``load()`` and ticks; its RSS
   after that and its peak (``VmHWM``). Baseline: the same child on a
   database with the same 1,000 declared schedules and no check (interleaved
   with the first case; RSS does not drift with the machine's load as times do).
   Two cases: every check due later than the window (beat holds none of
   them), and every check overdue (catch-up): beat, in fixed-capacity mode
   (``dgs_capacity``), dispatches the window (``dgs_check_window_size``,
   10,000 by default) and, as each dispatched check ends (its row made
   inactive with a new ``change_seq`` as a run end with the verdict ``None``
   does, from another connection; its dispatch record removed as the worker's
   lease acquire does), reads the next ones, for ``--catch-up`` checks.
3. **Dispatch rate**: ``--due`` checks due at once among the N pending, a
   child process with a real ``BeatEngine`` on the SQL store, a registered
   worker with as many slots, and the real publisher
   (``DeadlineScheduler.publish``: kombu, ``send_task`` to the worker's
   queue on valkey; the messages are counted in the queue). A round is the
   ticks it takes to dispatch all of them (the window was read by ``load()``).
   Baseline: raw ``app.send_task`` of the same messages with one producer,
   interleaved (``benchmarks.engine_bench``'s method).

Every figure is a median over ``--repeats`` (the dispatch: at least 5); baselines
are measured in the same run. ``--quick``: 20,000 checks, 2,000 due, a window of 2,000, one repeat.
The table is also written as JSON to ``benchmarks/results-deferred-latest.json``.
"""

from __future__ import annotations

import argparse
import gc
import json
import os
import subprocess
import sys
import time
import uuid
from datetime import datetime, timedelta, timezone
from pathlib import Path
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    import redis

    from celery_dgs.beat.engine import BeatEngine
    from celery_dgs.beat.types import Publisher
    from celery_dgs.core.clock import Clock
    from celery_dgs.core.spec import CheckSpec, ScheduleSpec
    from celery_dgs.settings import DgsSettings
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
TASK = "bench.check_order"
DECLARED = 1_000
REGIONS = ("eu", "us", "apac", "latam")
GOAL_ADDS_PER_S = 10_000.0
GOAL_RSS_MIB = 300.0
GOAL_DISPATCH_RATIO = 0.8


def _copy_columns() -> tuple[str, ...]:
    """The columns of a new check row, in the order the store copies them."""
    from celery_dgs.store.sql_checks import NEW_CHECK_COLUMNS

    return NEW_CHECK_COLUMNS


# -- the checks ---------------------------------------------------------------------------------
def template() -> CheckSpec:
    from celery_dgs.deferred import check_template

    return check_template(
        TASK, {"within": timedelta(minutes=10), "slot": timedelta(seconds=1), "max_checks": 10}
    )


def items(n: int, t0: datetime) -> list[dict[str, Any]]:
    """Check ``i``: key ``order-i``, its own ``args`` and ``kwargs``, due a day
    after ``t0`` plus ``i`` seconds modulo a day (beyond any window)."""
    day = t0 + timedelta(days=1)
    return [
        {
            "task": TASK,
            "key": f"order-{i:07d}",
            "at": day + timedelta(seconds=i % 86_400),
            "args": [i],
            "kwargs": {"region": REGIONS[i % 4]},
        }
        for i in range(n)
    ]


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


def declare(url: str) -> None:
    """``sync()`` of the declared schedules, each given a recent good run (one
    ``UPDATE``, not timed): none is due while the benchmarks run."""
    from celery_dgs.store.sql import SqlScheduleStore

    store = SqlScheduleStore(url)
    now = datetime.now(timezone.utc)
    assert len(store.sync(declared_specs(), now).inserted) == DECLARED
    with store.engine.begin() as conn:
        conn.exec_driver_sql(
            "UPDATE dgs_schedules SET last_good_start_at = %(now)s, last_start_at = %(now)s, "
            "last_good_end_at = %(now)s, last_end_at = %(now)s, failure_count = 0, "
            "average_good_duration_s = 30 WHERE kind <> 'check'",
            {"now": now},
        )
    store.close()


def _truncate(store: SqlScheduleStore) -> None:
    with store.engine.begin() as conn:
        conn.exec_driver_sql("TRUNCATE dgs_runs, dgs_schedules, dgs_check_history")


def _analyze(url: str) -> None:
    """VACUUM ANALYZE the schedules (as autovacuum would after a large load; not timed)."""
    from celery_dgs.store.sql import SqlScheduleStore

    store = SqlScheduleStore(url)
    with store.engine.connect().execution_options(isolation_level="AUTOCOMMIT") as conn:
        conn.exec_driver_sql("VACUUM ANALYZE dgs_schedules")
    store.close()


# -- 1. bulk add ---------------------------------------------------------------------------------
def _add(url: str, rows: list[dict[str, Any]], batch: int) -> tuple[float, float]:
    """``at_many`` of ``rows`` in calls of ``batch``; (wall s, this process's CPU s)."""
    from celery_dgs.deferred import DeferredChecks
    from celery_dgs.store.sql import SqlScheduleStore

    store = SqlScheduleStore(url)
    checks = DeferredChecks(store, {TASK: template()})
    gc.collect()
    start, cpu = time.perf_counter(), time.process_time()
    added = 0
    for i in range(0, len(rows), batch):
        added += len(checks.at_many(rows[i : i + batch]).added)
    elapsed, cpu = time.perf_counter() - start, time.process_time() - cpu
    assert added == len(rows), (added, len(rows))
    store.close()
    return elapsed, cpu


def _raw_copy(url: str, stored: list[tuple[Any, ...]], batch: int) -> float:
    """The baseline: psycopg ``COPY`` of the final rows, one transaction per ``batch``."""
    from celery_dgs.store.sql import SqlScheduleStore

    store = SqlScheduleStore(url)
    sql = f"COPY dgs_schedules ({', '.join(_copy_columns())}) FROM STDIN"
    gc.collect()
    start = time.perf_counter()
    for i in range(0, len(stored), batch):
        with store.engine.begin() as conn:
            driver: Any = conn.connection.driver_connection
            with driver.cursor() as cur, cur.copy(sql) as copy:
                for row in stored[i : i + batch]:
                    copy.write_row(row)
    elapsed = time.perf_counter() - start
    store.close()
    return elapsed


def bulk(
    url: str, n: int, batch: int, repeats: int, t0: datetime
) -> tuple[list[Result], dict[str, Any]]:
    from celery_dgs.store.sql import SqlScheduleStore

    rows = items(n, t0)
    ours: list[float] = []
    cpus: list[float] = []
    raws: list[float] = []
    stored: list[tuple[Any, ...]] = []
    store = SqlScheduleStore(url)
    for r in range(repeats):
        pair = ("dgs", "raw") if r % 2 == 0 else ("raw", "dgs")
        for which in pair:
            if which == "raw" and not stored:
                continue  # the first repeat's at_many gives the baseline its rows
            _truncate(store)
            if which == "dgs":
                elapsed, cpu = _add(url, rows, batch)
                ours.append(elapsed)
                cpus.append(cpu)
                if not stored:
                    with store.engine.connect() as conn:
                        stored = [
                            tuple(v)
                            for v in conn.exec_driver_sql(
                                f"SELECT {', '.join(_copy_columns())} "
                                "FROM dgs_schedules ORDER BY name"
                            )
                        ]
                    assert len(stored) == n
            else:
                raws.append(_raw_copy(url, stored, batch))
        if len(raws) < len(ours):  # repeat 1: the raw COPY after at_many
            _truncate(store)
            raws.append(_raw_copy(url, stored, batch))
        log(
            f"  bulk repeat {r + 1}: at_many {n / ours[-1]:,.0f} checks/s ({ours[-1]:.1f} s, "
            f"CPU {cpus[-1]:.1f} s); raw COPY {n / raws[-1]:,.0f} rows/s ({raws[-1]:.1f} s)"
        )
    # The table is left as at_many wrote it (the benchmarks below need the checks).
    _truncate(store)
    _add(url, rows, batch)
    store.close()
    del rows, stored
    gc.collect()
    rate, raw_rate = n / median(ours), n / median(raws)
    result = Result(
        name=f"DeferredChecks.at_many: {n:,} new checks into PostgreSQL, {batch:,} per call",
        n=n,
        median=rate,
        unit="checks/s",
        baseline=raw_rate,
        baseline_name=f"raw psycopg COPY of the same rows, {batch:,} per transaction",
        ratio=rate / raw_rate,
        ratio_note="(dgs/COPY)",
        goal=f">= {GOAL_ADDS_PER_S:,.0f}/s at 1M",
        met=rate >= GOAL_ADDS_PER_S if n >= 1_000_000 else None,  # a few calls: start-up costs
        samples=[n / s for s in ours],
        notes=f"median {median(ours):.1f} s; raw COPY {median(raws):.1f} s; CPU time of the "
        f"calling process {median(cpus):.1f} s ({n / median(cpus):,.0f} checks per CPU-second; "
        "the rest is the server's work and waiting for a core)",
    )
    return [result], {"add_s": ours, "add_cpu_s": cpus, "raw_copy_s": raws}


# -- children: beat's memory, the dispatch rate ----------------------------------------------
def _engine(
    url: str,
    settings: DgsSettings,
    publish: Publisher,
    client: redis.Redis,
    clock: Clock | None = None,
) -> BeatEngine:
    """A beat engine on the SQL store at ``url`` and beat's Redis parts on ``client``."""
    from celery_dgs.beat.engine import BeatEngine
    from celery_dgs.core.clock import SystemClock
    from celery_dgs.store.sql import SqlScheduleStore

    from .engine_bench import redis_backends

    leases, registry, dispatches = redis_backends(client, settings.keyspace())
    return BeatEngine(
        store=SqlScheduleStore(url),
        leases=leases,
        registry=registry,
        dispatches=dispatches,
        publish=publish,
        settings=settings,
        clock=clock or SystemClock(),
    )


def child_rss(url: str, redis_url: str, window_size: int, catch_up: int) -> dict[str, Any]:
    """Beat's start (sync of the declarations, ``load()``) and ticks; with
    ``catch_up``, dispatch (fixed capacity) and end that many checks."""
    import psycopg
    import redis

    from celery_dgs.connection import redis_from_url
    from celery_dgs.settings import DgsSettings

    prefix = f"bench-rss-{uuid.uuid4().hex[:8]}"
    settings = DgsSettings(
        key_prefix=prefix, check_window_size=window_size, capacity=window_size if catch_up else None
    )
    sent = [0]

    def publish(orders: Any) -> list[Any]:
        sent[0] += len(orders)
        return []

    engine = _engine(url, settings, publish, redis_from_url(redis_url))
    keys = settings.keyspace()
    probe = redis.Redis.from_url(redis_url)
    ender = psycopg.connect(url.replace("postgresql+psycopg://", "postgresql://"))
    gc.collect()
    rss_before = current_rss_mib()
    start = time.perf_counter()
    engine.store.sync(declared_specs(), datetime.now(timezone.utc))
    engine.load()
    load_s = time.perf_counter() - start
    held_after_load = len(engine.state.checks)
    gc.collect()
    rss_load = current_rss_mib()
    for _ in range(3):
        engine.tick()
    ended, ticks, rss_max = 0, 0, current_rss_mib()
    start = time.perf_counter()
    while ended < catch_up:
        pending = list(engine.state.pending)
        if pending:  # the dispatched checks end (verdict None) and their records go
            ended += _end_checks(ender, pending)
            pipe = probe.pipeline(transaction=False)
            pipe.delete(keys.dispatch_index())
            for name in pending:
                pipe.delete(keys.dispatch(name))
            pipe.execute()
        engine.tick()
        ticks += 1
        rss_max = max(rss_max, current_rss_mib())
        if ticks > 20 * (catch_up // max(window_size // 2, 1) + 2):
            raise RuntimeError(f"catch-up stalled: {ended} of {catch_up} ended, {sent[0]} sent")
    catch_up_s = time.perf_counter() - start
    gc.collect()
    out = {
        "rss_before_mib": rss_before,
        "rss_load_mib": rss_load,
        "rss_mib": current_rss_mib(),
        "rss_max_mib": rss_max,
        "peak_mib": peak_rss_mib(),
        "tracked": len(engine.state.tracked),
        "held": len(engine.state.checks),
        "held_after_load": held_after_load,
        "load_s": load_s,
        "sent": sent[0],
        "ended": ended,
        "catch_up_s": catch_up_s,
        "ticks": ticks,
    }
    probe.close()
    ender.close()
    return out


def _end_checks(conn: Any, names: list[str]) -> int:
    """End the pending checks ``names`` as their workers' run ends would (row
    inactive, a new ``change_seq``), from a connection of its own: the workers'
    work is not beat's, so none of it is allocated in beat's process."""
    from celery_dgs.store.models import COUNTER_ID

    with conn.transaction(), conn.cursor() as cur:
        cur.execute(
            f"UPDATE dgs_counter SET value = value + 1 WHERE id = {COUNTER_ID} RETURNING value"
        )
        seq = cur.fetchone()[0]
        cur.execute(
            "UPDATE dgs_schedules SET active = false, updated_at = now(), "
            "change_seq = %s WHERE name = ANY(%s) AND kind = 'check' AND active",
            (seq, names),
        )
        return int(cur.rowcount)


def run_child(args: list[str]) -> dict[str, Any]:
    out = subprocess.run(
        [sys.executable, "-m", "benchmarks.deferred_checks", "--child", *args],
        capture_output=True,
        text=True,
        check=False,
        timeout=3600,
        cwd=ROOT,
    )
    if out.returncode != 0:
        raise RuntimeError(f"child {args} failed:\n{out.stdout}\n{out.stderr}")
    result: dict[str, Any] = json.loads(out.stdout.strip().splitlines()[-1])
    return result


def _set_due(url: str, where: str, at: str, params: dict[str, Any]) -> int:
    """Move the pending checks chosen by ``where`` to ``at`` (SQL; not timed)."""
    from celery_dgs.store.sql import SqlScheduleStore

    store = SqlScheduleStore(url)
    with store.engine.begin() as conn:
        count = conn.exec_driver_sql(
            f"UPDATE dgs_schedules SET next_target_at = {at}, earliest_check_at = {at}, "
            f"first_check_at = {at} WHERE kind = 'check' AND active AND {where}",
            params,
        ).rowcount
    store.close()
    _analyze(url)
    return int(count)


def memory(
    url: str,
    none_url: str,
    redis_url: str,
    n: int,
    window_size: int,
    catch_up: int,
    repeats: int,
) -> tuple[list[Result], dict[str, Any]]:
    later: list[dict[str, Any]] = []
    none: list[dict[str, Any]] = []
    overdue: list[dict[str, Any]] = []
    args = ["--redis-url", redis_url, "--window-size", str(window_size)]
    for r in range(repeats):
        pair = [("later", url), ("none", none_url)]
        for which, db in pair if r % 2 == 0 else pair[::-1]:
            got = run_child(["rss", "--url", db, *args, "--catch-up", "0"])
            (later if which == "later" else none).append(got)
        log(
            f"  memory repeat {r + 1}: RSS after load + ticks, {n:,} checks due later "
            f"{later[-1]['rss_mib']:.0f} MiB (peak {later[-1]['peak_mib']:.0f}), no check "
            f"{none[-1]['rss_mib']:.0f} MiB (peak {none[-1]['peak_mib']:.0f})"
        )
    moved = _set_due(
        url,
        "true",
        "%(at)s - make_interval(secs => (hashtext(name) & 4095))",
        {"at": datetime.now(timezone.utc) - timedelta(minutes=1)},
    )
    assert moved == n, moved
    for r in range(repeats):
        overdue.append(run_child(["rss", "--url", url, *args, "--catch-up", str(catch_up)]))
        got = overdue[-1]
        log(
            f"  memory repeat {r + 1}: all overdue, {got['ended']:,} caught up in "
            f"{got['catch_up_s']:.1f} s ({got['sent']:,} dispatched, window held "
            f"{got['held_after_load']:,} after load): RSS {got['rss_mib']:.0f} MiB, max "
            f"{got['rss_max_mib']:.0f}, peak {got['peak_mib']:.0f}; no check "
            f"{none[-1]['rss_mib']:.0f} MiB"
        )
    base = median([g["rss_mib"] for g in none])
    base_peak = median([g["peak_mib"] for g in none])
    results = []
    for label, runs, key in (
        ("due later than the window", later, "rss_mib"),
        ("all overdue: catch-up", overdue, "rss_max_mib"),
    ):
        value = median([g[key] for g in runs])
        peak = median([g["peak_mib"] for g in runs])
        extra = value - base
        caught = (
            f"; RSS after load() (the window read) "
            f"{median([g['rss_load_mib'] for g in runs]):.0f} MiB; then "
            f"{median([g['ended'] for g in runs]):,.0f} caught up (dispatched, ended, "
            f"the next read) in {median([g['catch_up_s'] for g in runs]):.1f} s: the "
            f"median is the highest RSS between those ticks"
            if runs is overdue
            else ""
        )
        results.append(
            Result(
                name=f"beat RSS with {n:,} pending checks, {label}",
                n=n,
                median=value,
                unit="MiB",
                baseline=base,
                baseline_name=f"the same beat, no check: {extra:+.1f} MiB",
                goal=f"< +{GOAL_RSS_MIB:.0f} MiB",
                met=extra < GOAL_RSS_MIB,
                samples=[g[key] for g in runs],
                notes=f"beat holds {median([g['held'] for g in runs]):,.0f} checks at the end"
                f"{caught}; peak RSS (VmHWM) {peak:.0f} MiB vs {base_peak:.0f} MiB; load() "
                f"{median([g['load_s'] for g in runs]):.2f} s",
            )
        )
    return results, {"memory_later": later, "memory_none": none, "memory_overdue": overdue}


def child_dispatch(url: str, redis_url: str, due: int, repeats: int) -> dict[str, Any]:
    from celery_dgs.core.clock import FakeClock

    from .engine_bench import WORKER, Bench, DgsConnection, RawMessage, RoundTrips

    class CheckBench(Bench):
        """``engine_bench.Bench`` on the SQL store's pending checks (``due`` of them due)."""

        def __init__(self, redis_url: str, t0: datetime, due_names: list[str]) -> None:
            from celery import Celery
            from redis import Redis

            from celery_dgs.beat.scheduler import DeadlineScheduler
            from celery_dgs.connection import redis_from_url
            from celery_dgs.dgs import DGS
            from celery_dgs.settings import DgsSettings

            self.n, self.due = len(due_names), len(due_names)
            self.settings = DgsSettings(redis_url=redis_url, key_prefix="bench")
            self.keys = self.settings.keyspace()
            self.probe = Redis.from_url(redis_url)
            self.probe.flushall()
            self.app = Celery("bench-dgs", broker=redis_url, set_as_current=False)
            self.app.conf.dgs_redis_url = redis_url
            self.app.conf.dgs_key_prefix = "bench"
            DGS(self.app, install_worker_hooks=False)
            self.scheduler = DeadlineScheduler(self.app, lazy=True)
            self.t0 = t0
            self.clock = FakeClock(t0)
            self.names = due_names
            self.client = redis_from_url(redis_url, connection_class=DgsConnection)
            self.engine = _engine(
                url, self.settings, self.scheduler.publish, self.client, self.clock
            )
            self.leases, self.registry = self.engine.leases, self.engine.registry
            self.dispatches = self.engine.dispatches
            start = time.perf_counter()
            self.engine.load()
            self.load_s = time.perf_counter() - start
            assert len(self.engine.state.checks) == self.due, len(self.engine.state.checks)
            self.queue = f"{WORKER}.dq2"
            self.trips = RoundTrips()

        def _raw_messages(self, count: int) -> list[RawMessage]:
            """The checks' own task, arguments and headers."""
            numbers = [(name, int(name.rsplit("-", 1)[1])) for name in self.names[:count]]
            return [(TASK, name, (i,), {"region": REGIONS[i % 4]}) for name, i in numbers]

    from celery_dgs.store.sql import SqlScheduleStore

    store = SqlScheduleStore(url)
    with store.engine.connect() as conn:
        t0 = conn.exec_driver_sql(
            "SELECT min(next_target_at) FROM dgs_schedules WHERE kind = 'check' AND active"
        ).scalar_one()
        names = [
            r[0]
            for r in conn.exec_driver_sql(
                "SELECT name FROM dgs_schedules WHERE kind = 'check' AND active "
                "AND next_target_at < %(end)s ORDER BY name",
                {"end": t0 + timedelta(seconds=30)},
            )
        ]
    store.close()
    assert len(names) == due, (len(names), due)
    bench = CheckBench(redis_url, t0 - timedelta(seconds=50), names)
    try:
        out = bench.dispatch(repeats)
    finally:
        bench.close()
    out["load_s"] = bench.load_s
    out["commands"] = [dict(c) for c in out["commands"]]
    return out


def dispatch(url: str, redis_url: str, n: int, due: int, dispatch_repeats: int) -> list[Result]:
    t0 = datetime.now(timezone.utc) + timedelta(hours=1)
    moved = _set_due(
        url,
        "name IN (SELECT name FROM dgs_schedules WHERE kind = 'check' ORDER BY name LIMIT %(due)s)",
        "%(t0)s + make_interval(secs => (hashtext(name) & 7))",
        {"due": due, "t0": t0},
    )
    assert moved == due, moved
    d = run_child(
        [
            "dispatch",
            "--url",
            url,
            "--redis-url",
            redis_url,
            "--due",
            str(due),
            "--repeats",
            str(dispatch_repeats),
        ]
    )
    raw, rate, ratio = median(d["raw_rates"]), median(d["rates"]), median(d["ratios"])
    log(
        f"  dispatch: {[round(x) for x in d['rates']]} disp/s; raw send_task "
        f"{[round(x) for x in d['raw_rates']]} msg/s; ratios {[round(x, 3) for x in d['ratios']]}"
    )
    trips = [a + b for a, b in zip(d["trips_dgs"], d["trips_broker"], strict=True)]
    return [
        Result(
            name=f"beat dispatch: {due:,} checks due at once among {n:,} pending",
            n=due,
            median=rate,
            unit="disp/s",
            baseline=raw,
            baseline_name="raw app.send_task of the same messages, one producer",
            ratio=ratio,
            ratio_note="(dgs/raw, median of per-repeat ratios)",
            goal=f">= {GOAL_DISPATCH_RATIO}x raw",
            met=ratio >= GOAL_DISPATCH_RATIO,
            samples=d["rates"],
            notes=f"a real BeatEngine on the SQL store, the real publisher to valkey, one "
            f"registered worker with {due:,} slots; ticks per round {d['ticks']}; "
            f"{median(trips):.3g} Redis round trips per dispatch (raw: "
            f"{median(d['raw_trips']):.3g}); the window ({due:,} checks) read by load() in "
            f"{d['load_s']:.2f} s",
        ),
    ]


# -- main -----------------------------------------------------------------------------------------
def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m benchmarks.deferred_checks",
        description=__doc__,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    parser.add_argument(
        "--quick",
        action="store_true",
        help="20,000 checks, 2,000 due, a window of 2,000, one repeat",
    )
    parser.add_argument("--n", type=int, help="pending checks (default 1,000,000)")
    parser.add_argument("--batch", type=int, help="checks per at_many call (default 10,000)")
    parser.add_argument("--due", type=int, help="checks due at once (default 10,000)")
    parser.add_argument(
        "--window-size",
        type=int,
        help="dgs_check_window_size of the beats (default 10,000, the default)",
    )
    parser.add_argument(
        "--catch-up",
        type=int,
        help="overdue checks caught up in the memory case (default 3 windows)",
    )
    parser.add_argument("--repeats", type=int, help="repeats per figure (default 3; quick 1)")
    parser.add_argument("--json", type=Path, default=RESULTS_DIR / "results-deferred-latest.json")
    parser.add_argument("--child", choices=("rss", "dispatch"), help=argparse.SUPPRESS)
    parser.add_argument("--url", help=argparse.SUPPRESS)
    parser.add_argument("--redis-url", help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    n = args.n or (20_000 if args.quick else 1_000_000)
    batch = args.batch or 10_000
    due = args.due or (2_000 if args.quick else 10_000)
    window = args.window_size or (2_000 if args.quick else 10_000)
    catch_up = args.catch_up if args.catch_up is not None else min(3 * window, n)
    repeats = args.repeats or (1 if args.quick else 3)
    if args.child == "rss":
        print(json.dumps(child_rss(args.url, args.redis_url, window, catch_up)))
        return 0
    if args.child == "dispatch":
        print(json.dumps(child_dispatch(args.url, args.redis_url, due, repeats)))
        return 0
    if due > window or due > n or catch_up > n:
        parser.error("--due must be at most --window-size and --n; --catch-up at most --n")
    return run(n, batch, due, window, catch_up, repeats, args.json)


def run(n: int, batch: int, due: int, window: int, catch_up: int, repeats: int, out: Path) -> int:
    from celery_dgs.embedded import RedisServerProcess
    from celery_dgs.store.sql import SqlScheduleStore
    from tests.support.postgres import PostgresServer, postgres_available

    if not postgres_available():
        log("deferred checks: PostgreSQL (initdb/pg_ctl/postgres) is not on PATH")
        return 1
    # A dispatch round takes seconds and its ratio swings with the machine's load.
    dispatch_repeats = repeats if repeats < 3 else max(repeats, 5)
    started = time.perf_counter()
    log(
        f"deferred checks: N={n:,}, at_many calls of {batch:,}, {due:,} due at once, window "
        f"{window:,}, catch-up {catch_up:,}, {repeats} repeats"
    )
    pg = PostgresServer().start()
    try:
        with RedisServerProcess() as redis:
            url = pg.create_database("checks_bench")
            none_url = pg.create_database("checks_none")
            for db in (url, none_url):
                SqlScheduleStore.open(db).close()  # migrated
            t0 = datetime.now(timezone.utc)
            results, extra = bulk(url, n, batch, repeats, t0)
            for db in (url, none_url):
                declare(db)
            _analyze(url)
            results += dispatch(url, redis.url, n, due, dispatch_repeats)
            mem, mem_extra = memory(url, none_url, redis.url, n, window, catch_up, repeats)
            results += mem
            extra.update(mem_extra)
    finally:
        pg.stop()
    elapsed = time.perf_counter() - started
    print()
    print(
        f"celery-dgs deferred checks, {os.cpu_count()} CPUs, {elapsed:.0f} s "
        f"(medians of {repeats} repeats, of {dispatch_repeats} for the dispatch; baselines "
        "from the same run)"
    )
    print(table(results))
    notes = [f"- {r.name} (N={r.n:,}): {r.notes}" for r in results if r.notes]
    print("\nNotes:\n" + "\n".join(notes))
    profile = Profile("deferred", (), (), n, due, n, repeats, repeats)
    write_json(
        out,
        profile,
        results,
        {**extra, "window": window, "catch_up": catch_up, "elapsed_s": round(elapsed, 1)},
    )
    print(f"\nwritten: {out}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
