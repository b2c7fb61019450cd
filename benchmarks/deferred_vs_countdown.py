"""Future work held by workers, and duplicate runs: ``python -m benchmarks.deferred_vs_countdown``.

Each figure is measured per *scheduler kind*, with its baseline from the same run,
on a real valkey broker (``celery_dgs.embedded.RedisServerProcess``) and real
``celery worker`` subprocesses (prefork pool, ``-c 2``). The kinds
(:data:`MEMORY_KINDS`, :data:`DUPLICATE_KINDS`; ``--kinds``):

- ``countdown``: Celery's own ``apply_async(countdown=...)``, in a plain Celery
  project (``benchmarks/countdown_app.py``, no celery-dgs);
- ``dgs``: celery-dgs deferred checks (``benchmarks/dgs_app.py``): the same
  worker, a real ``celery beat -S celery_dgs:DeadlineScheduler`` and a SQLite
  store (a new file per round); checks added with ``DeferredChecks.at_many``
  in batches of :data:`ADD_BATCH`. Described below after each measurement.

1. **Worker memory** (``--count``, default 100,000): a fresh worker; its memory
   at rest (the baseline: the same worker holding 0 future tasks); then
   ``--count`` no-op tasks are published with ``countdown`` = 1 h (kombu's default
   transport options), and once the broker has handed every one of them to the
   worker (queue empty, kombu's ``unacked`` hash holding all of them) and the
   worker's memory has settled, its memory again. Memory is the resident set
   (``VmRSS``) summed over the main process and its pool children, read from
   /proc; the proportional set size (``Pss``, shared pages split between the
   processes) is given beside it. Afterwards ``inspect().scheduled()`` confirms
   how many future tasks the worker holds. ``--repeats`` fresh workers; medians.

   ``dgs``: a fresh worker and beat; once beat has dispatched a warm-up check
   due at once and the worker ran it, the worker's and beat's memory (the
   baselines: 0 pending checks). Then ``--count`` checks due in 1 h are added
   to the store, and one more due at once: once it ran, beat's change poll has
   passed the others. The worker's and beat's memory again; then beat is
   replaced by a fresh one, which reads the store with the checks pending (its
   start-up line says how many it holds: those due within
   ``dgs_check_window``), and, after one more check due at once ran, its memory.

2. **Duplicate executions** (``--tasks``, default 200): tasks published with a
   countdown beside the Redis transport's ``visibility_timeout`` (``--visibility-timeout``,
   default 4 s). Every execution adds one to its task id's counter in Redis
   (``dgs_bench.record``). After every task ran at least once, the run waits
   until nothing is left that could run again (the queue and kombu's
   ``unacked`` hash are empty and no worker holds a scheduled, reserved or
   active task, twice in a row), then counts the tasks that ran more than once.
   ``dgs``: ``--tasks`` checks due after the same delay, with the same
   transport options on the celery-dgs project; each execution of a check adds
   one to its key's counter. The run waits until every check ended
   (``check_history``) and ran, and then, as above, until nothing is left on
   the queues (the workers' ``worker_direct`` queues too) or in ``unacked``
   and no worker holds a task. The store's run records and check endings are
   reported beside the counts.
   Scenarios (``--scenarios``; "countdown" is the delay of either kind):

   - ``below-vt``: countdown V/2, one worker (the baseline: expected 0);
   - ``above-vt``: countdown 3 V, one worker;
   - ``two-workers``: countdown 3 V, two workers;
   - ``default-cadence``: countdown 100 s + 3 V + 15 s, one worker, kombu's
     default restore cadence (a scan about every 100 s).

   kombu's Redis transport emulates acknowledgements: a delivered message is
   kept in the ``unacked`` hash, indexed by its delivery time, until it is
   acked; ``QoS.restore_visible`` puts every message delivered more than
   ``visibility_timeout`` ago back on its queue. A worker acks a countdown task
   only when it runs it, so a countdown longer than the timeout is delivered
   again while the first worker still holds it. The restore scan runs every
   ``unacked_restore_interval`` (10 s) and scans on every
   ``unacked_restore_throttle``-th (10th) call: about every 100 s, and when the
   worker's event loop starts. With hour-long timeouts that cadence is small
   beside the timeout; scaled down to seconds it is not, so the scenarios
   above scale the cadence with the timeout (a scan every second:
   ``unacked_restore_interval=1``, ``unacked_restore_throttle=1``), except
   ``default-cadence``, which keeps kombu's and makes the countdown long
   enough to meet one of its scans.

The table is printed and written as JSON (``--json``, default
``benchmarks/results-deferred-latest.json``).
"""

from __future__ import annotations

import argparse
import contextlib
import functools
import json
import os
import signal
import subprocess
import sys
import tempfile
import time
import uuid
from collections.abc import Callable, Mapping, Sequence
from dataclasses import asdict, dataclass, field
from datetime import datetime, timezone
from pathlib import Path
from typing import TYPE_CHECKING, Any

from tests.e2e.harness import wait_for

if TYPE_CHECKING:
    from celery_dgs.deferred import DeferredChecks
    from celery_dgs.store.base import ScheduleStore
    from celery_dgs.store.sql import SqlScheduleStore

from .common import RESULTS_DIR, Profile, Result, log, median, table, write_json

