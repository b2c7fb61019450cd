"""Short runs on few slots: ``python -m benchmarks.refill``.

A fleet of runtime schedules of a short task (``--run-ms``, 50 ms), every one
eligible all the time (period one hour, cooldown 0: a schedule is eligible again
as soon as its run ends), served by a real ``celery beat`` and one real
``celery worker`` with ``--slots`` thread slots (4; ``--pool prefork``: Celery's
default pool, a child process a slot), on a real Redis-compatible server and a
SQLite store. The processes run the end-to-end tests' project
(``tests/e2e/proj.py``, through :class:`tests.e2e.harness.Cluster`): each run
appends its start and its end to a Redis list, read after the measurement.
``--postgres``: the store on a PostgreSQL server of its own instead of SQLite
(a fresh database each repetition). ``--no-ack-emulation``: kombu's Redis
transport without its ack emulation (no unacked-message bookkeeping in Redis
per message; see docs/operations.md).

Each repetition starts from an empty server and store, waits until the first
runs went through the worker, then counts the runs that end within
``--seconds``. Figures, the median over ``--repeats`` repetitions:

- runs per second;
- a slot's idle time between runs: each run's start takes the slot freed
  longest ago (a run's end frees one), and waited from that end to this start;
  median and p95 over the runs that start in the measured span;
- the CPU time the worker and beat spend per run (``/proc``);
- where that idle time goes, from the processes' log lines (millisecond
  stamps) and the runs' events: the worker ending the run (its outcome
  stored, its lease released, beat signalled), beat's round up to the publish,
  the broker to the worker, the worker starting the next run (its spec read,
  its lease, its run row), and the call of the task's body.

The baselines in the same run: the same fleet with beat not waiting on the
workers' freed-slot signal (``PollOnlyScheduler``: beat sleeps between rounds
up to ``dgs_store_poll_interval``, ``--poll``, as it did before it waited on
the signal), and the slots' ceiling, ``slots / run time`` (80 runs/s).

Goals: runs/s >= 0.8 x the ceiling (64); a slot's idle time between runs when
work is due, median <= 20 ms.
"""

from __future__ import annotations

import argparse
import bisect
import os
import re
import shutil
import statistics
import sys
import tempfile
import time
import uuid
from collections import defaultdict, deque
from dataclasses import dataclass, field
from datetime import datetime
from pathlib import Path
from typing import Any

from celery_dgs.beat.scheduler import DeadlineScheduler
from tests.support.postgres import PostgresServer, postgres_available

from .common import log, median
from .fleet_scale import Line, lines_table, verdict

GOAL_CEILING_SHARE = 0.8
GOAL_IDLE_MEDIAN_MS = 20.0
TASK = "e2e.scrape"
#: This module, as beat imports its baseline scheduler.
MODULE = "benchmarks.refill"


class PollOnlyScheduler(DeadlineScheduler):
    """The baseline: beat sleeps between its rounds (up to the store poll)
    instead of waiting on the workers' freed-slot signal."""

    def setup_schedule(self) -> None:
        super().setup_schedule()
        self.wake = None


@dataclass(frozen=True)
class Measured:
    """One repetition's figures."""

    runs_per_s: float
    runs: int
    idle_ms: list[float]
    pace: dict[str, Any] | None
    #: Each stage of :data:`STAGES`: its milliseconds, one per run.
    stages: dict[str, list[float]] = field(default_factory=dict)
    #: CPU milliseconds per run of the worker and of beat over the measured span.
    cpu_ms: dict[str, float] = field(default_factory=dict)

    @property
    def idle_median_ms(self) -> float:
        return median(self.idle_ms) if self.idle_ms else float("nan")

    @property
    def idle_p95_ms(self) -> float:
        return percentile(self.idle_ms, 0.95)


def percentile(values: list[float], q: float) -> float:
    if not values:
        return float("nan")
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(q * len(ordered)))]


