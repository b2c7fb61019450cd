"""A blackout begins over a backlog: ``python -m benchmarks.blackout_start``.

``--schedules`` runtime schedules, every one eligible (registered two hours
earlier, period 6 h) and sharing a daily blackout that began an hour before
the measured moment, lie past a full window of ``--window`` urgent schedules
that can start only later; three eligible schedules without a blackout come
after them in deadline order. A real :class:`~celery_dgs.beat.engine.BeatEngine`
(one registered worker of 4 slots, the default order) on a real Redis server
and the store (SQLite; PostgreSQL when ``initdb`` is there), its clock set
inside the blackout, loads and ticks until it dispatches the three: its
eligible part reads past every blacked-out schedule, the store keeps each one's
start times past the blackout, and beat lets go of it.

Figures: the ticks until the first dispatch and the longest of them (a tick
reads the eligible part on for at most
:attr:`~celery_dgs.beat.loading.ScheduleLoader.eligible_reads_per_tick_s`
past its first read), the time to the first dispatch, the schedules moved per
second, and the most schedules beat held (the window's room, not the fleet).

Baseline in the same run: the same fleet written inside the blackout (its kept
times already past it): beat has nothing to read past and nothing to move.
"""

from __future__ import annotations

import argparse
import shutil
import tempfile
import time
from datetime import datetime, timedelta, timezone
from pathlib import Path
from typing import Any

from .common import log
from .fleet_scale import Line, lines_table, verdict

NOW = datetime(2026, 6, 1, 12, 0, tzinfo=timezone.utc)
BLACKOUT = ("11:00", "14:00")
H = timedelta(hours=1)
M = timedelta(minutes=1)
#: The three eligible schedules past the blacked-out ones (no blackout).
ELIGIBLE = ("t.job@e0", "t.job@e1", "t.job@e2")


def spec(name: str, period: timedelta, **more: Any) -> Any:
    """A periodic schedule of ``t.job`` named ``t.job@name``."""
    from celery_dgs.core.spec import PeriodicSpec

    return PeriodicSpec(task="t.job", configuration=name, scheduling_period=period, **more)


def fill(url: str, n: int, window: int, written_at: datetime) -> None:
    """The fleet on ``url``: ``window`` urgent schedules that can start in 30
    minutes, ``n`` blacked-out ones written at ``written_at``, the eligible three."""
    from celery_dgs.store.sql import SqlScheduleStore

    store = SqlScheduleStore.open(url)
    try:
        urgent = [spec(f"w{i:05d}", H, cooldown_duration=50 * M) for i in range(window)]
        store.upsert_runtime(urgent, NOW + 30 * M)
        for first in range(0, n, 10_000):
            blacked = [
                spec(f"b{i:08d}", 6 * H, blackout_periods=[BLACKOUT])
                for i in range(first, min(n, first + 10_000))
            ]
            store.upsert_runtime(blacked, written_at)
        store.upsert_runtime([spec(f"e{i}", 12 * H) for i in range(3)], NOW - 10 * M)
    finally:
        store.close()


def measure(url: str, redis_url: str, window: int) -> dict[str, Any]:
    """Load and tick a beat until its first dispatch: the figures of the module doc."""
    import redis

    from celery_dgs.beat.types import DispatchOrder
    from celery_dgs.core.clock import FakeClock
    from celery_dgs.settings import DgsSettings
    from celery_dgs.store.sql import SqlScheduleStore
    from tests.support.beat import beat_engine, with_one_worker

    sent: list[DispatchOrder] = []

    def publish(orders: Any) -> list[DispatchOrder]:
        sent.extend(orders)
        return []

    client = redis.Redis.from_url(redis_url)
    keys = with_one_worker(client, "bo")
    settings = DgsSettings(
        key_prefix=keys.prefix, schedule_window_size=window, schedule_window=3600.0
    )
    store = SqlScheduleStore.open(url)
    try:
        engine = beat_engine(
            store, client, keys, settings=settings, publish=publish, clock=FakeClock(NOW)
        )
        started = time.perf_counter()
        engine.load()
        ticks: list[float] = []
        most_held = 0
        while not sent:
            at = time.perf_counter()
            engine.tick()
            ticks.append(time.perf_counter() - at)
            most_held = max(most_held, len(engine.state.tracked) - len(engine.state.checks))
        return {
            "first_dispatch_s": time.perf_counter() - started,
            "ticks": len(ticks),
            "longest_tick_s": max(ticks),
            "most_held": most_held,
            "sent": [order.schedule for order in sent],
        }
    finally:
        store.close()
        client.close()