ROOT = Path(__file__).resolve().parents[1]
APP = "benchmarks.countdown_app"
DGS_APP = "benchmarks.dgs_app"
#: What ``celery beat -S celery_dgs:DeadlineScheduler`` logs once it has read the store.
BEAT_LOADED = "celery-dgs beat: loaded"
#: kombu's Redis transport keeps a queue's messages of priority 3, 6 and 9 in lists of their own.
PRIORITY_STEPS = (0, 3, 6, 9)
#: Deferred checks added per ``DeferredChecks.at_many`` call (one store transaction).
ADD_BATCH = 10_000
QUEUE = "celery"
MEMORY_COUNTDOWN_S = 3600
POOL, CONCURRENCY = "prefork", 2
SETTLE_READS, SETTLE_INTERVAL_S, SETTLE_TOLERANCE_MIB = 4, 0.5, 0.5


# -- process memory ------------------------------------------------------------------------
@dataclass(frozen=True)
class TreeMemory:
    """Memory of a worker: its main process and its pool children, in MiB."""

    main_rss: float
    children_rss: float
    pss: float  # proportional set size over the same processes
    children: int

    @property
    def rss(self) -> float:
        return self.main_rss + self.children_rss


def _status_kib(pid: int, field_name: str, path: str = "status") -> float:
    with open(f"/proc/{pid}/{path}") as f:
        for line in f:
            if line.startswith(field_name + ":"):
                return float(line.split()[1])
    raise RuntimeError(f"/proc/{pid}/{path} has no {field_name}")


def child_pids(pid: int) -> list[int]:
    """The direct children of ``pid`` (from each process's /proc/<pid>/stat)."""
    found = []
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            with open(f"/proc/{entry}/stat") as f:
                stat = f.read()
        except OSError:
            continue
        # The name (field 2) is in parentheses and may contain spaces.
        ppid = int(stat.rsplit(")", 1)[1].split()[1])
        if ppid == pid:
            found.append(int(entry))
    return sorted(found)


def tree_memory(pid: int) -> TreeMemory:
    children = child_pids(pid)
    main = _status_kib(pid, "VmRSS")
    kids, pss = 0.0, _status_kib(pid, "Pss", "smaps_rollup")
    for child in children:
        with contextlib.suppress(OSError, RuntimeError):  # a child may be replaced meanwhile
            kids += _status_kib(child, "VmRSS")
            pss += _status_kib(child, "Pss", "smaps_rollup")
    return TreeMemory(main / 1024, kids / 1024, pss / 1024, len(children))


def settled_memory(pid: int, timeout: float = 120.0) -> TreeMemory:
    """The worker's memory once ``SETTLE_READS`` reads in a row (every
    ``SETTLE_INTERVAL_S``) stay within ``SETTLE_TOLERANCE_MIB`` of each other."""
    reads: list[TreeMemory] = []
    deadline = time.monotonic() + timeout
    while True:
        reads.append(tree_memory(pid))
        last = [r.rss for r in reads[-SETTLE_READS:]]
        if len(last) == SETTLE_READS and max(last) - min(last) <= SETTLE_TOLERANCE_MIB:
            return reads[-1]
        if time.monotonic() > deadline:
            raise AssertionError(f"worker memory did not settle in {timeout}s: {last}")
        time.sleep(SETTLE_INTERVAL_S)