def cpu_seconds(pid: int) -> float:
    """User and system CPU time of process ``pid`` (all its threads) and of
    its live child processes (a prefork worker's pool), seconds."""
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    own = (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")
    return own + sum(cpu_seconds(child) for child in child_pids(pid))


def child_pids(pid: int) -> list[int]:
    """The live child processes of ``pid`` (those gone since are not counted)."""
    out: list[int] = []
    for children in Path(f"/proc/{pid}/task").glob("*/children"):
        try:
            out.extend(int(c) for c in children.read_text().split())
        except OSError:
            continue
    return out


def slot_idle_gaps(events: list[dict[str, Any]], since: float, until: float) -> list[float]:
    """Seconds each start within ``[since, until]`` waited for its slot: the
    slot freed longest ago (starts before any end fill the slots idle from the
    worker's start, and are left out)."""
    freed: deque[float] = deque()
    gaps = []
    for e in sorted(events, key=lambda e: e["t"]):
        if e["kind"] == "end":
            freed.append(e["t"])
        elif e["kind"] == "start" and freed:
            gap = e["t"] - freed.popleft()
            if since <= e["t"] <= until:
                gaps.append(gap)
    return gaps


#: The stages of a slot's idle time, in order (see the module doc).
STAGES = (
    "worker ends the run: outcome stored, lease released, beat signalled",
    "beat: the signal to the published dispatch",
    "broker to the worker",
    "worker starts the run: spec, lease, run row",
    "the run's start to the task's body",
)
_STAMP = re.compile(r"^\[(\d{4}-\d\d-\d\d \d\d:\d\d:\d\d,\d{3}): ")
_DISPATCHED = re.compile(r"celery-dgs: dispatched (\S+) to \S+ \(dispatch (\w+)")
_RECEIVED = re.compile(r"Task \S+\[(\w+)\] received")
_RUN_LINE = re.compile(r"celery-dgs: run \w+ of (\S+) (started|ended)")


def _stamp(line: str) -> float | None:
    found = _STAMP.match(line)
    if found is None:
        return None
    return datetime.strptime(found.group(1), "%Y-%m-%d %H:%M:%S,%f").timestamp()


def log_times(beat_log: str, worker_log: str) -> dict[str, dict[str, list[float]]]:
    """Per kind (``received``, ``started``, ``ended``), each schedule's times
    in the logs, in order; ``dispatched``: for each of its receipts, when
    beat logged that dispatch (beat logs it once published: the worker may
    receive, and start, the run before)."""
    times: dict[str, dict[str, list[float]]] = defaultdict(lambda: defaultdict(list))
    dispatches: dict[str, tuple[str, float]] = {}
    for line in beat_log.splitlines():
        found, at = _DISPATCHED.search(line), _stamp(line)
        if found and at is not None:
            dispatches[found.group(2)] = (found.group(1), at)
    for line in worker_log.splitlines():
        at = _stamp(line)
        received, run = _RECEIVED.search(line), _RUN_LINE.search(line)
        if at is None:
            continue
        if received and received.group(1) in dispatches:
            name, dispatched_at = dispatches[received.group(1)]
            times["received"][name].append(at)
            times["dispatched"][name].append(dispatched_at)
        elif run:
            times[run.group(2)][run.group(1)].append(at)
    return times


def _last_before(values: list[float], t: float, aligned: list[float] | None = None) -> float | None:
    """The last of ``values`` at or before ``t`` (or the entry of ``aligned``
    at its place)."""
    i = bisect.bisect_right(values, t)
    return (values if aligned is None else aligned)[i - 1] if i else None


def _first_after(values: list[float], t: float) -> float | None:
    i = bisect.bisect_left(values, t)
    return values[i] if i < len(values) else None


def idle_stages(
    events: list[dict[str, Any]], logs: dict[str, dict[str, list[float]]], since: float
) -> dict[str, list[float]]:
    """Each run started after ``since``, paired with the end that freed its
    slot (as :func:`slot_idle_gaps` pairs them): the milliseconds of each of
    :data:`STAGES`. A log stamp is cut to the millisecond: it may read up to
    1 ms before the event it follows."""
    freed: deque[str] = deque()
    freed_at: deque[float] = deque()
    out: dict[str, list[float]] = {stage: [] for stage in STAGES}
    for e in sorted(events, key=lambda e: e["t"]):
        name = f"e2e.{e['name']}"
        if e["kind"] == "end":
            freed.append(name)
            freed_at.append(e["t"])
            continue
        if e["kind"] != "start" or not freed:
            continue
        prev, ended_at, start = freed.popleft(), freed_at.popleft(), e["t"]
        points = [
            ended_at,
            _first_after(logs["ended"][prev], ended_at - 0.001),
            _last_before(logs["received"][name], start, logs["dispatched"][name]),
            _last_before(logs["received"][name], start),
            _last_before(logs["started"][name], start),
            start,
        ]
        if start < since or any(p is None for p in points):
            continue
        for stage, a, b in zip(STAGES, points, points[1:], strict=False):
            assert a is not None
            assert b is not None
            out[stage].append((b - a) * 1000)
    return out


def measure_once(
    redis_url: str,
    opts: argparse.Namespace,
    *,
    wake: bool,
    postgres: PostgresServer | None = None,
) -> Measured:
    """One repetition on a fresh server and store: the module doc's figures."""
    import redis

    from celery_dgs.beat_pace import PaceBoard
    from celery_dgs.runtime_schedules import RuntimeSchedules
    from tests.e2e.harness import Cluster, wait_for

    redis.Redis.from_url(redis_url).flushall()
    tmp = Path(tempfile.mkdtemp(prefix="dgs-refill-"))
    cluster = Cluster(
        tmp,
        redis_url,
        ["scrape"],
        E2E_STORE_POLL=str(opts.poll),
        E2E_MAX_LOOP=str(opts.poll * 2.5),
        E2E_ACK_EMULATION="0" if opts.no_ack_emulation else "1",
    )
    if postgres is not None:  # a fresh database of the server for each repetition
        cluster.database_url = postgres.create_database(f"refill_{uuid.uuid4().hex[:12]}")
        cluster.env["E2E_DATABASE_URL"] = cluster.database_url
    try:
        store = cluster.store()
        try:
            rows = [
                {
                    "name": f"{TASK}@r{i:05d}",
                    "period": 3600,
                    "cooldown": 0,
                    "args": [f"r{i:05d}"],
                    "kwargs": {"seconds": opts.run_ms / 1000},
                }
                for i in range(opts.fleet)
            ]
            report = RuntimeSchedules(store).upsert_many(rows)
            assert report.ok, report.errors[:3]
        finally:
            store.close()
        cluster.start_worker("w1", "node1", pool=opts.pool, concurrency=opts.slots)
        scheduler = "celery_dgs:DeadlineScheduler" if wake else f"{MODULE}:PollOnlyScheduler"
        cluster.start_beat(scheduler=scheduler)
        warm = 2 * opts.slots
        wait_for(lambda: len(cluster.ends()) >= warm, 60, f"the first {warm} runs to end")
        time.sleep(opts.warmup)
        pids = {key: proc.pid for key, proc in cluster.procs.items()}
        cpu_before = {key: cpu_seconds(pid) for key, pid in pids.items()}
        since = time.time()
        time.sleep(opts.seconds)
        until = time.time()
        cpu_used = {key: cpu_seconds(pid) - cpu_before[key] for key, pid in pids.items()}
        events = cluster.events()
        pace = PaceBoard(cluster.redis, cluster.keyspace()).read()
        cluster.stop_all()
        logs = log_times(cluster.log_since("beat", 0), cluster.log_since("w1", 0))
    finally:
        cluster.stop_all()
        shutil.rmtree(tmp, ignore_errors=True)
    ends = [e["t"] for e in events if e["kind"] == "end" and since <= e["t"] <= until]
    gaps = slot_idle_gaps(events, since, until)
    return Measured(
        len(ends) / (until - since),
        len(ends),
        [g * 1000 for g in gaps],
        None if pace is None else pace.to_dict(),
        idle_stages(events, logs, since),
        {key: used * 1000 / max(1, len(ends)) for key, used in cpu_used.items()},
    )


def measure(
    redis_url: str,
    opts: argparse.Namespace,
    *,
    wake: bool,
    postgres: PostgresServer | None = None,
) -> list[Measured]:
    label = "beat waits on the freed-slot signal" if wake else "poll only (baseline)"
    out = []
    for rep in range(opts.repeats):
        got = measure_once(redis_url, opts, wake=wake, postgres=postgres)
        log(
            f"{label}, repetition {rep + 1}/{opts.repeats}: {got.runs_per_s:.1f} runs/s "
            f"({got.runs} runs), idle median {got.idle_median_ms:.1f} ms, "
            f"p95 {got.idle_p95_ms:.1f} ms; CPU per run: "
            + ", ".join(f"{key} {ms:.1f} ms" for key, ms in got.cpu_ms.items())
            + f"; beat pace {got.pace}"
        )
        out.append(got)
    return out


def lines(dgs: list[Measured], poll: list[Measured], opts: argparse.Namespace) -> list[Line]:
    ceiling = opts.slots * 1000 / opts.run_ms
    rate = median([m.runs_per_s for m in dgs])
    base_rate = median([m.runs_per_s for m in poll])
    idle = median([m.idle_median_ms for m in dgs])
    base_idle = median([m.idle_median_ms for m in poll])
    p95 = median([m.idle_p95_ms for m in dgs])
    base_p95 = median([m.idle_p95_ms for m in poll])
    slots = f"{opts.slots} slots" if opts.pool == "threads" else f"{opts.slots} {opts.pool} slots"
    what = f"{slots}, {opts.run_ms:g} ms runs, {opts.fleet:,} all eligible"
    goal_rate = GOAL_CEILING_SHARE * ceiling
    return [
        Line(
            f"runs/s, {what}",
            f"{rate:.1f} ({rate / ceiling:.2f} x the ceiling)",
            f"poll only {base_rate:.1f} ({base_rate / ceiling:.2f} x); "
            f"ceiling {ceiling:.0f}; {rate / base_rate:.1f} x poll only",
            f">= {goal_rate:.0f} ({GOAL_CEILING_SHARE:g} x the ceiling)",
            verdict(rate >= goal_rate),
        ),
        Line(
            f"a slot's idle time between runs, median, {what}",
            f"{idle:.1f} ms",
            f"poll only {base_idle:.0f} ms",
            f"<= {GOAL_IDLE_MEDIAN_MS:g} ms",
            verdict(idle <= GOAL_IDLE_MEDIAN_MS),
        ),
        Line(
            f"a slot's idle time between runs, p95, {what}",
            f"{p95:.1f} ms",
            f"poll only {base_p95:.0f} ms",
            "-",
            "-",
        ),
    ]


def parse(argv: list[str]) -> argparse.Namespace:
    parser = argparse.ArgumentParser(
        prog="python -m benchmarks.refill",
        description=__doc__,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    parser.add_argument("--fleet", type=int, default=400, help="runtime schedules")
    parser.add_argument("--slots", type=int, default=4, help="the worker's slots")
    parser.add_argument(
        "--pool",
        choices=("threads", "prefork"),
        default="threads",
        help="the worker's pool: threads (one process) or prefork (a process a slot)",
    )
    parser.add_argument("--run-ms", type=float, default=50.0, help="a run's length, ms")
    parser.add_argument("--poll", type=float, default=2.0, help="dgs_store_poll_interval, s")
    parser.add_argument("--seconds", type=float, default=20.0, help="measured span, s")
    parser.add_argument("--warmup", type=float, default=3.0, help="s after the first runs")
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument(
        "--baseline-seconds", type=float, default=None, help="measured span of the baseline, s"
    )
    parser.add_argument(
        "--smoke", action="store_true", help="a tiny size, once (seconds; the figures say little)"
    )
    parser.add_argument(
        "--postgres",
        action="store_true",
        help="the store on a PostgreSQL server of its own (initdb on the path), not SQLite",
    )
    parser.add_argument(
        "--no-ack-emulation",
        action="store_true",
        help="kombu's Redis transport without ack emulation "
        "(broker_transport_options ack_emulation=False)",
    )
    opts = parser.parse_args(argv)
    if opts.postgres and not postgres_available():
        parser.error("--postgres needs initdb on the path")
    if opts.smoke:
        opts.fleet, opts.seconds, opts.warmup, opts.repeats = 40, 1.5, 0.2, 1
        opts.baseline_seconds = 1.5
    return opts


def main(argv: list[str] | None = None) -> int:
    opts = parse(sys.argv[1:] if argv is None else argv)
    from celery_dgs.embedded import RedisServerProcess

    started = time.perf_counter()
    load = os.getloadavg()
    postgres = PostgresServer().start() if opts.postgres else None
    try:
        with RedisServerProcess() as server:
            dgs = measure(server.url, opts, wake=True, postgres=postgres)
            base_opts = argparse.Namespace(**vars(opts))
            if opts.baseline_seconds is not None:
                base_opts.seconds = opts.baseline_seconds
            poll = measure(server.url, base_opts, wake=False, postgres=postgres)
    finally:
        if postgres is not None:
            postgres.stop()
    print(
        f"\nshort runs on few slots, {os.cpu_count()} CPUs, load {load[0]:.2f} at the start, "
        f"{os.getloadavg()[0]:.2f} at the end; {opts.repeats} repetitions of "
        f"{opts.seconds:g} s, store poll {opts.poll:g} s; "
        f"{time.perf_counter() - started:.0f} s"
    )
    print(lines_table(lines(dgs, poll, opts)))
    print(stage_table(dgs))
    for key in ("w1", "beat"):
        costs = [m.cpu_ms[key] for m in dgs if key in m.cpu_ms]
        if costs:
            who = "the worker" if key == "w1" else "beat"
            print(f"CPU per run, {who}: {median(costs):.1f} ms (median of the repetitions)")
    spread = [f"{m.runs_per_s:.1f}" for m in dgs]
    print(f"runs/s of each repetition: {', '.join(spread)} (stdev {stdev(dgs):.1f})")
    return 0


def stage_table(runs: list[Measured]) -> str:
    """Where a slot's idle time goes, beat waiting on the signal: each stage's
    median and p95 over every measured run of every repetition."""
    out = [
        "\nwhere a slot's idle time goes (beat waits on the signal; every run of every repetition)",
        "| stage | median | p95 |",
        "|---|---|---|",
    ]
    total = 0.0
    for stage in STAGES:
        values = [v for m in runs for v in m.stages.get(stage, [])]
        if not values:
            continue
        total += median(values)
        out.append(f"| {stage} | {median(values):.1f} ms | {percentile(values, 0.95):.1f} ms |")
    out.append(f"| sum of the medians | {total:.1f} ms | |")
    return "\n".join(out)


def stdev(runs: list[Measured]) -> float:
    rates = [m.runs_per_s for m in runs]
    return statistics.stdev(rates) if len(rates) > 1 else 0.0


if __name__ == "__main__":
    raise SystemExit(main())
