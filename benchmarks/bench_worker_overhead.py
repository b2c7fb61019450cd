"""What celery-dgs adds to each run of a scheduled task, on a worker.

Real Redis-compatible server (``celery_dgs.embedded``) and a real SQLite file.
``supervised_run`` (lease acquire, run row, heartbeat thread start/stop, run end
with stats, lease release) is timed around a no-op task with a fake request
object, against calling the no-op bare. The ping interval is set far beyond a
run, so pings are excluded. Redis round trips are counted at the socket (every
``send_packed_command`` is one request/reply exchange; a pipeline is one), SQL
statements with SQLAlchemy's ``before_cursor_execute`` and transactions with its
``commit`` event, each split by the store call that issued it.

Goal: at most 4 Redis round trips per run and one SQL transaction per
run end.

    python benchmarks/bench_worker_overhead.py [--runs 500]
"""

from __future__ import annotations

import argparse
import statistics
import sys
import tempfile
import time
from collections import Counter, defaultdict
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from datetime import datetime, timedelta, timezone
from pathlib import Path
from types import SimpleNamespace
from typing import Any, ParamSpec, TypeVar

import redis.connection
from sqlalchemy import event

from celery_dgs.core.spec import PeriodicSpec
from celery_dgs.embedded import RedisServerProcess
from celery_dgs.runtime import Runtime
from celery_dgs.settings import DgsSettings
from celery_dgs.store.sql import SqlScheduleStore
from celery_dgs.worker.runs import supervised_run

GOAL_REDIS_ROUND_TRIPS = 4
GOAL_RUN_END_TRANSACTIONS = 1

P = ParamSpec("P")
R = TypeVar("R")


class Meter:
    """Counts Redis round trips, SQL statements and transactions, by phase."""

    def __init__(self) -> None:
        self.phase = "other"
        self.redis: Counter[str] = Counter()
        self.statements: Counter[str] = Counter()
        self.transactions: Counter[str] = Counter()
        self.seconds: dict[str, float] = defaultdict(float)

    def reset(self) -> None:
        self.redis.clear()
        self.statements.clear()
        self.transactions.clear()
        self.seconds.clear()

    @contextmanager
    def in_phase(self, name: str) -> Iterator[None]:
        before, self.phase = self.phase, name
        try:
            yield
        finally:
            self.phase = before


def instrument(rt: Runtime, meter: Meter) -> None:
    original_send: Callable[..., None] = redis.connection.AbstractConnection.send_packed_command

    def send_packed_command(conn: Any, command: Any, check_health: bool = True) -> None:
        meter.redis[meter.phase] += 1
        original_send(conn, command, check_health)

    redis.connection.AbstractConnection.send_packed_command = send_packed_command  # type: ignore[method-assign]

    store = rt.store
    if not isinstance(store, SqlScheduleStore):
        raise TypeError(f"the benchmark measures the SQL store, got {type(store).__name__}")
    engine = store.engine

    @event.listens_for(engine, "before_cursor_execute")
    def _statement(conn: Any, cursor: Any, statement: str, *_: Any) -> None:
        meter.statements[meter.phase] += 1

    @event.listens_for(engine, "commit")
    def _commit(conn: Any) -> None:
        meter.transactions[meter.phase] += 1

    def phased(name: str, fn: Callable[P, R]) -> Callable[P, R]:
        """``fn`` timed and counted as phase ``name``, with ``fn``'s own signature (so
        mypy checks each wrapped method against the interface it replaces)."""

        def call(*args: P.args, **kwargs: P.kwargs) -> R:
            t0 = time.perf_counter()
            try:
                with meter.in_phase(name):
                    return fn(*args, **kwargs)
            finally:
                meter.seconds[name] += time.perf_counter() - t0

        return call

    leases = rt.leases
    leases.acquire = phased("acquire", leases.acquire)  # type: ignore[method-assign]
    leases.release = phased("release", leases.release)  # type: ignore[method-assign]
    leases.now = phased("leases.now (TIME)", leases.now)  # type: ignore[method-assign]
    store.record_run_start = phased("record_run_start", store.record_run_start)  # type: ignore[method-assign]
    store.record_run_end = phased("record_run_end", store.record_run_end)  # type: ignore[method-assign]


def noop() -> None:
    return None