# -- the bench: server, clients, workers -----------------------------------------------------
class Bench:
    """A real valkey server, a Celery client of it and the workers started on it."""

    def __init__(self, redis_url: str, tmp: Path) -> None:
        import redis
        from celery import Celery

        self.redis_url = redis_url
        self.tmp = tmp
        self.redis = redis.Redis.from_url(redis_url)
        self.client = Celery("dgs-bench-client", broker=redis_url)
        self.client.conf.update(task_serializer="json", broker_connection_retry_on_startup=True)
        self.procs: dict[str, subprocess.Popen[bytes]] = {}

    def reset(self) -> None:
        self.redis.flushall()

    def _env(self, transport_options: dict[str, Any], env: dict[str, str] | None) -> dict[str, str]:
        return {
            **os.environ,
            "PYTHONPATH": str(ROOT),
            "DGS_BENCH_BROKER": self.redis_url,
            "DGS_BENCH_TRANSPORT_OPTIONS": json.dumps(transport_options),
            **(env or {}),
        }

    def _spawn(self, name: str, app: str, args: list[str], env: dict[str, str]) -> None:
        with open(self.tmp / f"{name}.log", "ab") as out:
            self.procs[name] = subprocess.Popen(
                [sys.executable, "-m", "celery", "-A", app, *args],
                cwd=ROOT,
                env=env,
                stdout=out,
                stderr=subprocess.STDOUT,
                start_new_session=True,
            )

    def start_workers(
        self,
        names: Sequence[str],
        transport_options: dict[str, Any],
        app: str = APP,
        env: dict[str, str] | None = None,
    ) -> None:
        """Start ``celery worker`` processes of the benchmark project ``app``; return
        once each answers a ping."""
        full_env = self._env(transport_options, env)
        for name in names:
            self._spawn(
                name,
                app,
                [
                    "worker",
                    "-n",
                    f"{name}@bench",
                    "-P",
                    POOL,
                    "-c",
                    str(CONCURRENCY),
                    "-l",
                    "WARNING",
                    "--without-gossip",
                    "--without-mingle",
                    "--without-heartbeat",
                ],
                full_env,
            )
        for name in names:
            wait_for(functools.partial(self.ping, name), 60, f"worker {name} to answer a ping")

    def start_beat(self, name: str, transport_options: dict[str, Any], env: dict[str, str]) -> str:
        """Start ``celery beat -S celery_dgs:DeadlineScheduler`` of the celery-dgs
        project; return, once it logged its start-up read of the store, that line."""
        offset = self.log_size(name)
        self._spawn(
            name,
            DGS_APP,
            [
                "beat",
                "-S",
                "celery_dgs:DeadlineScheduler",
                "-l",
                "INFO",
                "--pidfile",
                str(self.tmp / f"{name}.pid"),
                "-s",
                str(self.tmp / f"{name}-schedule"),
            ],
            self._env(transport_options, env),
        )

        def loaded() -> str | None:
            if self.procs[name].poll() is not None:
                raise RuntimeError(
                    f"beat {name} exited with {self.procs[name].returncode}:\n{self.log(name)}"
                )
            lines = self.log_since(name, offset).splitlines()
            return next((line for line in lines if BEAT_LOADED in line), None)

        return str(wait_for(loaded, 120, f"beat {name} to read the store", interval=0.2))

    def log_size(self, name: str) -> int:
        path = self.tmp / f"{name}.log"
        return path.stat().st_size if path.exists() else 0

    def log_since(self, name: str, offset: int) -> str:
        with open(self.tmp / f"{name}.log", "rb") as f:
            f.seek(offset)
            return f.read().decode(errors="replace")

    def ping(self, name: str) -> bool:
        proc = self.procs[name]
        if proc.poll() is not None:
            raise RuntimeError(f"worker {name} exited with {proc.returncode}:\n{self.log(name)}")
        return bool(self.client.control.ping(destination=[f"{name}@bench"], timeout=0.5))

    def log(self, name: str) -> str:
        path = self.tmp / f"{name}.log"
        return path.read_text(errors="replace")[-4000:] if path.exists() else ""

    def stop(self, name: str, *, kill: bool = False) -> None:
        """Stop one process: SIGTERM (a warm shutdown) or, with ``kill``, SIGKILL of
        its process group."""
        proc = self.procs.pop(name)
        if proc.poll() is None:
            with contextlib.suppress(ProcessLookupError):
                os.killpg(proc.pid, signal.SIGKILL if kill else signal.SIGTERM)
            try:
                proc.wait(30)
            except subprocess.TimeoutExpired:
                os.killpg(proc.pid, signal.SIGKILL)
                proc.wait(30)

    def stop_workers(self, *, kill: bool = False) -> None:
        """Stop every process started (workers and beats), as :meth:`stop`."""
        for name in list(self.procs):
            self.stop(name, kill=kill)

    def inspect(self, method: str, names: Sequence[str], timeout: float) -> dict[str, list[Any]]:
        """``inspect().<method>()`` of the named workers; an error unless all replied."""
        wanted = [f"{n}@bench" for n in names]
        replies = (
            getattr(self.client.control.inspect(destination=wanted, timeout=timeout), method)()
            or {}
        )
        missing = set(wanted) - set(replies)
        if missing:
            raise RuntimeError(f"no {method} reply from {sorted(missing)} within {timeout}s")
        return dict(replies)

    def held(self, names: Sequence[str]) -> int:
        """Tasks the workers hold: scheduled (future), reserved or running."""
        return sum(
            len(tasks)
            for method in ("scheduled", "reserved", "active")
            for tasks in self.inspect(method, names, timeout=5).values()
        )

    def broker_holds(self, queues: Sequence[str] = (QUEUE,)) -> tuple[int, int]:
        """Messages on the queues (each with its priority lists), and delivered but
        not acked (kombu's ``unacked`` hash)."""
        keys = [
            q + suffix
            for q in queues
            for suffix in ("", *(f"\x06\x16{p}" for p in PRIORITY_STEPS[1:]))
        ]
        return sum(int(self.redis.llen(k)) for k in keys), int(self.redis.hlen("unacked"))

    def publish(
        self, task: str, count: int, countdown: float, args: Sequence[Any] = ()
    ) -> list[str]:
        """``send_task(task, countdown=...)`` ``count`` times on one producer; the ids."""
        ids = []
        with self.client.producer_or_acquire() as producer:
            for _ in range(count):
                result = self.client.send_task(
                    task, args=list(args), countdown=countdown, producer=producer
                )
                ids.append(str(result.id))
        return ids


# -- 1. worker memory --------------------------------------------------------------------------
@dataclass
class MemoryFigure:
    kind: str
    count: int
    pool: str
    idle: TreeMemory  # the same worker with no future task
    loaded: TreeMemory  # holding ``count`` future tasks
    held: int  # future tasks the worker reports holding (``inspect().scheduled()``)
    publish_s: float
    receive_s: float  # from the end of publishing until the broker handed all to the worker
    # celery-dgs's beat (``dgs``): running while the checks were added, and a
    # fresh one started with them pending; the checks its start-up read held.
    beat_idle: TreeMemory | None = None
    beat_loaded: TreeMemory | None = None
    beat_restarted: TreeMemory | None = None
    beat_start_checks: int | None = None


