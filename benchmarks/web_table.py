"""The status page at scale: ``python -m benchmarks.web_table [--schedules N]
[--requests N] [--pg]``.

A SQLite file (PostgreSQL with ``--pg``) holds N runtime schedules written as
:mod:`benchmarks.status_scale` writes them (24 periods from 1 h to 24 h; 1 %
never ran, 2 % failed last, about 17 % past their deadline; the statistics
and kept columns by bucket of rows, one ``UPDATE``; on PostgreSQL then
``VACUUM ANALYZE``, as autovacuum does after a bulk load); 200 of them run
(leases in a real Redis-compatible server) and 10 workers are registered.
The real ``celery dgs web`` serves it from a child process, its address
space capped at ``--cap-mib``, and is requested over HTTP:

1. the overview: ``--requests`` polls of ``/``, p50 / p95, and the age of
   what it shows (``/api/overview``'s ``now``);
2. the schedules table: ``--requests`` requests of ``/schedules`` in a fixed
   random mix (first page, deep pages, each condition, a name prefix, a
   pool, a word of the task), p50 / p95 / max, and the slowest kind of
   request (a filter by pool or by a word of the task counts its selection,
   on its first read, along the indexes with the pool or the task leading;
   here both select the whole fleet: one task, no pool given);
3. one schedule's page (a random schedule each time), p50 / p95.

Baselines in the same run: ``/favicon.ico`` (the server's floor), and, up to
``--project-max`` schedules, the whole-fleet read the page made before it
read kept state (:func:`celery_dgs.ops.state.read_state`: every schedule's
row with beat's order replayed), timed in this process.

Goals: each p95 <= 300 ms; the overview's age <= 5 s. Exit status 1 when a
goal is not met. ``--sqlite-file PATH`` keeps the SQLite fleet there and
reuses it when it exists (its timestamps then age: the conditions move on).
"""

from __future__ import annotations

import argparse
import json
import os
import random
import subprocess
import sys
import tempfile
import time
import urllib.request
from datetime import datetime, timezone
from pathlib import Path
from urllib.parse import urlencode

from .common import log, median
from .fleet_scale import web_child
from .status_scale import PREFIX, TASK, child_peak_mib
from .status_scale import fill as fill_fleet

ROOT = Path(__file__).resolve().parents[1]
GOAL_MS, GOAL_AGE_S = 300.0, 5.0
INDEXED_KINDS = ("first", "deep", "condition", "prefix")
FILTER_KINDS = ("pool", "task")
RUNNING = 200


def name_of(i: int) -> str:
    return f"{TASK}@src{i:08d}"