def time_bare(runs: int) -> list[float]:
    out = []
    for _ in range(runs):
        t0 = time.perf_counter()
        noop()
        out.append(time.perf_counter() - t0)
    return out


def time_supervised(rt: Runtime, spec: PeriodicSpec, runs: int) -> list[float]:
    request = SimpleNamespace(dgs_dispatch_id=None, hostname="bench@node1")
    out = []
    for _ in range(runs):
        t0 = time.perf_counter()
        supervised_run(rt, spec, request, noop, (), {})
        out.append(time.perf_counter() - t0)
    return out


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--runs", type=int, default=500)
    opts = parser.parse_args(argv)

    server = RedisServerProcess().start()
    tmp = Path(tempfile.mkdtemp(prefix="dgs-bench-"))
    try:
        settings = DgsSettings(
            database_url=f"sqlite:///{tmp / 'bench.sqlite3'}",
            redis_url=server.url,
            key_prefix="bench",
            ping_interval=3600.0,
            ping_timeout=7200.0,
        )
        rt = Runtime(settings)
        spec = PeriodicSpec(task="bench.noop", scheduling_period=timedelta(hours=1))
        rt.store.sync([spec], datetime.now(timezone.utc))
        meter = Meter()
        instrument(rt, meter)

        time_supervised(rt, spec, 20)  # warm-up: script loads, connection pools, SQLite caches
        meter.reset()
        supervised = time_supervised(rt, spec, opts.runs)
        bare = time_bare(opts.runs)
        counts = [meter.redis, meter.statements, meter.transactions]
        phases = sorted({p for c in counts for p in c} | set(meter.seconds))
        outcomes = Counter(r.outcome for r in rt.store.runs(spec.name, limit=opts.runs))
        rt.close()
    finally:
        server.cleanup()

    med_sup, med_bare = statistics.median(supervised), statistics.median(bare)
    p90 = statistics.quantiles(supervised, n=10)[-1]
    n = opts.runs
    print(
        f"celery-dgs per-run overhead, {n} runs of a no-op task "
        f"(Python {sys.version.split()[0]}, SQLite file, {server.binary.name})\n"
    )
    print(f"{'':28}{'median ms':>10}{'p90 ms':>10}")
    print(f"{'bare call':28}{med_bare * 1e3:>10.3f}{'':>10}")
    print(f"{'supervised_run':28}{med_sup * 1e3:>10.3f}{p90 * 1e3:>10.3f}")
    print(f"{'added by celery-dgs':28}{(med_sup - med_bare) * 1e3:>10.3f}\n")
    print(
        f"{'per run, by phase':28}{'Redis RTT':>10}{'SQL stmts':>10}{'SQL txns':>10}{'mean ms':>10}"
    )
    for phase in phases:
        rtt, stmts, txns = (c[phase] / n for c in counts)
        print(
            f"{phase:28}{rtt:>10.2f}{stmts:>10.2f}{txns:>10.2f}"
            f"{meter.seconds[phase] / n * 1e3:>10.3f}"
        )
    rtt = sum(meter.redis.values()) / n
    stmts = sum(meter.statements.values()) / n
    txns = sum(meter.transactions.values()) / n
    print(
        f"{'total':28}{rtt:>10.2f}{stmts:>10.2f}{txns:>10.2f}"
        f"{sum(meter.seconds.values()) / n * 1e3:>10.3f}\n"
    )
    end_txns = meter.transactions["record_run_end"] / n
    ok_rtt = rtt <= GOAL_REDIS_ROUND_TRIPS
    ok_end = end_txns <= GOAL_RUN_END_TRANSACTIONS
    print(
        f"goal <= {GOAL_REDIS_ROUND_TRIPS} Redis round trips per run: "
        f"{'met' if ok_rtt else 'MISSED'} ({rtt:.2f})"
    )
    print(
        f"goal {GOAL_RUN_END_TRANSACTIONS} SQL transaction per run end: "
        f"{'met' if ok_end else 'MISSED'} ({end_txns:.2f})"
    )
    print(f"outcomes of the measured runs: {dict(outcomes)}")
    return 0 if ok_rtt and ok_end and outcomes == Counter({"success": n}) else 1


if __name__ == "__main__":
    raise SystemExit(main())