def countdown_memory(bench: Bench, count: int) -> MemoryFigure:
    """A fresh worker's memory at rest, then with ``count`` no-op tasks published
    with ``countdown`` = 1 h (kombu's default transport options)."""
    bench.reset()
    name = "mem"
    bench.start_workers([name], {})
    try:
        pid = bench.procs[name].pid
        idle = settled_memory(pid)
        start = time.perf_counter()
        bench.publish("dgs_bench.noop", count, MEMORY_COUNTDOWN_S)
        publish_s = time.perf_counter() - start
        start = time.perf_counter()
        wait_for(
            lambda: bench.broker_holds() == (0, count),
            120 + count / 100,
            f"the worker to receive {count:,} countdown tasks",
            interval=0.5,
        )
        receive_s = time.perf_counter() - start
        loaded = settled_memory(pid)
        # After the reading: the reply to this query is as large as what it lists.
        held = sum(map(len, bench.inspect("scheduled", [name], timeout=120).values()))
    finally:
        bench.stop_workers(kill=True)  # a warm shutdown would first restore every message
    return MemoryFigure(
        "countdown", count, f"{POOL} -c {CONCURRENCY}", idle, loaded, held, publish_s, receive_s
    )


def dgs_memory(bench: Bench, count: int) -> MemoryFigure:
    """A fresh celery-dgs worker and beat at rest, then with ``count`` deferred checks
    due in 1 h added to the store; then a fresh beat started with them pending."""
    bench.reset()
    store, api, env = dgs_store(bench, "mem")
    counter = "dgs-bench:mem"
    try:
        bench.start_workers(["mem"], {}, app=DGS_APP, env=env)
        bench.start_beat("mem-beat", {}, env)
        # The same warm-up as after the add below: beat has dispatched one check and
        # the worker ran it.
        run_probe(store, api, counter, "warm-up")
        pid, beat_pid = bench.procs["mem"].pid, bench.procs["mem-beat"].pid
        idle, beat_idle = settled_memory(pid), settled_memory(beat_pid)
        start = time.perf_counter()
        add_checks(api, [f"c{i:07d}" for i in range(count)], MEMORY_COUNTDOWN_S, counter)
        add_s = time.perf_counter() - start
        start = time.perf_counter()
        # Added after the checks: once it ran, beat's change poll had passed them.
        run_probe(store, api, counter, "after-add")
        polled_s = time.perf_counter() - start
        loaded, beat_loaded = settled_memory(pid), settled_memory(beat_pid)
        held = sum(map(len, bench.inspect("scheduled", ["mem"], timeout=30).values()))
        pending = store.check_summary(datetime.now(timezone.utc)).total_pending
        assert pending == count, f"{pending:,} checks pending, {count:,} added"
        bench.stop("mem-beat")
        line = bench.start_beat("mem-beat2", {}, env)
        run_probe(store, api, counter, "after-restart")
        beat_restarted = settled_memory(bench.procs["mem-beat2"].pid)
    except BaseException:
        for name in list(bench.procs):
            log(f"{name} log:\n{bench.log(name)}")
        raise
    finally:
        bench.stop_workers(kill=True)
        store.close()
    return MemoryFigure(
        "dgs",
        count,
        f"{POOL} -c {CONCURRENCY}",
        idle,
        loaded,
        held,
        add_s,
        polled_s,
        beat_idle,
        beat_loaded,
        beat_restarted,
        beat_checks_loaded(line),
    )


def dgs_store(bench: Bench, name: str) -> tuple[SqlScheduleStore, DeferredChecks, dict[str, str]]:
    """A new SQLite store for one round (schema created), the deferred-check API on it
    with the celery-dgs project's declaration, and the processes' environment."""
    from celery_dgs.core.clock import SystemClock
    from celery_dgs.deferred import DeferredChecks
    from celery_dgs.store.sql import SqlScheduleStore

    from . import dgs_app

    url = f"sqlite:///{bench.tmp / f'{name}-{uuid.uuid4().hex[:8]}.sqlite3'}"
    store = SqlScheduleStore.open(url)
    api = DeferredChecks(store, dgs_app.dgs.check_templates, clock=SystemClock())
    return store, api, {"DGS_BENCH_DATABASE_URL": url}


def add_checks(api: DeferredChecks, keys: Sequence[str], after: float, counter: str) -> None:
    """``DeferredChecks.at_many`` of the checks of ``keys``, due ``after`` seconds from
    now, in batches of :data:`ADD_BATCH`; each counts its executions in ``counter``."""
    from .dgs_app import CHECK_TASK

    for first in range(0, len(keys), ADD_BATCH):
        report = api.at_many(
            [
                {
                    "task": CHECK_TASK,
                    "key": key,
                    "after": after,
                    "kwargs": {"counter": counter, "key": key},
                }
                for key in keys[first : first + ADD_BATCH]
            ]
        )
        assert len(report.added) == len(keys[first : first + ADD_BATCH]), "a check was kept"


def check_name(key: str) -> str:
    from .dgs_app import CHECK_TASK

    return f"{CHECK_TASK}@check:{key}"


def run_probe(store: ScheduleStore, api: DeferredChecks, counter: str, key: str) -> None:
    """Add a check due now and wait until it ran and ended: beat has read the store up
    to it and dispatched it, and a worker ran it."""
    add_checks(api, [key], 0, counter)
    wait_for(
        lambda: store.check_history(name=check_name(key)),
        120,
        f"the check {key!r} to run and end",
        interval=0.2,
    )


def _text(value: bytes | str) -> str:
    """A Redis reply of the bench's client (``bytes``) as text."""
    return value.decode() if isinstance(value, bytes) else value


def beat_checks_loaded(line: str) -> int:
    """The deferred checks beat's start-up line says it read (``... and N deferred checks``)."""
    words = line.split(" deferred checks", 1)[0].split()
    return int(words[-1])


