"""Benchmarks 2 and 3: the idle tick and the dispatch rate of a :class:`BeatEngine`.

One engine with N schedules (1,000,000 by default) serves both.

What is real: ``BeatEngine`` (``load``, ``tick``, its dispatch round, ``DispatchSender.send``),
``DeadlineIndex``, ``start_times``, the specs and stats, ``RedisLeases``,
``WorkerRegistry`` and ``DispatchRecords`` on a real valkey/redis server
(:class:`~celery_dgs.embedded.RedisServerProcess`), and the publisher: the real
``DeadlineScheduler.publish`` (a
:class:`~celery_dgs.beat.publishing.CeleryPublisher`) of a
``DeadlineScheduler`` on a Celery app whose broker is that server
(``send_task`` to the worker's ``<name>.dq2`` queue, in kombu's Redis
pipelines of 1000 messages; the messages land in Redis and are counted). The
same rounds publishing one message at a time
(``CeleryPublisher(batched=False)``, the path of a broker whose transport
does not batch) are measured beside them. One worker is registered with as
many slots as there are due schedules.

The schedule store is the package's in-memory one
(:class:`~celery_dgs.store.memory.MemoryScheduleStore`: the same contract as
the SQL store, checked by one test suite on both), so the engine's store
calls (the change poll, the reaper's paging, pruning) run the code a user
runs, minus the database (whose costs the start-up benchmark measures).
:class:`CountingStore` only counts the change polls. The specs are copies of one
validated ``PeriodicSpec`` with a different ``configuration`` each
(:func:`~celery_dgs.core.spec.with_name`; building 1M validated specs would
take ~20 s and measure nothing of interest here), each stored with its own
``registered_at``. Logging stays at WARNING, as for the Celery baseline.

Idle tick: the clock (an injected ``FakeClock``) is before every schedule's
``can_start_by``. Dispatch: the clock moves so that ``due`` of them are
eligible at once; a round is the ticks it takes to dispatch all of them
(``max_dispatches_per_tick`` = 5000, the default, so 2 ticks for 10,000).
Between repeats the dispatch records and the queue are deleted and a tick
with no worker registered re-indexes the schedules (the normal "dispatch gone"
path), then the worker registers again.

Busy ticks: after the last round the ``due`` schedules are parked
(dispatched, not started); then every one of them is started (its lease
acquired as a worker does). Nothing else is eligible, but every tick while
anything is parked reads the lease and dispatch state from Redis: as built,
one ``beat_view.lua`` call; the baseline, measured on the same engine and
state in alternating order, is the old reads (:class:`LegacyReads`:
sweep, every lease hash, every dispatch name).

Built objects are moved to the GC's permanent generation (``gc.freeze``), so
the collections between repeats do not walk a million schedules each.
"""

from __future__ import annotations

import dataclasses
import gc
import os
import random
import time
import uuid
from collections import Counter
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from datetime import datetime, timedelta, timezone
from typing import Any

import redis

from celery_dgs.beat.engine import BeatEngine
from celery_dgs.beat.publishing import CeleryPublisher
from celery_dgs.connection import redis_from_url
from celery_dgs.core.clock import FakeClock
from celery_dgs.core.spec import PeriodicSpec, with_name
from celery_dgs.dispatches import DispatchBackend, DispatchRecords
from celery_dgs.embedded import RedisServerProcess
from celery_dgs.keys import KeySpace
from celery_dgs.leases.base import LeaseBackend
from celery_dgs.leases.redis import RedisLeases
from celery_dgs.leases.types import BeatView
from celery_dgs.registry import RegistryBackend, WorkerInfo, WorkerRegistry
from celery_dgs.settings import DgsSettings
from celery_dgs.store.memory import MemoryScheduleStore
from celery_dgs.store.records import StoredSchedule

from .common import Profile, Result, current_rss_mib, gc_paused, log, median, repeat

WORKER = "bench@node-1"
TASK = "bench.task"
IDLE_TICKS = 2_000


# -- counting Redis round trips ------------------------------------------------------
class DgsConnection(redis.Connection):
    """The connection class of celery-dgs's own client, so its round trips are told
    apart from the broker's (kombu's connections are plain ``redis.Connection``)."""

    bench_tag = "dgs"