def fleet_lines(label: str, url_of: Any, redis_url: str, n: int, window: int) -> list[Line]:
    """The figures on one store kind: ``url_of(name)`` gives a fresh database."""
    from celery_dgs.beat.loading import ScheduleLoader

    inside = NOW - H  # written after the blackout began: kept past it already
    before = NOW - 2 * H  # written before it: the pass moves each
    results = {}
    for kind, written_at in (("baseline", inside), ("pass", before)):
        url = url_of(kind)
        at = time.perf_counter()
        fill(url, n, window, written_at)
        log(f"{label}: {n:,} written {kind} in {time.perf_counter() - at:.1f} s")
        results[kind] = got = measure(url, redis_url, window)
        log(f"{label} {kind}: {got}")
        if sorted(got["sent"]) != sorted(ELIGIBLE):
            raise SystemExit(f"{label} {kind}: beat sent {got['sent']}, not the eligible three")
    base, done = results["baseline"], results["pass"]
    budget = ScheduleLoader.eligible_reads_per_tick_s
    what = f"{label}, {n:,} in a blackout begun since, window {window}"
    moved_per_s = n / max(done["first_dispatch_s"] - base["first_dispatch_s"], 1e-9)
    return [
        Line(
            f"{what}: first dispatch",
            f"{done['first_dispatch_s']:.2f} s in {done['ticks']} ticks; "
            f"{moved_per_s:,.0f} moved/s",
            f"written inside it: {base['first_dispatch_s']:.2f} s in {base['ticks']} ticks",
            "-",
            "-",
        ),
        Line(
            f"{what}: longest tick",
            f"{done['longest_tick_s']:.2f} s",
            f"written inside it: {base['longest_tick_s']:.2f} s",
            f"about {budget:g} s of reads a tick",
            verdict(done["longest_tick_s"] <= 2 * budget),
        ),
        Line(
            f"{what}: most schedules held",
            f"{done['most_held']:,}",
            f"written inside it: {base['most_held']:,}",
            f"the window's room, not {n:,}",
            verdict(done["most_held"] < min(n, 12 * window)),
        ),
    ]


def parse(argv: list[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--schedules", type=int, default=100_000)
    parser.add_argument("--window", type=int, default=500)
    parser.add_argument("--no-pg", action="store_true", help="SQLite only")
    return parser.parse_args(argv)


def main(argv: list[str] | None = None) -> int:
    opts = parse(argv)
    from celery_dgs.embedded import RedisServerProcess
    from tests.support.postgres import PostgresServer, postgres_available

    started = time.perf_counter()
    lines: list[Line] = []
    with RedisServerProcess() as redis_server:
        tmp = Path(tempfile.mkdtemp(prefix="dgs-blackout-start-"))
        try:
            lines += fleet_lines(
                "SQLite",
                lambda kind: f"sqlite:///{tmp / f'{kind}.db'}",
                redis_server.url,
                opts.schedules,
                opts.window,
            )
        finally:
            shutil.rmtree(tmp, ignore_errors=True)
        if not opts.no_pg and postgres_available():
            pg = PostgresServer().start()
            try:
                lines += fleet_lines(
                    "PostgreSQL",
                    lambda kind: pg.create_database(f"blackout{kind}"),
                    redis_server.url,
                    opts.schedules,
                    opts.window,
                )
            finally:
                pg.stop()
    print(f"\na blackout begins over a backlog, {time.perf_counter() - started:.0f} s")
    print(lines_table(lines))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