# -- 2. duplicate executions ---------------------------------------------------------------------
@dataclass(frozen=True)
class DuplicateScenario:
    name: str
    what: str
    tasks: int
    countdown_s: float
    visibility_timeout_s: int
    workers: int
    restore_interval_s: int | None  # None: kombu's default cadence
    restore_throttle: int | None

    def transport_options(self) -> dict[str, Any]:
        options: dict[str, Any] = {"visibility_timeout": self.visibility_timeout_s}
        if self.restore_interval_s is not None:
            options["unacked_restore_interval"] = self.restore_interval_s
        if self.restore_throttle is not None:
            options["unacked_restore_throttle"] = self.restore_throttle
        return options

    def scan_period_s(self) -> int:
        """Seconds between two of kombu's restore scans in a worker."""
        interval, throttle = default_cadence()
        return (self.restore_interval_s or interval) * (self.restore_throttle or throttle)

    def cadence(self) -> str:
        default = " (kombu's default)" if self.restore_interval_s is None else ""
        return f"a restore scan every {self.scan_period_s()} s{default}"


def default_cadence() -> tuple[int, int]:
    """kombu's ``unacked_restore_interval`` and ``unacked_restore_throttle`` defaults."""
    from kombu.transport.redis import Channel

    return int(Channel.unacked_restore_interval), int(Channel.unacked_restore_throttle)


def scenarios(tasks: int, vt: int) -> dict[str, DuplicateScenario]:
    interval, throttle = default_cadence()
    return {
        s.name: s
        for s in [
            DuplicateScenario(
                "below-vt",
                "countdown below visibility_timeout, 1 worker",
                tasks,
                vt / 2,
                vt,
                1,
                1,
                1,
            ),
            DuplicateScenario(
                "above-vt", "countdown 3x visibility_timeout, 1 worker", tasks, 3 * vt, vt, 1, 1, 1
            ),
            DuplicateScenario(
                "two-workers",
                "countdown 3x visibility_timeout, 2 workers",
                tasks,
                3 * vt,
                vt,
                2,
                1,
                1,
            ),
            DuplicateScenario(
                "default-cadence",
                "countdown past kombu's next restore scan, 1 worker",
                tasks,
                interval * throttle + 3 * vt + 15,
                vt,
                1,
                None,
                None,
            ),
        ]
    }


@dataclass
class DuplicateFigure:
    kind: str
    scenario: DuplicateScenario
    tasks: int
    executions: int
    duplicated: int  # tasks that ran more than once
    extra: int  # executions beyond the first of each task
    max_runs: int
    on_two_workers: int  # duplicated tasks that ran on more than one worker
    histogram: dict[int, int] = field(default_factory=dict)  # runs -> tasks
    elapsed_s: float = 0.0
    # celery-dgs (``dgs``): the store's run records and check endings, by outcome.
    run_outcomes: dict[str, int] = field(default_factory=dict)
    check_outcomes: dict[str, int] = field(default_factory=dict)


def duplicate_figure(
    kind: str,
    scenario: DuplicateScenario,
    runs: Mapping[Any, int],
    hosts: Mapping[Any, set[str]],
    elapsed_s: float,
    **outcomes: dict[str, int],
) -> DuplicateFigure:
    """The figure of one run: ``runs`` executions per task, ``hosts`` the workers of
    each task that ran more than once."""
    histogram: dict[int, int] = {}
    for n in runs.values():
        histogram[n] = histogram.get(n, 0) + 1
    return DuplicateFigure(
        kind=kind,
        scenario=scenario,
        tasks=len(runs),
        executions=sum(runs.values()),
        duplicated=sum(1 for n in runs.values() if n > 1),
        extra=sum(n - 1 for n in runs.values()),
        max_runs=max(runs.values()),
        on_two_workers=sum(1 for h in hosts.values() if len(h) > 1),
        histogram=dict(sorted(histogram.items())),
        elapsed_s=elapsed_s,
        **outcomes,
    )


def countdown_duplicates(bench: Bench, scenario: DuplicateScenario) -> DuplicateFigure:
    """Publish ``scenario.tasks`` recording tasks with the scenario's countdown and
    count every execution of each, until nothing is left that could run again."""
    bench.reset()
    names = [f"dup{i + 1}" for i in range(scenario.workers)]
    key = f"dgs-bench:runs:{scenario.name}:{uuid.uuid4().hex[:8]}"
    bench.start_workers(names, scenario.transport_options())
    started = time.perf_counter()
    try:
        ids = bench.publish("dgs_bench.record", scenario.tasks, scenario.countdown_s, [key])
        slack = 120 + 2 * scenario.visibility_timeout_s
        slack += 2 * scenario.scan_period_s()
        wait_for(
            lambda: bench.redis.hlen(key) >= len(ids),
            scenario.countdown_s + slack,
            f"every one of {len(ids)} tasks to run",
            interval=0.5,
        )
        quiet: list[bool] = []

        def nothing_left() -> bool:
            # The order follows a message's way: queue, then delivered (unacked)
            # and held by a worker. Twice in a row: no copy was in flight.
            empty = bench.broker_holds() == (0, 0) and bench.held(names) == 0
            quiet.append(empty)
            return len(quiet) >= 2 and quiet[-1] and quiet[-2]

        wait_for(nothing_left, slack + scenario.countdown_s, "no copy left to run", interval=1.0)
        runs = {_text(k): int(v) for k, v in bench.redis.hgetall(key).items()}
        hosts = {
            i: {_text(h) for h in bench.redis.lrange(f"{key}:{i}", 0, -1)}
            for i, n in runs.items()
            if n > 1
        }
    except BaseException:
        for name in names:
            log(f"worker {name} log:\n{bench.log(name)}")
        raise
    finally:
        bench.stop_workers()
    assert set(runs) == set(ids), "an execution of a task this run did not publish"
    return duplicate_figure("countdown", scenario, runs, hosts, time.perf_counter() - started)