class RoundTrips:
    """Counts ``send_packed_command`` calls, one per round trip (a pipeline is one
    call), by client: ``dgs`` or ``broker``. Patched only while counting."""

    def __init__(self) -> None:
        self.counts: Counter[str] = Counter()

    @contextmanager
    def counting(self) -> Iterator[RoundTrips]:
        cls = redis.connection.AbstractConnection
        original: Callable[..., None] = cls.send_packed_command
        counts = self.counts

        def send_packed_command(conn: Any, command: Any, check_health: bool = True) -> None:
            counts[getattr(conn, "bench_tag", "broker")] += 1
            original(conn, command, check_health)

        cls.send_packed_command = send_packed_command  # type: ignore[method-assign]
        try:
            yield self
        finally:
            cls.send_packed_command = original  # type: ignore[method-assign]

    def snapshot(self) -> Counter[str]:
        return Counter(self.counts)


def command_stats(client: redis.Redis) -> Counter[str]:
    """Calls per command from ``INFO commandstats`` (the INFO calls themselves left out)."""
    info = client.info("commandstats")
    return Counter(
        {
            k.removeprefix("cmdstat_"): int(v["calls"])
            for k, v in info.items()
            if k != "cmdstat_info"
        }
    )


# -- the population ----------------------------------------------------------------------
class CountingStore(MemoryScheduleStore):
    """The in-memory store, counting :meth:`changes_since` calls (beat's store poll)."""

    def __init__(self) -> None:
        super().__init__()
        self.changes_calls = 0

    def changes_since(
        self, cursor: int, *, check_until: datetime | None = None
    ) -> tuple[list[StoredSchedule], int]:
        self.changes_calls += 1
        return super().changes_since(cursor, check_until=check_until)


def build_store(n: int, due: int, t0: datetime, seed: int = 3) -> tuple[CountingStore, list[str]]:
    """A store of ``n`` never-run periodic schedules: ``due`` of them eligible
    1-10 s after ``t0``, the rest 1-30 days after (a never-succeeded periodic
    schedule may start at ``registered_at``, here the time it is stored at).
    Returns the store and the names in random order."""
    rng = random.Random(seed)
    template = PeriodicSpec(task=TASK, scheduling_period=timedelta(hours=6), args=(1,))
    store = CountingStore()
    order = list(range(n))
    rng.shuffle(order)
    names = []
    for i in order:
        spec = with_name(template, TASK, f"c{i:07d}")
        offset = 1 + rng.random() * 9 if i < due else 86_400 * (1 + rng.random() * 29)
        store.insert_if_missing(spec, t0 + timedelta(seconds=offset))
        names.append(spec.name)
    return store, names


def redis_backends(
    client: redis.Redis, keys: KeySpace
) -> tuple[LeaseBackend, RegistryBackend, DispatchBackend]:
    """Beat's Redis parts on ``client``: leases, worker registry, dispatch records."""
    return (
        RedisLeases(client, keys, ping_timeout=90, steal_delay=60),
        WorkerRegistry(client, keys, ttl=3_600),
        DispatchRecords(client, keys),
    )


class LegacyReads:
    """The round's Redis reads as they were before ``beat_view.lua`` (the baseline):
    the sweep, every lease hash (``leases.all()``: ZRANGE + a pipeline of HGETALL,
    each parsed), and every pending dispatch name. The sweep is a ``beat_view``
    read by a reader of its own that holds the owners and the dispatch count
    already, so it sends neither back (the sweep's work plus a GET and a ZCARD)."""

    def __init__(self, engine: BeatEngine) -> None:
        self.engine = engine
        self.sweeper = engine.leases.beat_view_reader()
        self.dispatch_count: int | None = None

    def __call__(self) -> BeatView:
        engine = self.engine
        swept = self.sweeper.read(expected_dispatches=self.dispatch_count)
        self.dispatch_count = swept.dispatch_count
        takeable = swept.takeable
        leases = engine.leases.all()
        last_leases = {lease.schedule: lease for lease in leases}  # kept for metrics then
        running_by_worker: dict[str, int] = {}
        running: set[str] = set()
        for lease in leases:
            if lease.schedule in takeable:
                continue
            running.add(lease.schedule)
            running_by_worker[lease.owner_name] = running_by_worker.get(lease.owner_name, 0) + 1
        del last_leases
        return dataclasses.replace(
            swept,
            running=running,
            running_by_worker=running_by_worker,
            stale_workers={},
            dispatch_names=frozenset(engine.dispatches.pending_names()),
        )


#: One message of the raw baseline: task, schedule name, args, kwargs.
RawMessage = tuple[str, str, tuple[Any, ...], dict[str, Any]]