def table_paths(n: int, count: int, seed: int = 11) -> list[tuple[str, str]]:
    """``(kind, path)`` of ``count`` table requests in a fixed random mix."""
    rng = random.Random(seed)
    pages = max(min(n, 10_000) // 50, 1)
    out: list[tuple[str, str]] = []
    for _ in range(count):
        kind = rng.choice(INDEXED_KINDS + FILTER_KINDS)
        query: dict[str, str] = {}
        if kind == "deep":
            query["page"] = str(rng.randrange(1, pages + 1))
        elif kind == "condition":
            query = {"condition": rng.choice(("ERROR", "WARNING", "OK"))}
            query["page"] = str(rng.randrange(1, 20))
        elif kind == "prefix":
            query["q"] = f"{TASK}@src{rng.randrange(10 ** max(len(str(n)) - 4, 1)):0{4}d}*"
        elif kind == "pool":
            query = {"pool": "celery", "page": str(rng.randrange(1, 5))}
        elif kind == "task":
            query = {"task": "scrape", "condition": "OK"}
        out.append((kind, "/schedules?" + urlencode(query)))
    return out


def get(url: str, timeout: float = 120.0) -> tuple[float, bytes]:
    start = time.perf_counter()
    with urllib.request.urlopen(url, timeout=timeout) as resp:
        body: bytes = resp.read()
        if resp.status != 200:
            raise RuntimeError(f"GET {url}: {resp.status}")
    return time.perf_counter() - start, body


def p95(values: list[float]) -> float:
    ordered = sorted(values)
    return ordered[max(int(len(ordered) * 0.95) - 1, 0)]


def live_state(url: str, redis_url: str, n: int) -> None:
    """Workers and ``RUNNING`` leases in Redis, as the page reads them."""
    from celery import Celery

    from celery_dgs.dgs import DGS
    from celery_dgs.ops.env import Env
    from celery_dgs.registry import WorkerInfo

    app = Celery("webbench", broker=redis_url, set_as_current=False)
    app.conf.update(dgs_key_prefix=PREFIX, dgs_database_url=url)
    DGS(app, install_worker_hooks=False)
    env = Env(app=app)
    try:
        rt = env.runtime
        for w in range(10):
            info = WorkerInfo(
                name=f"w{w}@n{w}",
                node=f"n{w}",
                queues=("celery",),
                slots=40,
                pool="prefork",
                pid=1000 + w,
            )
            rt.registry.register(info)
        for i in range(0, n, max(n // RUNNING, 1)):
            rt.leases.acquire(name_of(i), owner_node="n0", owner_name="w0@n0", owner_tag=f"t{i}")
    finally:
        env.close()
        app.close()


def vacuum(url: str) -> None:
    """``VACUUM ANALYZE`` of the schedules, as autovacuum does after a bulk
    load: until then an index-only count visits the table's rows too."""
    from sqlalchemy import create_engine

    engine = create_engine(url, isolation_level="AUTOCOMMIT")
    try:
        with engine.connect() as conn:
            conn.exec_driver_sql("VACUUM ANALYZE dgs_schedules")
    finally:
        engine.dispose()


def project_baseline(url: str, redis_url: str) -> float:
    """Seconds of :func:`~celery_dgs.ops.state.read_state` over the fleet."""
    from celery import Celery

    from celery_dgs.dgs import DGS
    from celery_dgs.ops.env import Env
    from celery_dgs.ops.state import read_state

    app = Celery("webbench", broker=redis_url, set_as_current=False)
    app.conf.update(dgs_key_prefix=PREFIX, dgs_database_url=url)
    DGS(app, install_worker_hooks=False)
    env = Env(app=app)
    try:
        start = time.perf_counter()
        read_state(env)
        return time.perf_counter() - start
    finally:
        env.close()
        app.close()


def measure_page(base: str, n: int, requests: int) -> dict[str, list[float]]:
    """Latencies (seconds) of each kind of request, and the overview's ages."""
    rng = random.Random(5)
    got: dict[str, list[float]] = {"floor": [], "overview": [], "age": [], "schedule": []}
    for _ in range(20):
        got["floor"].append(get(base + "/favicon.ico")[0])
    get(base + "/")  # the first snapshot
    for _ in range(requests):
        got["overview"].append(get(base + "/")[0])
        now = json.loads(get(base + "/api/overview")[1])["now"]
        shown = datetime.fromisoformat(now.replace("Z", "+00:00")).timestamp()
        got["age"].append(time.time() - shown)
        path = f"/schedule?name={name_of(rng.randrange(n))}"
        got["schedule"].append(get(base + path)[0])
        time.sleep(0.2)
    for kind, path in table_paths(n, requests):
        seconds = get(base + path)[0]
        got.setdefault(f"table {kind}", []).append(seconds)
        if seconds * 1e3 > GOAL_MS:  # which request, to look at it apart
            log(f"slow table request ({kind}): {path} took {seconds * 1e3:.0f} ms")
    return got


def serve_and_measure(url: str, redis_url: str, n: int, args: argparse.Namespace) -> list[str]:
    from celery_dgs.embedded import free_port

    port = free_port()
    cmd = [sys.executable, "-m", "benchmarks.web_table", "--child-web", url, redis_url]
    cmd += [str(port), str(args.cap_mib)]
    with tempfile.TemporaryFile() as err:
        proc = subprocess.Popen(cmd, stdout=subprocess.DEVNULL, stderr=err, cwd=ROOT)
        try:
            base = f"http://127.0.0.1:{port}"
            deadline = time.monotonic() + 120
            while True:
                try:
                    get(base + "/favicon.ico", 5)
                    break
                except OSError:
                    if time.monotonic() > deadline or proc.poll() is not None:
                        err.seek(0)
                        text = err.read().decode()
                        raise RuntimeError(f"the status page did not start:\n{text}") from None
                    time.sleep(0.1)
            got = measure_page(base, n, args.requests)
            peak = child_peak_mib(proc.pid)
        finally:
            proc.terminate()
            proc.wait(30)
    return report(got, n, args.requests, peak)


def report(got: dict[str, list[float]], n: int, requests: int, peak: float) -> list[str]:
    def ms(values: list[float]) -> str:
        return f"p50 {median(values) * 1e3:.0f} ms, p95 {p95(values) * 1e3:.0f} ms"

    floor = f"baseline `/favicon.ico` p50 {median(got['floor']) * 1e3:.1f} ms"
    lines = []
    verdicts = []
    for label, key in (("overview `/`", "overview"), ("one schedule", "schedule")):
        met = p95(got[key]) * 1e3 <= GOAL_MS
        verdicts.append(met)
        lines.append(f"{label}: {ms(got[key])} ({floor}) — {'met' if met else 'NOT MET'}")
    age_met = max(got["age"]) <= GOAL_AGE_S
    verdicts.append(age_met)
    lines.append(
        f"overview's age: median {median(got['age']):.1f} s, max {max(got['age']):.1f} s "
        f"(goal <= {GOAL_AGE_S:.0f} s) — {'met' if age_met else 'NOT MET'}"
    )
    for label, kinds in (
        ("by index (first page, deep pages, a condition, a name prefix)", INDEXED_KINDS),
        ("filtered (a pool, a word of the task)", FILTER_KINDS),
    ):
        table = [t for kind in kinds for t in got.get(f"table {kind}", [])]
        if not table:
            continue
        met = p95(table) * 1e3 <= GOAL_MS
        verdicts.append(met)
        slowest = ", ".join(
            f"{kind} {max(got[f'table {kind}']) * 1e3:.0f} ms"
            for kind in kinds
            if f"table {kind}" in got
        )
        lines.append(
            f"GET /schedules at {n:,} schedules, {len(table)} of {requests} requests {label}: "
            f"{ms(table)}; slowest: {slowest} ({floor}) — {'met' if met else 'NOT MET'}"
        )
    lines.append(f"page server's peak RSS: {peak:,.0f} MiB")
    lines.append("ALL MET" if all(verdicts) else "SOME GOALS NOT MET")
    return lines


def run(
    url: str, redis_url: str, args: argparse.Namespace, label: str, filled: bool = False
) -> list[str]:
    now = datetime.now(timezone.utc)
    lines = [f"{label}, {args.schedules:,} schedules, {os.cpu_count()} CPUs"]
    if not filled:
        log(f"{label}: filling {args.schedules:,} schedules")
        steps = fill_fleet(url, args.schedules, now)
        log(f"{label}: filled in {sum(steps.values()):.0f} s")
        fill = (
            f"fill {sum(steps.values()):.0f} s: upsert {steps['upsert']:.0f} s, statistics "
            f"and kept columns by bucket {steps['statistics']:.0f} s, "
            f"ANALYZE {steps['analyze']:.0f} s"
        )
        if url.startswith("postgresql"):
            started = time.perf_counter()
            vacuum(url)
            fill += f"; then VACUUM ANALYZE {time.perf_counter() - started:.0f} s"
        log(f"{label}: {fill}")
        lines.append(fill)
    live_state(url, redis_url, args.schedules)
    if args.schedules <= args.project_max:
        seconds = project_baseline(url, redis_url)
        lines.append(
            f"baseline: the whole-fleet read (`read_state`, every row built) {seconds:.2f} s"
        )
    else:
        lines.append(f"baseline: the whole-fleet read not run above {args.project_max:,}")
    return lines + serve_and_measure(url, redis_url, args.schedules, args)


def main(argv: list[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    if argv and argv[0] == "--child-web":
        web_child(argv[1], argv[2], int(argv[3]), float(argv[4]))
        return 0
    parser = argparse.ArgumentParser(
        prog="python -m benchmarks.web_table",
        description=__doc__,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    parser.add_argument("--schedules", type=int, default=1_000_000)
    parser.add_argument("--requests", type=int, default=100)
    parser.add_argument("--pg", action="store_true", help="PostgreSQL instead of SQLite")
    parser.add_argument("--cap-mib", type=float, default=4096.0)
    parser.add_argument("--project-max", type=int, default=100_000)
    parser.add_argument(
        "--sqlite-file",
        type=Path,
        help="the SQLite fleet's file, kept; filled only when it does not exist yet",
    )
    args = parser.parse_args(argv)

    from celery_dgs.embedded import RedisServerProcess

    with RedisServerProcess() as redis, tempfile.TemporaryDirectory(prefix="dgs-web-") as tmp:
        if args.pg:
            from tests.support.postgres import PostgresServer

            pg = PostgresServer().start()
            try:
                lines = run(pg.create_database("web"), redis.url, args, "PostgreSQL")
            finally:
                pg.stop()
        else:
            path = args.sqlite_file or Path(tmp) / "web.db"
            lines = run(f"sqlite:///{path}", redis.url, args, "SQLite", filled=path.exists())
    print("\n".join(lines))
    return 0 if lines[-1] == "ALL MET" else 1


if __name__ == "__main__":
    raise SystemExit(main())