def dgs_duplicates(bench: Bench, scenario: DuplicateScenario) -> DuplicateFigure:
    """Add ``scenario.tasks`` recording checks due after the scenario's countdown, run
    by celery-dgs's beat and workers on the scenario's transport options, and count
    every execution of each, until every check ended and nothing is left that could
    run again."""
    bench.reset()
    names = [f"dup{i + 1}" for i in range(scenario.workers)]
    counter = f"dgs-bench:runs:{scenario.name}:{uuid.uuid4().hex[:8]}"
    options = scenario.transport_options()
    store, api, env = dgs_store(bench, f"dup-{scenario.name}")
    started = time.perf_counter()
    try:
        bench.start_workers(names, options, app=DGS_APP, env=env)
        bench.start_beat("dup-beat", options, env)
        keys = [f"k{i:05d}" for i in range(scenario.tasks)]
        add_checks(api, keys, scenario.countdown_s, counter)
        slack = 120 + 2 * scenario.visibility_timeout_s + 2 * scenario.scan_period_s()
        from .dgs_app import CHECK_TASK, DGS_STORE_POLL_INTERVAL_S

        def all_ended() -> bool:
            ended = store.check_history(task=CHECK_TASK, limit=len(keys) + 1)
            return len(ended) >= len(keys) and bench.redis.hlen(counter) >= len(keys)

        # Beat dispatches them within the workers' free slots: a round per tick.
        rounds = len(keys) / (scenario.workers * CONCURRENCY) * 4 * DGS_STORE_POLL_INTERVAL_S
        wait_for(
            all_ended,
            scenario.countdown_s + slack + rounds,
            f"every one of {len(keys)} checks to run and end",
            interval=0.5,
        )
        queues = [QUEUE, *(f"{n}@bench.dq2" for n in names)]  # worker_direct queues
        quiet: list[bool] = []

        def nothing_left() -> bool:
            empty = bench.broker_holds(queues) == (0, 0) and bench.held(names) == 0
            quiet.append(empty)
            return len(quiet) >= 2 and quiet[-1] and quiet[-2]

        wait_for(nothing_left, slack + scenario.countdown_s, "no copy left to run", interval=1.0)
        runs = {_text(k): int(v) for k, v in bench.redis.hgetall(counter).items()}
        hosts = {
            k: {_text(h) for h in bench.redis.lrange(f"{counter}:{k}", 0, -1)}
            for k, n in runs.items()
            if n > 1
        }
        run_outcomes: dict[str, int] = {}
        for key in keys:
            for record in store.runs(check_name(key)):
                run_outcomes[record.outcome] = run_outcomes.get(record.outcome, 0) + 1
        check_outcomes: dict[str, int] = {}
        for ended in store.check_history(task=CHECK_TASK, limit=len(keys) + 1):
            check_outcomes[ended.outcome] = check_outcomes.get(ended.outcome, 0) + 1
    except BaseException:
        for name in list(bench.procs):
            log(f"{name} log:\n{bench.log(name)}")
        raise
    finally:
        bench.stop_workers()
        store.close()
    assert set(runs) == set(keys), "an execution of a check this run did not add"
    return duplicate_figure(
        "dgs",
        scenario,
        runs,
        hosts,
        time.perf_counter() - started,
        run_outcomes=dict(sorted(run_outcomes.items())),
        check_outcomes=dict(sorted(check_outcomes.items())),
    )


# -- kinds -----------------------------------------------------------------------------------
MemoryFn = Callable[[Bench, int], MemoryFigure]
DuplicateFn = Callable[[Bench, DuplicateScenario], DuplicateFigure]
#: How each scheduler kind holds ``count`` future tasks: a worker's memory with and
#: without them.
MEMORY_KINDS: dict[str, MemoryFn] = {"countdown": countdown_memory, "dgs": dgs_memory}
#: How each scheduler kind runs tasks delayed as in a scenario: executions per task.
DUPLICATE_KINDS: dict[str, DuplicateFn] = {"countdown": countdown_duplicates, "dgs": dgs_duplicates}


def worker_memory(kind: str, bench: Bench, count: int) -> MemoryFigure:
    if kind not in MEMORY_KINDS:
        raise ValueError(
            f"no memory measurement for scheduler kind {kind!r}: known {sorted(MEMORY_KINDS)}"
        )
    return MEMORY_KINDS[kind](bench, count)


def duplicate_executions(kind: str, bench: Bench, scenario: DuplicateScenario) -> DuplicateFigure:
    if kind not in DUPLICATE_KINDS:
        raise ValueError(
            f"no duplicate measurement for scheduler kind {kind!r}: known {sorted(DUPLICATE_KINDS)}"
        )
    return DUPLICATE_KINDS[kind](bench, scenario)


# -- the table ---------------------------------------------------------------------------------
#: What each kind calls the work it holds for later, and the delay of that work.
HELD = {"countdown": "future tasks", "dgs": "pending checks"}
DELAY = {"countdown": "countdown", "dgs": "checks due in"}
#: Beat's memory with 100,000s of pending checks, above the same beat with none.
GOAL_BEAT_MIB = 300.0