class Bench:
    def __init__(self, server: RedisServerProcess, n: int, due: int) -> None:
        from celery import Celery

        from celery_dgs.beat.scheduler import DeadlineScheduler
        from celery_dgs.dgs import DGS

        self.n, self.due = n, due
        self.keys = KeySpace("bench")
        self.client = redis_from_url(server.url, connection_class=DgsConnection)
        self.probe = redis.Redis.from_url(server.url)  # INFO and clean-up; not counted as dgs
        self.probe.flushall()
        self.settings = DgsSettings(redis_url=server.url, key_prefix="bench")
        self.leases, self.registry, self.dispatches = redis_backends(self.client, self.keys)
        self.app = Celery("bench-dgs", broker=server.url, set_as_current=False)
        self.app.conf.dgs_redis_url = server.url
        self.app.conf.dgs_key_prefix = "bench"
        DGS(self.app, install_worker_hooks=False)
        self.scheduler = DeadlineScheduler(self.app, lazy=True)  # no setup_schedule: no store
        self.t0 = datetime.now(timezone.utc).replace(microsecond=0)
        self.clock = FakeClock(self.t0)
        self.store, self.names = build_store(n, due, self.t0)
        self.engine = BeatEngine(
            store=self.store,
            leases=self.leases,
            registry=self.registry,
            dispatches=self.dispatches,
            publish=self.scheduler.publish,
            settings=self.settings,
            clock=self.clock,
            default_queue="celery",
        )
        start = time.perf_counter()
        self.engine.load()
        self.load_s = time.perf_counter() - start
        self.queue = f"{WORKER}.dq2"
        self.trips = RoundTrips()

    def close(self) -> None:
        self.app.close()
        self.client.close()
        self.probe.close()

    # -- benchmark 2 -------------------------------------------------------------
    def idle_tick_us(self, repeats: int, *, poll_every_tick: bool) -> tuple[list[float], float]:
        """µs per tick with nothing due; returns the samples and Redis round trips per tick."""
        self.clock.set(self.t0)
        engine = self.engine
        engine.settings = dataclasses.replace(
            self.settings, store_poll_interval=1e-9 if poll_every_tick else 2.0
        )
        engine.tick()  # the first tick also runs the (hourly) prune
        assert engine.ranking.index.peek(self.t0.timestamp()) is None, "something is due"
        calls = self.store.changes_calls

        def one() -> float:
            tick = engine.tick
            start = time.perf_counter()
            for _ in range(IDLE_TICKS):
                tick()
            return (time.perf_counter() - start) / IDLE_TICKS * 1e6

        before = self.trips.snapshot()
        with self.trips.counting():
            samples = repeat(one, repeats)
        trips = sum((self.trips.snapshot() - before).values()) / (IDLE_TICKS * repeats)
        polled = self.store.changes_calls - calls
        assert (polled >= IDLE_TICKS * repeats) == poll_every_tick, polled
        assert engine.state.dispatched_total == 0
        engine.settings = self.settings
        return samples, trips

    # -- benchmark 3 -------------------------------------------------------------
    def _register(self) -> None:
        self.registry.register(
            WorkerInfo(
                name=WORKER,
                node="node-1",
                queues=("celery",),
                slots=self.due,
                pool="prefork",
                pid=os.getpid(),
            )
        )

    def _reset(self) -> None:
        """Forget the previous round: no records, no messages, schedules back in the index."""
        pipe = self.probe.pipeline(transaction=False)
        pipe.delete(self.queue, self.keys.dispatch_index())
        for name in self.engine.state.pending:
            pipe.delete(self.keys.dispatch(name))
        pipe.execute()
        self.registry.deregister(WORKER)
        self.engine.tick()  # sees the dispatches gone, re-indexes them; no worker: no dispatch
        assert not self.engine.state.parked
        assert not self.engine.state.pending
        self._register()

    def dispatch(self, repeats: int) -> dict[str, Any]:
        """Interleaved repeats of: raw ``send_task`` of ``due`` messages in one
        producer, a BeatEngine round dispatching ``due`` schedules and a round
        publishing one message at a time (the three in alternating order), then
        raw ``send_task`` with a producer per call (a smaller batch). Interleaving
        keeps the drift of a shared machine out of the ratios, which are taken
        per repeat."""
        self.clock.set(self.t0 + timedelta(seconds=60))
        now = self.clock.now().timestamp()
        assert self.engine.ranking.index.ready_count(now) == self.due, (
            self.engine.ranking.index.ready_count(now)
        )
        self._register()
        self._round()  # warm-up (script loading, producer pool, queue declaration)
        self._raw(one_producer=True, count=min(self.due, 1_000))
        out: dict[str, list[Any]] = {
            k: []
            for k in (
                "rates",
                "raw_rates",
                "raw_each_rates",
                "ratios",
                "each_rates",
                "each_ratios",
                "trips_dgs",
                "trips_broker",
                "raw_trips",
                "raw_each_trips",
                "ticks",
                "commands",
            )
        }
        for i in range(repeats):
            # ABBA: raw, batched, per message; then per message, batched, raw
            if i % 2 == 0:
                raw_rate, raw_trips = self._raw(one_producer=True, count=self.due)
            else:
                per_message = self._per_message_round()
            self._reset()
            gc.collect()
            with gc_paused():
                stats_before = command_stats(self.probe)
                before = self.trips.snapshot()
                with self.trips.counting():
                    elapsed, n_ticks = self._round()
                delta = self.trips.snapshot() - before
                cmd_delta = command_stats(self.probe) - stats_before
            if i % 2 == 0:
                per_message = self._per_message_round()
            else:
                raw_rate, raw_trips = self._raw(one_producer=True, count=self.due)
            each_rate, each_trips = self._raw(one_producer=False, count=min(self.due, 2_000))
            rate = self.due / elapsed
            out["rates"].append(rate)
            out["raw_rates"].append(raw_rate)
            out["raw_each_rates"].append(each_rate)
            out["ratios"].append(rate / raw_rate)
            out["each_rates"].append(per_message)
            out["each_ratios"].append(per_message / raw_rate)
            out["trips_dgs"].append(delta["dgs"] / self.due)
            out["trips_broker"].append(delta["broker"] / self.due)
            out["raw_trips"].append(raw_trips)
            out["raw_each_trips"].append(each_trips)
            out["ticks"].append(n_ticks)
            out["commands"].append(cmd_delta)
        return out

    def _per_message_round(self) -> float:
        """A round as :meth:`dispatch` times it, publishing one message at a time;
        returns dispatches per second."""
        sender = self.engine.sender
        batched, sender.publish = sender.publish, CeleryPublisher(self.app, batched=False)
        try:
            self._reset()
            gc.collect()
            with gc_paused():
                elapsed, _ = self._round()
        finally:
            sender.publish = batched
        return self.due / elapsed

    def busy_tick_us(
        self, repeats: int, *, running: bool
    ) -> tuple[list[float], float, list[float], float]:
        """µs per tick with nothing eligible while ``due`` schedules are busy: after the
        last dispatch round they are dispatched-not-started; with ``running`` every
        one of them is first started (the lease acquired, as the worker does, which
        consumes its dispatch record).

        The same engine, state and ticks, once with the round's Redis reads as built
        (one ``beat_view`` call) and once as before (:class:`LegacyReads`),
        interleaved (ABBA) so the drift of a shared machine stays out of the ratio.
        Returns (samples, round trips per tick) for the current way, then the old."""
        engine = self.engine
        assert len(engine.state.pending) == self.due
        if running:
            for name, pend in list(engine.state.pending.items()):
                result = self.leases.acquire(
                    name,
                    owner_node="node-1",
                    owner_name=WORKER,
                    owner_tag=f"run-{name}",
                    dispatch_id=pend.dispatch_id,
                )
                assert result.token, result
            engine.tick()  # sees the records consumed: pending -> running
            assert not engine.state.pending
        now = self.clock.now().timestamp()
        assert engine.ranking.index.peek(now) is None
        current = engine._read_state

        legacy = LegacyReads(engine)

        def measure(read: Any) -> tuple[float, float]:
            engine._read_state = read  # type: ignore[method-assign]
            try:
                start = time.perf_counter()
                engine.tick()  # warm (and sizes the sample to ~1 s)
                ticks = max(1, min(50, int(1.0 / (time.perf_counter() - start))))
                before = self.trips.snapshot()
                gc.collect()
                with gc_paused(), self.trips.counting():
                    start = time.perf_counter()
                    for _ in range(ticks):
                        engine.tick()
                    elapsed = time.perf_counter() - start
                trips = sum((self.trips.snapshot() - before).values()) / ticks
            finally:
                del engine._read_state  # back to the class's method
            return elapsed / ticks * 1e6, trips

        new_samples, old_samples, new_trips, old_trips = [], [], [], []
        for i in range(repeats):
            pair = (current, legacy) if i % 2 == 0 else (legacy, current)
            for read in pair:
                value, trips = measure(read)
                if read is current:
                    new_samples.append(value)
                    new_trips.append(trips)
                else:
                    old_samples.append(value)
                    old_trips.append(trips)
        assert len(engine.state.parked) == self.due
        assert len(engine.state.pending) == (0 if running else self.due)
        return new_samples, median(new_trips), old_samples, median(old_trips)

    def _round(self) -> tuple[float, int]:
        engine = self.engine
        base = engine.state.dispatched_total
        ticks = 0
        start = time.perf_counter()
        while engine.state.dispatched_total - base < self.due:
            engine.tick()
            ticks += 1
            if ticks > 100:
                raise RuntimeError(
                    f"only {engine.state.dispatched_total - base} of {self.due} sent"
                )
        elapsed = time.perf_counter() - start
        queued = self.probe.llen(self.queue)
        assert queued == self.due, f"{queued} messages in {self.queue}, expected {self.due}"
        return elapsed, ticks

    def _raw_messages(self, count: int) -> list[RawMessage]:
        """The first ``count`` messages beat sends: task, schedule, args, kwargs."""
        return [(TASK, name, (1,), {}) for name in self.names[:count]]

    def _raw(self, *, one_producer: bool, count: int) -> tuple[float, float]:
        """The same messages as beat's (task, args, id, queue, expires, headers) by plain
        ``app.send_task``; returns messages/s and broker round trips per message."""
        from celery.utils.nodenames import worker_direct

        app = self.app
        queue = worker_direct(WORKER)
        batch = [(*m, uuid.uuid4().hex) for m in self._raw_messages(count)]

        def send_all(producer: Any) -> None:
            for task, name, args, kwargs, task_id in batch:
                app.send_task(
                    task,
                    args=args,
                    kwargs=kwargs,
                    task_id=task_id,
                    queue=queue,
                    expires=300.0,
                    headers={"dgs_schedule": name, "dgs_dispatch_id": task_id},
                    producer=producer,
                )

        saved = self.probe.llen(self.queue)
        gc.collect()
        with gc_paused():
            before = self.trips.snapshot()
            with self.trips.counting():
                start = time.perf_counter()
                if one_producer:
                    with app.producer_or_acquire() as producer:
                        send_all(producer)
                else:
                    send_all(None)
                elapsed = time.perf_counter() - start
            trips = (self.trips.snapshot() - before)["broker"] / count
        queued = self.probe.llen(self.queue) - saved
        assert queued == count, f"{queued} of {count} raw messages queued"
        self.probe.ltrim(self.queue, count, -1)  # drop them again (LPUSH puts them at the head)
        return count / elapsed, trips


