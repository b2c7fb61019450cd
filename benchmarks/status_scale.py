"""``celery dgs status`` at scale: ``python -m benchmarks.status_scale [--schedules N ...]``.

For each fleet size, a SQLite file (and PostgreSQL with ``--pg``) holds N
runtime schedules ``src{i}`` (one task, 24 periods from 1 h to 24 h by
``i % 24``): 1 % never ran (``i % 100 == 0``), 2 % failed last
(``i % 50 == 7``), the others last ran (30 s) ``period * u`` ago, ``u``
spread over [0, 1.2) (about 17 % past their deadline). The rows are grouped
into ``BUCKETS`` buckets by ``i % BUCKETS``, ``u`` taken per bucket (its
phase, ``PHASES`` per period); each bucket's statistics and the kept
columns the store computes from them are written by one ``UPDATE ... FROM``
(:mod:`benchmarks.bucket_fill`): the kept columns the migration's backfill
gives those rows, in minutes at 10M where a per-row ``UPDATE`` and the
backfill took hours. The backfill itself is timed after the commands, over
the first 100,000 rows (the one-off cost of the upgrade).

Each command runs the real CLI (``celery dgs status ...``) in a fresh child
process against a real Redis-compatible server (its leases, workers, leader);
its output goes through a pipe to this process, which keeps only the last
line (``| tail -1``). Figures: the command's wall time inside the child
(imports and app set-up excluded: they are the same for every command) and
the child's peak RSS (``VmHWM``), beside the child's RSS before the command.

* ``status``: the counts and the 100 most urgent rows;
* ``status PATTERN``: a name prefix selecting about 0.1 % of the fleet;
* ``status --json``: every row, streamed (its bytes reported);
* baselines in the same run: ``SELECT count(*)`` of the schedules (the
  cheapest read of the whole fleet) and, up to ``--project-max`` schedules,
  ``status --project``: the whole fleet read and every row rebuilt, as
  ``status`` did before the kept columns.

Goal: each ``status`` read <= 1 s and <= 200 MB at 10M schedules;
the ``--json`` stream's memory does not grow with the fleet.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
from datetime import datetime, timedelta, timezone
from pathlib import Path
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from celery_dgs.store.sql import SqlScheduleStore

PERIODS_H = [1 + i for i in range(24)]
#: Buckets of rows given the same statistics (a multiple of 24, 50 and 100:
#: a bucket has one period, and either never ran, failed last or succeeded).
BUCKETS = 24_000
#: The moments of the last run per period: one for each of its buckets.
PHASES = BUCKETS // len(PERIODS_H)
RUN_TIME = timedelta(seconds=30)
PREFIX = "statusbench"
TASK = "proj.scrape"
GOAL_S, GOAL_MIB = 1.0, 200.0


def log(msg: str) -> None:
    print(msg, file=sys.stderr, flush=True)


def fill(url: str, n: int, now: datetime) -> dict[str, float]:
    """N runtime schedules with their statistics; the seconds each step took:
    ``upsert`` (``upsert_runtime_texts``), ``statistics`` (the statistics and
    kept columns by bucket: :func:`status_buckets`, one ``UPDATE``),
    ``analyze``."""
    from celery_dgs.core.spec_build import make_spec
    from celery_dgs.store.convert import spec_json
    from celery_dgs.store.sql import SqlScheduleStore

    store = SqlScheduleStore.open(url)
    steps: dict[str, float] = {}
    t0 = time.perf_counter()
    batch: list[Any] = []
    registered = now - timedelta(days=3)
    for i in range(n):
        spec = make_spec(
            "periodic",
            task=TASK,
            configuration=f"src{i:08d}",
            scheduling_period=timedelta(hours=PERIODS_H[i % len(PERIODS_H)]),
        )
        batch.append((spec, spec_json(spec)))
        if len(batch) == 100_000 or i == n - 1:
            store.upsert_runtime_texts(batch, registered)
            batch = []
            if (i + 1) % 1_000_000 == 0 and i + 1 < n:
                log(f"  upserted {i + 1:,} in {time.perf_counter() - t0:.0f} s")
    steps["upsert"] = time.perf_counter() - t0
    log(f"  upserted {n:,} in {steps['upsert']:.0f} s; the statistics by bucket ...")
    t0 = time.perf_counter()
    write_statistics(store, now, registered)
    steps["statistics"] = time.perf_counter() - t0
    log(f"  statistics and kept columns written in {steps['statistics']:.0f} s; ANALYZE ...")
    t0 = time.perf_counter()
    with store.engine.begin() as conn:
        if conn.dialect.name == "sqlite":
            conn.exec_driver_sql("ANALYZE")
        else:
            conn.exec_driver_sql("ANALYZE dgs_schedules")
    steps["analyze"] = time.perf_counter() - t0
    store.close()
    return steps


def status_buckets(
    store: SqlScheduleStore, now: datetime, registered: datetime, buckets: int = BUCKETS
) -> list[dict[str, Any]]:
    """Per bucket of rows (the name's number modulo ``BUCKETS``) of the first
    ``buckets`` that ran: its statistics and the kept columns the store
    computes from them at ``now`` (rows registered at ``registered``).

    Bucket ``k`` holds the period ``PERIODS_H[k % 24]``; it never ran when
    ``k % 100 == 0`` (no row: its schedules keep what the upsert wrote), its
    last run failed when ``k % 50 == 7``, and its last run started
    ``period * u`` before ``now``, ``u`` spread over [0, 1.2) by the bucket's
    phase (``PHASES`` of them per period, spread at any fleet size)."""
    from celery_dgs.core.kept_condition import kept_times
    from celery_dgs.core.spec_build import make_spec
    from celery_dgs.core.stats import ScheduleStats
    from celery_dgs.store.kept import kept_values

    out = []
    for k in range(buckets):
        if k % 100 == 0:
            continue  # never ran
        hours = PERIODS_H[k % len(PERIODS_H)]
        period = timedelta(hours=hours)
        phase = (k // len(PERIODS_H)) * 263 % PHASES
        start = now - period * (1.2 * (phase + 0.5) / PHASES)
        end = start + RUN_TIME
        failures = 1 if k % 50 == 7 else 0
        stats = ScheduleStats(
            registered_at=registered,
            last_good_start_at=start,
            last_good_end_at=end,
            last_start_at=start,
            last_end_at=end,
            failure_count=failures,
            average_good_duration=RUN_TIME,
        )
        spec = make_spec(
            "periodic", task=TASK, configuration="src00000000", scheduling_period=period
        )
        times = kept_times(spec, stats, now, retry_ladder=store.retry_ladder)
        row = {"k": k, "start": start, "end": end, "failures": failures}
        out.append({**row, **kept_values(times, spec.pool)})
    return out


def write_statistics(store: SqlScheduleStore, now: datetime, registered: datetime) -> None:
    """The fleet's run statistics and kept columns (:func:`status_buckets`),
    written over the rows of each bucket by one ``UPDATE ... FROM``."""
    from sqlalchemy import Integer

    from celery_dgs.store.models import UTCDateTime

    from .bucket_fill import buckets_held, update_by_bucket

    update_by_bucket(
        store,
        BUCKETS,
        status_buckets(store, now, registered, buckets_held(store, BUCKETS)),
        {"start": UTCDateTime, "end": UTCDateTime, "failures": Integer},
        {
            "last_good_start_at": 'b."start"',
            "last_start_at": 'b."start"',
            "last_good_end_at": 'b."end"',
            "last_end_at": 'b."end"',
            "failure_count": 'b."failures"',
            "average_good_duration_s": f"{RUN_TIME.total_seconds():.1f}",
        },
    )


def child(url: str, redis_url: str, args: list[str]) -> None:
    """Run ``celery dgs ARGS`` here; report its time and peak RSS on stderr."""
    from celery import Celery
    from celery.bin.base import CLIContext

    from benchmarks.common import current_rss_mib, peak_rss_mib
    from celery_dgs.cli import dgs
    from celery_dgs.dgs import DGS

    app = Celery("statusbench", broker=redis_url, set_as_current=False)
    app.conf.update(dgs_key_prefix=PREFIX, dgs_database_url=url)
    DGS(app, install_worker_hooks=False)
    before = current_rss_mib()
    print(f"START {time.time()!r}", file=sys.stderr, flush=True)
    t0 = time.perf_counter()
    if args == ["count"]:
        from sqlalchemy import create_engine, text

        with create_engine(url).connect() as conn:
            n = conn.execute(text("SELECT count(*) FROM dgs_schedules WHERE active")).scalar()
        print(n)
        code = 0
    else:
        obj = CLIContext(app=app, no_color=True, workdir=None)
        try:
            code = dgs.main(args, obj=obj, standalone_mode=False, prog_name="celery dgs") or 0
        except SystemExit as exc:
            code = int(exc.code or 0)
    sys.stdout.flush()
    seconds = time.perf_counter() - t0
    result = {"seconds": seconds, "peak_mib": peak_rss_mib(), "before_mib": before, "exit": code}
    print("RESULT " + json.dumps(result), file=sys.stderr, flush=True)


def measure(
    url: str, redis_url: str, args: list[str], *, max_seconds: float | None = None
) -> dict[str, Any]:
    """One child run: its figures, the bytes it wrote, its last line, the
    seconds from the command's start to its first byte (``first_byte_s``) and
    the rows of a ``--json`` listing it wrote (``rows``). With ``max_seconds``,
    a command still writing that long after its first byte is stopped there:
    ``complete`` False, ``seconds`` and ``peak_mib`` as of then."""
    cmd = [sys.executable, "-m", "benchmarks.status_scale", "--child", url, redis_url, *args]
    proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    assert proc.stdout is not None
    size, rows, last, first_at, stopped = 0, 0, b"", 0.0, None
    for line in proc.stdout:  # `| tail -1`
        if not first_at:
            first_at = time.time()
        size += len(line)
        rows += line.startswith(b"    {")
        if line.strip():
            last = line
        if max_seconds is not None and time.time() - first_at > max_seconds:
            stopped = {"seconds": time.time() - first_at, "peak_mib": child_peak_mib(proc.pid)}
            proc.kill()
            break
    err = proc.stderr.read().decode() if proc.stderr else ""
    proc.wait()
    start = [float(ln[6:]) for ln in err.splitlines() if ln.startswith("START ")]
    found = [ln for ln in err.splitlines() if ln.startswith("RESULT ")]
    if stopped is not None and start:
        out: dict[str, Any] = {"before_mib": 0.0, "exit": None, **stopped}
        out["seconds"] += first_at - start[-1]
    elif found:
        out = json.loads(found[-1][7:])
    else:
        raise RuntimeError(f"{' '.join(args)} failed:\n{err}")
    out.update(bytes=size, rows=rows, last=last.decode(errors="replace").strip()[:70])
    out.update(complete=stopped is None, first_byte_s=first_at - start[-1] if start else None)
    return out


def child_peak_mib(pid: int) -> float:
    """The peak RSS (``VmHWM``) of the running process ``pid``, in MiB (0: unknown)."""
    try:
        with open(f"/proc/{pid}/status") as f:
            for line in f:
                if line.startswith("VmHWM:"):
                    return int(line.split()[1]) / 1024
    except OSError:
        pass
    return 0.0


def _prefix_pattern(n: int) -> str:
    """A name prefix selecting about one schedule in a thousand (at least 10)."""
    digits = max(len(str(max(n // 1000, 10))) - 1, 1)
    return f"{TASK}@src{'0' * (8 - digits)}{'?' * digits}"


def run_fleet(url: str, redis_url: str, n: int, project_max: int, label: str) -> list[str]:
    now = datetime.now(timezone.utc)
    log(f"{label}: filling {n:,} schedules ...")
    steps = fill(url, n, now)
    lines = [
        f"### {label}, {n:,} schedules",
        f"fill: upsert {steps['upsert']:.1f} s, statistics and kept columns by bucket "
        f"{steps['statistics']:.1f} s, ANALYZE {steps['analyze']:.1f} s",
        "| command | time | peak RSS (before) | output | goal <= 1 s, 200 MB |",
        "|---|---|---|---|---|",
    ]
    commands = [
        ["count"],
        ["status"],
        ["status", _prefix_pattern(n)],
        ["status", "--json"],
    ]
    if n <= project_max:
        commands.append(["status", "--project", "--limit", "100"])
    for args in commands:
        log(f"{label} {n:,}: {' '.join(args)}")
        r = measure(url, redis_url, args)
        name = "SELECT count(*) (baseline)" if args == ["count"] else "celery dgs " + " ".join(args)
        met = "-"
        if args[0] == "status" and "--project" not in args:
            met = "yes" if r["seconds"] <= GOAL_S and r["peak_mib"] <= GOAL_MIB else "NO"
        lines.append(
            f"| {name} | {r['seconds']:.2f} s ({r['seconds'] / n * 1e6:.2f} µs/row) | "
            f"{r['peak_mib']:.0f} MiB ({r['before_mib']:.0f}) | {r['bytes']:,} B | {met} |"
        )
        log(lines[-1])
    lines.append(f"the migration's kept-column backfill: {_backfill_us(url, n, now):.0f} µs/row")
    return lines


def _backfill_us(url: str, n: int, now: datetime) -> float:
    """µs per row of the migration's backfill, over the first 100,000 rows
    (:func:`benchmarks.bucket_fill.backfill_us`), after the commands."""
    from celery_dgs.store.sql import SqlScheduleStore

    from .bucket_fill import BACKFILL_SLICE, backfill_us

    log(f"the kept-column backfill of {min(n, BACKFILL_SLICE):,} rows")
    store = SqlScheduleStore.open(url)
    try:
        return backfill_us(store, n, now)
    finally:
        store.close()


def main(argv: list[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    if argv and argv[0] == "--child":
        child(argv[1], argv[2], argv[3:])
        return 0
    parser = argparse.ArgumentParser(
        prog="python -m benchmarks.status_scale",
        description=__doc__,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    parser.add_argument("--schedules", type=int, nargs="+", default=[100_000, 1_000_000])
    parser.add_argument("--project-max", type=int, default=100_000)
    parser.add_argument("--pg", action="store_true", help="PostgreSQL too (initdb on PATH)")
    parser.add_argument("--no-sqlite", action="store_true", help="PostgreSQL only (with --pg)")
    args = parser.parse_args(argv)

    from celery_dgs.embedded import RedisServerProcess

    server = RedisServerProcess().start()
    lines: list[str] = []
    try:
        with tempfile.TemporaryDirectory(prefix="status-scale-") as tmp:
            for n in [] if args.no_sqlite else args.schedules:
                url = f"sqlite:///{Path(tmp) / f'status-{n}.db'}"
                lines += run_fleet(url, server.url, n, args.project_max, "SQLite")
                os.remove(Path(tmp) / f"status-{n}.db")
            if args.pg:
                lines += run_pg(server.url, args.schedules, args.project_max)
    finally:
        server.cleanup()
    print("\n".join(lines))
    return 0


def run_pg(redis_url: str, sizes: list[int], project_max: int) -> list[str]:
    from tests.support.postgres import PostgresServer, postgres_available

    if not postgres_available():
        return ["PostgreSQL: initdb/pg_ctl/postgres not on PATH, skipped"]
    pg = PostgresServer().start()
    try:
        lines = []
        for n in sizes:
            url = pg.create_database(f"status_{n}")
            lines += run_fleet(url, redis_url, n, project_max, "PostgreSQL")
        return lines
    finally:
        pg.stop()


if __name__ == "__main__":
    raise SystemExit(main())