def memory_rows(kind: str, figures: list[MemoryFigure]) -> list[Result]:
    loaded = median([f.loaded.rss for f in figures])
    idle = median([f.idle.rss for f in figures])
    count, f0 = figures[0].count, figures[0]
    held_word = HELD.get(kind, "future tasks")
    per_task = (loaded - idle) * 1024 * 1024 / count if count else 0.0
    if f0.beat_idle is None:
        how = (
            f"inspect().scheduled() lists {', '.join(f'{f.held:,}' for f in figures)}; "
            f"published in {median([f.publish_s for f in figures]):.1f} s, all received "
            f"{median([f.receive_s for f in figures]):.1f} s later"
        )
        name = f"[{kind}] worker RSS holding {held_word} ({f0.pool})"
    else:
        how = (
            f"inspect().scheduled() lists {', '.join(f'{f.held:,}' for f in figures)}; "
            f"added with DeferredChecks.at_many ({ADD_BATCH:,} a call) in "
            f"{median([f.publish_s for f in figures]):.1f} s; a check added after them "
            f"ran {median([f.receive_s for f in figures]):.1f} s later"
        )
        name = f"[{kind}] worker RSS with {held_word} in the store ({f0.pool})"
    rows = [
        Result(
            name=name,
            n=count,
            median=loaded,
            unit="MiB",
            baseline=idle,
            baseline_name=f"the same worker, 0 {held_word}",
            ratio=loaded / idle,
            ratio_note="(with/without)",
            samples=[f.loaded.rss for f in figures],
            notes=f"{loaded - idle:+,.1f} MiB, {per_task:,.0f} bytes per {held_word[:-1]}; main "
            f"process {median([f.loaded.main_rss for f in figures]):,.0f} MiB (idle "
            f"{median([f.idle.main_rss for f in figures]):,.0f}), {f0.loaded.children} pool "
            f"children {median([f.loaded.children_rss for f in figures]):,.0f} MiB (idle "
            f"{median([f.idle.children_rss for f in figures]):,.0f}); PSS "
            f"{median([f.loaded.pss for f in figures]):,.0f} MiB (idle "
            f"{median([f.idle.pss for f in figures]):,.0f}); {how}",
        )
    ]
    beats = [f for f in figures if f.beat_idle and f.beat_loaded and f.beat_restarted]
    if beats:
        base = median([f.beat_idle.rss for f in beats if f.beat_idle])
        for label, values in (
            ("running while they were added", [f.beat_loaded.rss for f in beats if f.beat_loaded]),
            (
                "started with them pending",
                [f.beat_restarted.rss for f in beats if f.beat_restarted],
            ),
        ):
            value = median(values)
            rows.append(
                Result(
                    name=f"[{kind}] beat RSS with {held_word} due in 1 h, {label}",
                    n=count,
                    median=value,
                    unit="MiB",
                    baseline=base,
                    baseline_name=f"the same beat, 0 {held_word}: {value - base:+.1f} MiB",
                    goal=f"< +{GOAL_BEAT_MIB:.0f} MiB",
                    met=value - base < GOAL_BEAT_MIB,
                    samples=values,
                    notes=f"beat's start-up read held "
                    f"{', '.join(str(f.beat_start_checks) for f in beats)} deferred checks (its "
                    "window: the checks due within dgs_check_window)",
                )
            )
    return rows


def _duplicate_name(kind: str, s: DuplicateScenario) -> str:
    workers = f"{s.workers} worker" + ("s" if s.workers > 1 else "")
    return (
        f"[{kind}] duplicate executions: {DELAY.get(kind, 'countdown')} "
        f"{s.countdown_s:g} s, visibility_timeout {s.visibility_timeout_s} s, {workers}, "
        f"restore scan every {s.scan_period_s()} s"
    )


def _duplicate_notes(f: DuplicateFigure) -> str:
    what = "checks" if f.kind == "dgs" else "tasks"
    store = (
        f"; run records by outcome {f.run_outcomes}, checks ended {f.check_outcomes}"
        if f.kind == "dgs"
        else ""
    )
    return (
        f"{f.scenario.what}; {f.duplicated} of {f.tasks} {what} ran more than once; "
        f"{f.executions} executions (at most {f.max_runs} of one; {what} by runs: "
        f"{f.histogram}); {f.on_two_workers} duplicated {what} ran on two workers"
        f"{store}; {f.elapsed_s:.0f} s"
    )


def duplicate_rows(kind: str, figures: list[DuplicateFigure]) -> list[Result]:
    """One row per scenario: the executions beyond each task's first, beside the
    ``below-vt`` scenario's (when it ran), which has no row of its own."""
    baseline = next((f for f in figures if f.scenario.name == "below-vt"), None)
    measured = [f for f in figures if f is not baseline] or figures
    rows = []
    for f in measured:
        row = Result(
            name=_duplicate_name(kind, f.scenario),
            n=f.tasks,
            median=float(f.extra),
            unit="runs",
            notes=_duplicate_notes(f),
        )
        if baseline is not None and f is not baseline:
            row.baseline = float(baseline.extra)
            row.baseline_name = (
                f"{DELAY.get(kind, 'countdown')} "
                f"{baseline.scenario.countdown_s:g} s < visibility_timeout"
            )
        rows.append(row)
    if baseline is not None and baseline not in measured:
        rows[0].notes += f"; baseline: {_duplicate_notes(baseline)}"
    return rows


