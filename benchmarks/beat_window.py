"""Beat with a window of schedules at fleet scale: ``python -m benchmarks.beat_window``.

The fleets are :mod:`benchmarks.fleet_scale`'s: adaptive lister rows written
through the runtime API's ``upsert_many`` (every one eligible: a backlog),
then its seed-001 mix (intervals from hours to months, about 1 % eligible an
hour) written over them. PostgreSQL holds 10,000,000 of them, SQLite
1,000,000.

Each measurement is a fresh child process running a real
:class:`~celery_dgs.beat.engine.BeatEngine` on the store and a real Redis
server (one registered worker of 4 slots), as a beat that starts or has just
been elected does: ``load()``, then ticks until its first dispatch. Figures:
the wall time from the engine's construction to the first dispatch, the
rows it read, and the child's peak RSS (``VmHWM``) beside its RSS before the
load (the interpreter and the imports). Then 200 more dispatch rounds with
the worker's slots freed each round: the median round's time.

The baseline in the same run is beat holding the whole fleet (no window), on
SQLite at 1,000,000 and on PostgreSQL up to ``--whole-max`` schedules (its
memory at 10,000,000 is projected from its cost per row).

Goals: first dispatch <= 5 s with 1M stored (SQLite) and 10M (PostgreSQL);
peak RSS <= 500 MiB with 1M all eligible, <= 300 MiB with 10M at 1 %
eligible an hour.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

from .common import log, median
from .fleet_scale import (
    Line,
    analyze,
    apply_mix,
    lines_table,
    lister_row,
    status_lines,
    verdict,
)

GOAL_FIRST_S = 5.0
GOAL_RSS_BACKLOG_MIB = 500.0
GOAL_RSS_MIX_MIB = 300.0
ROUNDS = 200


def rss_mib(field: str) -> float:
    """``VmHWM`` (peak) or ``VmRSS`` of this process, MiB."""
    for line in Path("/proc/self/status").read_text().splitlines():
        if line.startswith(field + ":"):
            return int(line.split()[1]) / 1024
    return float("nan")


def beat_child(
    url: str, redis_url: str, size: int | None, horizon_s: float, read_on: float | None
) -> dict[str, Any]:
    """A beat's start on ``url``: the figures of the module doc, as a dict."""

    import redis

    from celery_dgs.beat.types import DispatchOrder
    from celery_dgs.settings import DgsSettings
    from celery_dgs.store.sql import SqlScheduleStore
    from tests.support.beat import beat_engine, with_one_worker

    before = rss_mib("VmRSS")
    sent: list[DispatchOrder] = []
    #: When the first orders went to the broker (the tick goes on after them:
    #: its hourly prune, for one, is not part of the first dispatch).
    first_sent: list[float] = []

    def publish(orders: Any) -> list[DispatchOrder]:
        if not first_sent:
            first_sent.append(time.perf_counter())
        sent.extend(orders)
        return []

    client = redis.Redis.from_url(redis_url)
    keys = with_one_worker(client, "bw")
    settings = DgsSettings(
        key_prefix=keys.prefix,
        schedule_window_size=size,
        schedule_window=horizon_s,
        schedule_window_read_on=read_on,
    )
    started = time.perf_counter()
    store = SqlScheduleStore.open(url)
    engine = beat_engine(store, client, keys, settings=settings, publish=publish)
    engine.load()
    loaded = time.perf_counter() - started
    while not sent:
        engine.tick()
    first = first_sent[0] - started
    rounds = []
    for _ in range(ROUNDS):
        for order in sent:  # the runs end: their slots are free again
            engine.dispatches.take_back(order.schedule, order.dispatch_id)
        sent.clear()
        at = time.perf_counter()
        engine.tick()
        rounds.append(time.perf_counter() - at)
    state = engine.state
    return {
        "first_dispatch_s": first,
        "load_s": loaded,
        "held": len(state.tracked) - len(state.checks),
        "rss_before_mib": before,
        "peak_mib": rss_mib("VmHWM"),
        "round_ms": median(rounds) * 1000,
    }


def run_child(
    url: str, redis_url: str, size: int | None, horizon_s: float, read_on: float | None = 0.0
) -> dict[str, Any]:
    size_arg, read_on_arg = ("none" if v is None else str(v) for v in (size, read_on))
    args = [url, redis_url, size_arg, str(horizon_s), read_on_arg]
    out = subprocess.run(
        [sys.executable, "-m", "benchmarks.beat_window", "--child", *args],
        check=True,
        capture_output=True,
        text=True,
        cwd=Path(__file__).resolve().parents[1],
    )
    result: dict[str, Any] = json.loads(out.stdout.strip().splitlines()[-1])
    log(f"    {'whole fleet' if size is None else f'window {size:,}'}: {result}")
    return result


def fill(url: str, n: int, batch: int) -> float:
    """``n`` lister rows through ``upsert_many``; rows per second."""
    from celery_dgs.runtime_schedules import RuntimeSchedules
    from celery_dgs.store.sql import SqlScheduleStore

    store = SqlScheduleStore.open(url)
    api = RuntimeSchedules(store)
    started = time.perf_counter()
    for lo in range(0, n, batch):
        report = api.upsert_many([lister_row(i) for i in range(lo, min(lo + batch, n))])
        assert report.ok, report.errors[:3]
        if lo // batch % 8 == 0:
            log(f"  fill {min(lo + batch, n):,}/{n:,}")
    rate = n / (time.perf_counter() - started)
    analyze(store)
    store.close()
    return rate