def run(profile: Profile, celery_idle: dict[int, float]) -> tuple[list[Result], dict[str, Any]]:
    n, due = profile.engine_size, profile.due
    results: list[Result] = []
    with RedisServerProcess() as server:
        log(
            f"engine: building a BeatEngine with {n:,} schedules ({due:,} to fall due) "
            f"on {server.binary.name} at {server.url}"
        )
        with gc_paused():
            bench = Bench(server, n, due)
        gc.freeze()
        log(
            f"  BeatEngine.load() of {n:,} schedules from the in-memory store: "
            f"{bench.load_s:.1f}s, "
            f"RSS now {current_rss_mib():.0f} MiB"
        )
        try:
            base_n = max(celery_idle) if celery_idle else None
            base = celery_idle.get(base_n) if base_n else None
            for poll in (True, False):
                label = "store poll every tick" if poll else "store poll every 2 s (default)"
                log(f"idle tick: {label}")
                samples, trips = bench.idle_tick_us(profile.repeats, poll_every_tick=poll)
                value = median(samples)
                results.append(
                    Result(
                        name=f"idle tick: BeatEngine.tick(), nothing due, {label}",
                        n=n,
                        median=value,
                        unit="us",
                        baseline=base,
                        baseline_name=f"celery idle tick, N={base_n:,}" if base_n else "",
                        ratio=None if base is None else base / value,
                        ratio_note="" if base is None else "(celery/dgs)",
                        goal="< 2000 us",
                        met=value < 2_000,
                        samples=samples,
                        notes=f"{trips:.3g} Redis round trips per tick; "
                        "the store is the in-memory one",
                    )
                )
            log(
                f"dispatch: BeatEngine rounds, {due:,} due among {n:,}, interleaved with "
                "raw app.send_task of the same messages"
            )
            d = bench.dispatch(profile.repeats)
            busy = []
            for running in (False, True):
                what = "running (leases held)" if running else "dispatched, not started"
                log(
                    f"busy tick: {due:,} schedules {what}, nothing else due; "
                    "beat_view.lua vs the old reads"
                )
                new, new_trips, old, old_trips = bench.busy_tick_us(
                    profile.repeats, running=running
                )
                value, base_value = median(new), median(old)
                ratio = base_value / value
                goal = running  # the goal is set for live runs (a busy tick once took 1.3 s)
                busy.append(
                    Result(
                        name=f"busy tick: BeatEngine.tick(), {due:,} {what}, none due",
                        n=n,
                        median=value,
                        unit="us",
                        samples=new,
                        baseline=base_value,
                        baseline_name="old reads: sweep + every lease hash + every dispatch name",
                        ratio=ratio,
                        ratio_note="(old/new)",
                        goal=">= 20x faster" if goal else "",
                        met=ratio >= 20 if goal else None,
                        notes=f"{new_trips:.3g} Redis round trips per tick (old: {old_trips:.3g}); "
                        f"old samples {[round(x) for x in old]} us",
                    )
                )
        finally:
            bench.close()
            gc.unfreeze()
    raw, raw_each, rate = median(d["raw_rates"]), median(d["raw_each_rates"]), median(d["rates"])
    raw_trips, ratio = median(d["raw_trips"]), median(d["ratios"])
    results.append(
        Result(
            name="dispatch: raw app.send_task, one producer (baseline)",
            n=due,
            median=raw,
            unit="msg/s",
            samples=d["raw_rates"],
            notes=f"{raw_trips:.3g} broker round trips per message",
        )
    )
    results.append(
        Result(
            name="dispatch: raw app.send_task, producer per call",
            n=min(due, 2_000),
            median=raw_each,
            unit="msg/s",
            samples=d["raw_each_rates"],
            notes=f"{median(d['raw_each_trips']):.3g} broker round trips per message",
        )
    )
    results.append(
        Result(
            name=f"dispatch: BeatEngine rounds, {due:,} due, index of {n:,}",
            n=due,
            median=rate,
            unit="disp/s",
            baseline=raw,
            baseline_name="raw send_task, one producer",
            ratio=ratio,
            ratio_note="(dgs/raw, median of per-repeat ratios)",
            goal=">= 1.5x raw",
            met=ratio >= 1.5,
            samples=d["rates"],
            notes=f"ticks per round {d['ticks']}; per-repeat ratios "
            f"{[round(r, 3) for r in d['ratios']]}",
        )
    )
    each_ratio = median(d["each_ratios"])
    results.append(
        Result(
            name=f"dispatch: BeatEngine rounds, one publish per message, {due:,} due",
            n=due,
            median=median(d["each_rates"]),
            unit="disp/s",
            baseline=raw,
            baseline_name="raw send_task, one producer",
            ratio=each_ratio,
            ratio_note="(dgs/raw, median of per-repeat ratios)",
            goal=">= 0.8x raw",
            met=each_ratio >= 0.8,
            samples=d["each_rates"],
            notes="the path of a broker whose transport does not batch; per-repeat ratios "
            f"{[round(r, 3) for r in d['each_ratios']]}",
        )
    )
    dispatch_trips = [a + b for a, b in zip(d["trips_dgs"], d["trips_broker"], strict=True)]
    dispatch_trips_median = median(dispatch_trips)
    results.append(
        Result(
            name="dispatch: Redis round trips per dispatch (dgs + broker)",
            n=due,
            median=dispatch_trips_median,
            unit="",
            baseline=raw_trips,
            baseline_name="raw send_task per message",
            ratio=dispatch_trips_median / raw_trips if raw_trips else None,
            ratio_note="(dgs/raw)",
            goal="<= 2",
            met=dispatch_trips_median <= 2,
            samples=dispatch_trips,
            notes=f"celery-dgs client {median(d['trips_dgs']):.4f}, "
            f"broker {median(d['trips_broker']):.4f}",
        )
    )
    results += busy
    extra = {
        "dispatch_redis_commands_per_dispatch": {
            k: round(v / due, 4) for k, v in d["commands"][-1].most_common()
        },
        "engine_load_s": bench.load_s,
    }
    return results, extra