# -- main ----------------------------------------------------------------------------------
def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m benchmarks.deferred_vs_countdown",
        description=__doc__,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    parser.add_argument(
        "--count",
        type=int,
        default=100_000,
        help="future tasks in the memory measurement (default 100,000)",
    )
    parser.add_argument(
        "--repeats",
        type=int,
        default=1,
        help="fresh workers in the memory measurement; medians (default 1)",
    )
    parser.add_argument(
        "--tasks", type=int, default=200, help="tasks per duplicate scenario (default 200)"
    )
    parser.add_argument(
        "--visibility-timeout",
        type=int,
        default=4,
        help="the Redis transport's visibility_timeout, seconds (default 4)",
    )
    parser.add_argument(
        "--scenarios",
        default="below-vt,above-vt,two-workers,default-cadence",
        help="duplicate scenarios, comma-separated (default: all four)",
    )
    parser.add_argument(
        "--kinds",
        default=",".join(MEMORY_KINDS),
        help=f"scheduler kinds, comma-separated (known: {', '.join(MEMORY_KINDS)})",
    )
    parser.add_argument("--only", choices=["memory", "duplicates"], help="one measurement")
    parser.add_argument("--json", type=Path, default=RESULTS_DIR / "results-deferred-latest.json")
    args = parser.parse_args(argv)
    every = scenarios(args.tasks, args.visibility_timeout)
    chosen = [s.strip() for s in args.scenarios.split(",") if s.strip()]
    unknown = [s for s in chosen if s not in every]
    if unknown:
        parser.error(f"--scenarios: unknown {unknown}; known {list(every)}")
    kinds = [k.strip() for k in args.kinds.split(",") if k.strip()]
    bad = [k for k in kinds if k not in MEMORY_KINDS or k not in DUPLICATE_KINDS]
    if bad:
        parser.error(f"--kinds: unknown {bad}; known {sorted(MEMORY_KINDS)}")
    if args.count < 1 or args.repeats < 1 or args.tasks < 1 or args.visibility_timeout < 1:
        parser.error("--count, --repeats, --tasks and --visibility-timeout must be at least 1")
    return run(args, kinds, [every[s] for s in chosen])


def run(args: argparse.Namespace, kinds: list[str], chosen: list[DuplicateScenario]) -> int:
    from celery_dgs.embedded import RedisServerProcess

    started = time.perf_counter()
    results: list[Result] = []
    extra: dict[str, Any] = {"memory": [], "duplicates": []}
    with RedisServerProcess() as server, tempfile.TemporaryDirectory(prefix="dgs-bench-") as tmp:
        bench = Bench(server.url, Path(tmp))
        try:
            for kind in kinds:
                if args.only in (None, "memory"):
                    log(
                        f"[{kind}] worker memory: {args.count:,} {HELD.get(kind, 'future tasks')}"
                        f", {args.repeats} fresh worker(s)"
                    )
                    figures = []
                    for r in range(args.repeats):
                        f = worker_memory(kind, bench, args.count)
                        log(
                            f"  repeat {r + 1}: worker {f.idle.rss:,.0f} MiB at rest, "
                            f"{f.loaded.rss:,.0f} MiB with {f.count:,} "
                            f"{HELD.get(kind, 'future tasks')}, holding {f.held:,} scheduled "
                            f"tasks (published or added in {f.publish_s:.1f} s, received or read "
                            f"{f.receive_s:.1f} s later)"
                        )
                        if f.beat_idle and f.beat_loaded and f.beat_restarted:
                            log(
                                f"  beat {f.beat_idle.rss:,.1f} MiB at rest, "
                                f"{f.beat_loaded.rss:,.1f} MiB after the add, "
                                f"{f.beat_restarted.rss:,.1f} MiB started with them pending "
                                f"(its start-up read held {f.beat_start_checks} checks)"
                            )
                        figures.append(f)
                    results += memory_rows(kind, figures)
                    extra["memory"] += [asdict(f) for f in figures]
                if args.only in (None, "duplicates"):
                    dups = []
                    for scenario in chosen:
                        log(
                            f"[{kind}] duplicates, {scenario.name}: {scenario.tasks} tasks, "
                            f"countdown {scenario.countdown_s:g} s, visibility_timeout "
                            f"{scenario.visibility_timeout_s} s, {scenario.workers} worker(s), "
                            f"{scenario.cadence()}"
                        )
                        d = duplicate_executions(kind, bench, scenario)
                        log(
                            f"  {d.duplicated} of {d.tasks} tasks ran more than once "
                            f"({d.executions} executions; runs per task {d.histogram})"
                        )
                        dups.append(d)
                    results += duplicate_rows(kind, dups)
                    extra["duplicates"] += [asdict(d) for d in dups]
        finally:
            bench.stop_workers(kill=True)
    elapsed = time.perf_counter() - started
    print()
    print(
        f"Future tasks held by workers, and duplicate runs; {os.cpu_count()} CPUs, "
        f"{elapsed:.0f} s (memory: median of {args.repeats} fresh worker(s); baselines from "
        "the same run)"
    )
    print(table(results))
    notes = [f"- {r.name} (N={r.n:,}): {r.notes}" for r in results if r.notes]
    print("\nNotes:\n" + "\n".join(notes))
    profile = Profile("deferred", (), (), 0, 0, args.count, args.repeats, args.repeats)
    write_json(args.json, profile, results, {**extra, "elapsed_s": round(elapsed, 1)})
    print(f"\nwritten: {args.json}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