def mix(url: str) -> None:
    from celery_dgs.store.sql import SqlScheduleStore

    store = SqlScheduleStore.open(url)
    apply_mix(store, datetime.now(timezone.utc))
    store.close()


def fleet_lines(
    label: str, url: str, redis_url: str, n: int, opts: argparse.Namespace
) -> list[Line]:
    """The backlog, then the seed-001 mix: beat with a window, and the whole fleet."""
    log(f"{label}: {n:,} schedules ({fill(url, n, opts.batch):,.0f} rows/s)")
    lines: list[Line] = []
    whole = n <= opts.whole_max
    for mix_name, size, goal_mib in (
        ("backlog", opts.window, GOAL_RSS_BACKLOG_MIB),
        ("seed 001", opts.mix_window, GOAL_RSS_MIX_MIB),
    ):
        if mix_name == "seed 001":
            log(f"{label}: the seed-001 mix")
            mix(url)
        got = run_child(url, redis_url, size, opts.horizon, opts.read_on)
        base = run_child(url, redis_url, None, opts.horizon) if whole else None
        what = f"{label} {n:,} {mix_name}, window {size:,}"
        if opts.read_on != 0:
            what += f", read-on {opts.read_on}"
        shown = (
            f"{base['first_dispatch_s']:.1f} s (whole fleet, {base['held']:,} held)"
            if base
            else "whole fleet not run (see notes)"
        )
        lines.append(
            Line(
                f"{what}: first dispatch ({got['held']:,} held)",
                f"{got['first_dispatch_s']:.2f} s",
                shown,
                f"<= {GOAL_FIRST_S:g} s",
                verdict(got["first_dispatch_s"] <= GOAL_FIRST_S),
            )
        )
        base_rss = f"{base['peak_mib']:,.0f} MiB" if base else "-"
        lines.append(
            Line(
                f"{what}: beat's peak RSS (before the load {got['rss_before_mib']:.0f} MiB)",
                f"{got['peak_mib']:,.0f} MiB",
                base_rss,
                f"<= {goal_mib:g} MiB",
                verdict(got["peak_mib"] <= goal_mib),
            )
        )
        base_round = f"{base['round_ms']:.2f} ms" if base else "-"
        lines.append(
            Line(
                f"{what}: a dispatch round (4 slots), median of {ROUNDS}",
                f"{got['round_ms']:.2f} ms",
                base_round,
                "-",
                "-",
            )
        )
        for line in lines[-3:]:
            log(line.text())
        if opts.status:
            lines += status_lines(url, redis_url, n, f"{label} {mix_name}", 10.0)
    return lines


def parse(argv: list[str]) -> argparse.Namespace:
    parser = argparse.ArgumentParser(
        prog="python -m benchmarks.beat_window",
        description=__doc__,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    parser.add_argument("--pg-schedules", type=int, default=10_000_000)
    parser.add_argument("--sqlite-schedules", type=int, default=1_000_000)
    parser.add_argument("--batch", type=int, default=250_000, help="rows per upsert_many call")
    parser.add_argument("--window", type=int, default=10_000, help="backlog: the window's size")
    parser.add_argument(
        "--mix-window", type=int, default=50_000, help="seed-001 mix: the window's size"
    )
    parser.add_argument("--horizon", type=float, default=3600.0, help="dgs_schedule_window, s")
    parser.add_argument(
        "--whole-max", type=int, default=1_000_000, help="run the whole-fleet baseline up to this"
    )
    parser.add_argument(
        "--status", action="store_true", help="also fleet_scale's status commands, each mix"
    )
    parser.add_argument(
        "--read-on",
        type=lambda text: None if text == "none" else float(text),
        default=0.0,
        help="dgs_schedule_window_read_on of the windowed beat (none: as far as needed)",
    )
    parser.add_argument("--no-pg", action="store_true")
    parser.add_argument("--no-sqlite", action="store_true")
    return parser.parse_args(argv)


def main(argv: list[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    if argv and argv[0] == "--child":
        url, redis_url, size, horizon, read_on = argv[1:6]
        got = beat_child(
            url,
            redis_url,
            None if size == "none" else int(size),
            float(horizon),
            None if read_on == "none" else float(read_on),
        )
        print(json.dumps(got))
        return 0
    opts = parse(argv)
    from celery_dgs.embedded import RedisServerProcess
    from tests.support.postgres import PostgresServer, postgres_available

    started = time.perf_counter()
    lines: list[Line] = []
    with RedisServerProcess() as redis:
        if not opts.no_sqlite:
            tmp = Path(tempfile.mkdtemp(prefix="dgs-beat-window-"))
            try:
                url = f"sqlite:///{tmp / 'fleet.db'}"
                lines += fleet_lines("SQLite", url, redis.url, opts.sqlite_schedules, opts)
            finally:
                shutil.rmtree(tmp, ignore_errors=True)
        if not opts.no_pg and postgres_available():
            pg = PostgresServer().start()
            try:
                url = pg.create_database("beatwindow")
                lines += fleet_lines("PostgreSQL", url, redis.url, opts.pg_schedules, opts)
            finally:
                pg.stop()
    print(f"\nbeat with a window, {os.cpu_count()} CPUs, {time.perf_counter() - started:.0f} s")
    print(lines_table(lines))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
