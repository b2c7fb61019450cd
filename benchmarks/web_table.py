"""The status page's schedules table at 100,000 schedules:
``python -m benchmarks.web_table [--schedules N] [--requests N]``.

The real app (``celery_dgs.web.app``) served by uvicorn on 127.0.0.1, read
as ``celery dgs status`` reads (``celery_dgs.ops``), over a real
Redis-compatible server (leases, workers) and the in-memory store
(``celery_dgs/store/memory.py``) holding N schedules (periodic and cron,
three pools, most with a good run, some failing, 200 running). Two figures:

1. the schedules table: wall time of ``GET /schedules`` over HTTP (first
   page, deep pages, each filter and a name search, in a fixed random mix),
   p50 / p95 / max, with the state's snapshot already read (the page re-reads
   it at most once per ``max_age`` however many browsers poll);
2. the snapshot read itself (``snapshot.take_snapshot``: every schedule's row
   through ``status.build_rows``, leases, workers, leader), median of 3.
"""

from __future__ import annotations

import argparse
import random
import statistics
import threading
import time
import urllib.request
from datetime import datetime, timedelta, timezone
from urllib.parse import urlencode

import uvicorn
from celery import Celery

from celery_dgs.core.spec_build import make_spec
from celery_dgs.dgs import DGS
from celery_dgs.embedded import RedisServerProcess, free_port
from celery_dgs.ops.env import Env
from celery_dgs.registry import WorkerInfo
from celery_dgs.store.memory import MemoryScheduleStore
from celery_dgs.web import views
from celery_dgs.web.app import create_app
from celery_dgs.web.overview import overview
from celery_dgs.web.snapshot import take_snapshot

POOLS = ("celery", "slow", "gpu")


def fill(store: MemoryScheduleStore, n: int, now: datetime, seed: int = 7) -> list[str]:
    rng = random.Random(seed)
    specs = []
    for i in range(n):
        pool = POOLS[i % 3]
        if i % 20 == 0:
            specs.append(
                make_spec(
                    "cron",
                    task=f"proj.nightly_{i:06d}",
                    cron_schedule=f"{i % 60} {i % 24} * * *",
                    cron_max_schedule_duration=timedelta(hours=6),
                    pool=pool,
                )
            )
        else:
            period = timedelta(hours=rng.choice((1, 2, 6, 12, 24)))
            specs.append(
                make_spec(
                    "periodic", task=f"proj.scrape_{i:06d}", scheduling_period=period, pool=pool
                )
            )
    store.sync(specs, now - timedelta(days=2))
    names = [s.name for s in store.list_schedules()]
    for k, name in enumerate(names):
        if k % 10 == 9:
            continue  # never ran
        start = now - timedelta(seconds=rng.uniform(60, 30 * 3600))
        run_id = f"r{k}"
        store.record_run_start(
            schedule=name,
            run_id=run_id,
            dispatch_id=None,
            owner_node="n1",
            owner_name="w1@n1",
            owner_tag=run_id,
            token=1,
            started_at=start,
        )
        outcome = "failure" if k % 50 == 7 else "success"
        store.record_run_end(
            run_id=run_id,
            outcome=outcome,
            ended_at=start + timedelta(seconds=rng.uniform(5, 600)),
            error="boom" if outcome == "failure" else None,
        )
    return names


def paths(names: list[str], count: int, seed: int = 11) -> list[str]:
    rng = random.Random(seed)
    queries: list[dict[str, str]] = []
    for _ in range(count):
        kind = rng.randrange(6)
        if kind == 0:
            queries.append({})
        elif kind == 1:
            queries.append({"page": str(rng.randrange(1, len(names) // views.PAGE_SIZE))})
        elif kind == 2:
            queries.append({"condition": rng.choice(("ERROR", "WARNING", "OK"))})
        elif kind == 3:
            queries.append({"pool": rng.choice(POOLS), "page": str(rng.randrange(1, 50))})
        elif kind == 4:
            queries.append({"q": f"proj.scrape_0{rng.randrange(10)}*"})
        else:
            queries.append({"task": f"nightly_0{rng.randrange(10)}", "condition": "OK"})
    return ["/schedules?" + urlencode(q) for q in queries]


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m benchmarks.web_table",
        description=__doc__,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    parser.add_argument("--schedules", type=int, default=100_000)
    parser.add_argument("--requests", type=int, default=300)
    args = parser.parse_args(argv)

    server = RedisServerProcess().start()
    app = Celery("webbench", broker=server.url, set_as_current=False)
    app.conf.update(dgs_key_prefix="webbench", dgs_database_url="sqlite://")
    DGS(app, install_worker_hooks=False)
    env = Env(app=app)
    try:
        rt = env.runtime
        store = MemoryScheduleStore()
        rt.__dict__["store"] = store  # the in-memory store in place of the SQL one
        now = datetime.now(timezone.utc)
        started = time.perf_counter()
        names = fill(store, args.schedules, now)
        print(f"filled {len(names):,} schedules in {time.perf_counter() - started:.1f}s")
        for w in range(10):
            rt.registry.register(
                WorkerInfo(
                    name=f"w{w}@n{w}",
                    node=f"n{w}",
                    queues=POOLS,
                    slots=40,
                    pool="prefork",
                    pid=1000 + w,
                )
            )
        for name in names[:200]:
            rt.leases.acquire(name, owner_node="n0", owner_name="w0@n0", owner_tag=f"t-{name}")

        reads = []
        for _ in range(3):
            t0 = time.perf_counter()
            snap = take_snapshot(env)
            reads.append(time.perf_counter() - t0)
        counts = overview(snap)["counts"]
        print(
            f"snapshot read (build_rows over {len(snap.ordered):,} rows): "
            f"median {statistics.median(reads) * 1000:.0f} ms; counts {counts}"
        )

        asgi = create_app(env, max_age=3600.0, read=lambda: snap)
        port = free_port()
        srv = uvicorn.Server(
            uvicorn.Config(asgi, host="127.0.0.1", port=port, log_level="warning", lifespan="off")
        )
        thread = threading.Thread(target=srv.run, daemon=True)
        thread.start()
        while not srv.started:
            time.sleep(0.02)
        base = f"http://127.0.0.1:{port}"
        times = []
        for path in ["/schedules"] * 5 + paths(names, args.requests):
            t0 = time.perf_counter()
            with urllib.request.urlopen(base + path, timeout=30) as resp:
                body = resp.read()
            times.append(time.perf_counter() - t0)
            if resp.status != 200 or b"data-total" not in body:
                raise RuntimeError(f"GET {path}: {resp.status}")
        times = sorted(times[5:])  # the first five warm the templates
        p50 = times[len(times) // 2] * 1000
        p95 = times[int(len(times) * 0.95) - 1] * 1000
        print(
            f"GET /schedules at {len(names):,} schedules, {len(times)} requests: "
            f"p50 {p50:.0f} ms, p95 {p95:.0f} ms, max {times[-1] * 1000:.0f} ms"
        )
        srv.should_exit = True
        thread.join(10)
        return 0 if p95 < 300 else 1
    finally:
        env.close()
        app.close()
        server.cleanup()


if __name__ == "__main__":
    raise SystemExit(main())
