"""``dgs`` in the simulator makes the same decisions as the real beat on the same state.

The real side is a :class:`~celery_dgs.beat.engine.BeatEngine` on a real SQLite
store (run history written through the store's own ``record_run_*``), the
session's real Redis-compatible server (worker registry, leases, dispatch
records) and a fake clock; its published orders are captured. The simulator
starts from the stats the store computed and the same workers; its first
dispatch round must choose the same schedules, in the same order, on the same
workers.
"""

from __future__ import annotations

import random
import uuid
from collections.abc import Sequence
from dataclasses import replace
from datetime import datetime, timedelta, timezone

import pytest
import redis

from celery_dgs.beat.engine import BeatEngine, DispatchOrder
from celery_dgs.core.clock import FakeClock
from celery_dgs.core.spec import PeriodicSpec, ScheduleSpec
from celery_dgs.dispatches import DispatchRecords
from celery_dgs.keys import KeySpace
from celery_dgs.leases.redis import RedisLeases
from celery_dgs.registry import WorkerInfo, WorkerRegistry
from celery_dgs.settings import DgsSettings
from celery_dgs.sim.loop import Simulator
from celery_dgs.sim.workload import SimSchedule, SimWorker, Workload
from celery_dgs.store.sql import SqlScheduleStore

NOW = datetime(2026, 3, 2, 10, 0, tzinfo=timezone.utc)
WORKERS = (SimWorker("celery@w0", "w0", 6), SimWorker("celery@w1", "w1", 4))


def build_specs(rng: random.Random, n: int) -> list[tuple[ScheduleSpec, float]]:
    specs: list[tuple[ScheduleSpec, float]] = []
    for i in range(n):
        period = rng.randrange(600, 7200)
        fields: dict[str, object] = {}
        if i % 7 == 3:
            fields["dont_run_on_nodes"] = frozenset({"w0"})
        if i % 11 == 5:  # a blackout around NOW: beat and simulator must both hold it back
            fields["blackout_periods"] = [("09:30", "10:30")]
        spec = PeriodicSpec(
            task="eq.job",
            configuration=f"s{i:02d}",
            scheduling_period=timedelta(seconds=period),
            cooldown_duration=timedelta(seconds=period * rng.choice((0.0, 0.3, 0.6))),
            **fields,  # type: ignore[arg-type]
        )
        specs.append((spec, rng.uniform(10, 300)))
    return specs


def write_history(
    store: SqlScheduleStore,
    rng: random.Random,
    specs: Sequence[tuple[ScheduleSpec, float]],
    *,
    ago: tuple[float, float] = (0.2, 1.4),
) -> None:
    """Most schedules ran before NOW (some late, some failed); a few never ran.
    The last good start was ``ago`` (a range, in periods) before NOW."""
    for spec, duration in specs:
        if rng.random() < 0.15:
            continue
        assert isinstance(spec, PeriodicSpec)
        started = NOW - spec.scheduling_period * rng.uniform(*ago)
        for outcome in ("success", rng.choice(("success", "success", "failure"))):
            run_id = uuid.uuid4().hex
            token = (store.get(spec.name).current_token or 0) + 1
            store.record_run_start(
                schedule=spec.name,
                run_id=run_id,
                dispatch_id=None,
                owner_node="w0",
                owner_name="celery@w0",
                owner_tag=run_id,
                token=token,
                started_at=started,
            )
            ended = started + timedelta(seconds=duration)
            store.record_run_end(run_id=run_id, outcome=outcome, ended_at=ended)
            started = ended + timedelta(seconds=rng.uniform(0, 60))
            if started >= NOW:
                break


def real_beat_round(
    store: SqlScheduleStore, client: redis.Redis, settings: DgsSettings
) -> list[DispatchOrder]:
    keys = KeySpace(settings.key_prefix)
    registry = WorkerRegistry(client, keys, ttl=600)
    for w in WORKERS:
        registry.register(
            WorkerInfo(
                name=w.name,
                node=w.node,
                queues=tuple(w.queues),
                slots=w.slots,
                pool="prefork",
                pid=1,
            )
        )
    published: list[DispatchOrder] = []

    def publish(orders: Sequence[DispatchOrder]) -> list[DispatchOrder]:
        published.extend(orders)
        return []

    engine = BeatEngine(
        store=store,
        leases=RedisLeases(client, keys, ping_timeout=90, steal_delay=60),
        registry=registry,
        dispatches=DispatchRecords(client, keys),
        publish=publish,
        settings=settings,
        clock=FakeClock(NOW),
    )
    engine.load()
    engine.tick()
    return published


#: Last good starts 0.2-1.4 periods ago (many late), or 0.3-0.7 (most on time:
#: the relative-laxity order decides).
LATE, ON_TIME = (0.2, 1.4), (0.3, 0.7)


@pytest.mark.parametrize(
    ("overload", "laxity"), [("restore", 60.0), ("restore", None), ("greedy", 60.0), ("shed", 60.0)]
)
@pytest.mark.parametrize("ago", [LATE, ON_TIME], ids=["late", "on_time"])
@pytest.mark.parametrize("seed", [1, 2, 3])
def test_simulator_chooses_what_beat_chooses(
    sqlite_url: str,
    redis_client: redis.Redis,
    overload: str,
    laxity: float | None,
    ago: tuple[float, float],
    seed: int,
) -> None:
    rng = random.Random(seed)
    specs = build_specs(rng, 40)
    store = SqlScheduleStore.open(sqlite_url, clock=FakeClock(NOW))
    try:
        store.sync([s for s, _ in specs], NOW - timedelta(hours=3))
        write_history(store, rng, specs, ago=ago)
        rows, _ = store.load_active()
        prefix = f"simeq{uuid.uuid4().hex[:8]}"
        settings = DgsSettings(
            key_prefix=prefix, overload_policy=overload, shed_horizon=600, laxity_floor=laxity
        )
        beat = [(o.schedule, o.worker) for o in real_beat_round(store, redis_client, settings)]
    finally:
        store.close()

    trace: list[tuple[float, str, str]] = []
    workload = Workload(
        [SimSchedule(s, d, 0.0) for s, d in specs],
        WORKERS,
        horizon_s=1.0,
        start=NOW,
        warm_start=False,
    )
    Simulator(
        workload,
        "dgs",
        order=settings.order_policy,
        initial_stats={r.name: r.stats for r in rows},
        trace=trace,
    ).run()
    sim = [(name, worker) for t, name, worker in trace if t == 0.0]

    assert len(beat) == sum(w.slots for w in WORKERS), "the state must fill every slot"
    assert sim == beat


def test_restore_reorders_the_late_schedules_in_the_real_beat(
    sqlite_url: str, redis_client: redis.Redis
) -> None:
    """The state above has late schedules of different run times: ``restore``
    (which the simulator matches, above) must not merely be ``greedy`` there."""
    rng = random.Random(1)
    specs = build_specs(rng, 40)
    store = SqlScheduleStore.open(sqlite_url, clock=FakeClock(NOW))
    try:
        store.sync([s for s, _ in specs], NOW - timedelta(hours=3))
        write_history(store, rng, specs)
        chosen = {}
        for overload in ("greedy", "restore"):
            settings = DgsSettings(
                key_prefix=f"simeq{uuid.uuid4().hex[:8]}", overload_policy=overload
            )
            chosen[overload] = [o.schedule for o in real_beat_round(store, redis_client, settings)]
    finally:
        store.close()
    assert chosen["restore"] != chosen["greedy"]
    assert sorted(chosen["restore"]) == sorted(chosen["greedy"])  # every late one fits: order


def test_laxity_serves_long_runs_before_short_ones_with_more_slack(
    sqlite_url: str, redis_client: redis.Redis
) -> None:
    """Nothing late, 20 eligible, 10 slots. Ten 20 s jobs are due first
    (should_start_by ~ NOW + 280 s, laxity (300 + 10k) / (20 + 60) >= 3.75); ten
    600 s jobs later (should ~ NOW + 900 s, laxity (1500 + 10k) / 660 <= 2.5).
    Plain deadline order takes the short ones; relative laxity the long ones,
    whose run time leaves them less room. Beat and the simulator agree on both."""
    specs: list[tuple[ScheduleSpec, float]] = []
    for i in range(20):
        spec = PeriodicSpec(
            task="eq.job", configuration=f"l{i:02d}", scheduling_period=timedelta(hours=1)
        )
        specs.append((spec, 20.0 if i < 10 else 600.0))
    store = SqlScheduleStore.open(sqlite_url, clock=FakeClock(NOW))
    try:
        store.sync([s for s, _ in specs], NOW - timedelta(hours=3))
        for i, (spec, duration) in enumerate(specs):
            ahead = (300 if i < 10 else 1500) + 10 * (i % 10)  # deadline - NOW
            started = NOW - timedelta(hours=1) + timedelta(seconds=ahead)
            run_id = uuid.uuid4().hex
            store.record_run_start(
                schedule=spec.name,
                run_id=run_id,
                dispatch_id=None,
                owner_node="w0",
                owner_name="celery@w0",
                owner_tag=run_id,
                token=1,
                started_at=started,
            )
            store.record_run_end(
                run_id=run_id, outcome="success", ended_at=started + timedelta(seconds=duration)
            )
        rows, _ = store.load_active()
        chosen: dict[str, list[tuple[str, str]]] = {}
        for laxity, label in ((None, "deadline"), (60.0, "laxity")):
            settings = DgsSettings(key_prefix=f"simeq{uuid.uuid4().hex[:8]}", laxity_floor=laxity)
            beat = [(o.schedule, o.worker) for o in real_beat_round(store, redis_client, settings)]
            trace: list[tuple[float, str, str]] = []
            workload = Workload(
                [SimSchedule(s, d, 0.0) for s, d in specs],
                WORKERS,
                horizon_s=1.0,
                start=NOW,
                warm_start=False,
            )
            Simulator(
                workload,
                "dgs",
                order=settings.order_policy,
                initial_stats={r.name: r.stats for r in rows},
                trace=trace,
            ).run()
            assert [(n, w) for t, n, w in trace if t == 0.0] == beat, label
            chosen[label] = [n for n, _ in beat]
    finally:
        store.close()
    assert chosen["deadline"] == [f"eq.job@l{i:02d}" for i in range(10)]
    assert sorted(chosen["laxity"]) == [f"eq.job@l{i:02d}" for i in range(10, 20)]


@pytest.mark.parametrize("elevator", [7200.0, 600.0, None])
@pytest.mark.parametrize("seed", [1, 2, 3])
def test_simulator_chooses_what_beat_chooses_with_priorities(
    sqlite_url: str, redis_client: redis.Redis, elevator: float | None, seed: int
) -> None:
    """Schedules in three priority classes, many due for up to 1.4 periods (so
    the elevator has moved some up): the simulator's first round is beat's, and
    the classes change it."""
    rng = random.Random(seed)
    specs = [
        (with_priority(s, (20, 50, 80)[i % 3]), d) for i, (s, d) in enumerate(build_specs(rng, 40))
    ]
    store = SqlScheduleStore.open(sqlite_url, clock=FakeClock(NOW))
    try:
        store.sync([s for s, _ in specs], NOW - timedelta(hours=3))
        write_history(store, rng, specs, ago=LATE)
        rows, _ = store.load_active()
        beat: dict[str, list[tuple[str, str]]] = {}
        order = DgsSettings(elevator_interval=elevator).order_policy
        for label, interval, classes in (("classes", elevator, True), ("plain", None, False)):
            if not classes:
                store.sync([with_priority(s, 50) for s, _ in specs], NOW - timedelta(hours=3))
            settings = DgsSettings(
                key_prefix=f"simeq{uuid.uuid4().hex[:8]}", elevator_interval=interval
            )
            beat[label] = [
                (o.schedule, o.worker) for o in real_beat_round(store, redis_client, settings)
            ]
    finally:
        store.close()

    trace: list[tuple[float, str, str]] = []
    workload = Workload(
        [SimSchedule(s, d, 0.0) for s, d in specs],
        WORKERS,
        horizon_s=1.0,
        start=NOW,
        warm_start=False,
    )
    initial = {r.name: r.stats for r in rows}
    Simulator(workload, "dgs", order=order, initial_stats=initial, trace=trace).run()
    sim = [(name, worker) for t, name, worker in trace if t == 0.0]
    assert len(beat["classes"]) == sum(w.slots for w in WORKERS)
    assert sim == beat["classes"]
    assert [n for n, _ in beat["classes"]] != [n for n, _ in beat["plain"]]
    if elevator == 600.0:  # the elevator has moved some up: not the strict order
        strict: list[tuple[float, str, str]] = []
        no_elevator = replace(order, elevator_interval_s=None)
        Simulator(workload, "dgs", order=no_elevator, initial_stats=initial, trace=strict).run()
        assert sim != [(name, worker) for t, name, worker in strict if t == 0.0]


def with_priority(spec: ScheduleSpec, priority: int) -> ScheduleSpec:
    return replace(spec, priority=priority)


def test_simulator_chooses_what_beat_chooses_with_the_lookahead(
    sqlite_url: str, redis_client: redis.Redis
) -> None:
    """Twenty short schedules that need 6.7 of the ten slots (200 s runs every
    600 s), in their cooldown for five minutes, and twelve 6-hour jobs of a
    2-day period, eligible and due in 12 hours. The plain order gives every
    slot to a long job; with ``dgs_lookahead`` beat starts two (the long runs
    may hold 10 - 6.7 / 0.95 = 2.98 slots) and holds the others back for the
    short ones. The
    simulator's ``dgs`` with the look-ahead chooses the same."""
    specs: list[tuple[ScheduleSpec, float]] = []
    for i in range(20):
        specs.append(
            (
                PeriodicSpec(
                    task="eq.short",
                    configuration=f"s{i:02d}",
                    scheduling_period=timedelta(seconds=600),
                    cooldown_duration=timedelta(seconds=400),
                ),
                200.0,
            )
        )
    for i in range(12):
        specs.append(
            (
                PeriodicSpec(
                    task="eq.long", configuration=f"l{i:02d}", scheduling_period=timedelta(days=2)
                ),
                6 * 3600.0,
            )
        )
    store = SqlScheduleStore.open(sqlite_url, clock=FakeClock(NOW))
    try:
        store.sync([s for s, _ in specs], NOW - timedelta(days=3))
        for i, (spec, duration) in enumerate(specs):
            ago = 300 if i < 20 else 30 * 3600 + 60 * i
            started = NOW - timedelta(seconds=ago)
            run_id = uuid.uuid4().hex
            store.record_run_start(
                schedule=spec.name,
                run_id=run_id,
                dispatch_id=None,
                owner_node="w0",
                owner_name="celery@w0",
                owner_tag=run_id,
                token=1,
                started_at=started,
            )
            store.record_run_end(
                run_id=run_id, outcome="success", ended_at=started + timedelta(seconds=duration)
            )
        rows, _ = store.load_active()
        beat = {}
        order = DgsSettings(lookahead=True).order_policy
        for lookahead in (False, True):
            settings = DgsSettings(key_prefix=f"simeq{uuid.uuid4().hex[:8]}", lookahead=lookahead)
            beat[lookahead] = [
                (o.schedule, o.worker) for o in real_beat_round(store, redis_client, settings)
            ]
    finally:
        store.close()
    trace: list[tuple[float, str, str]] = []
    workload = Workload(
        [SimSchedule(s, d, 0.0) for s, d in specs],
        WORKERS,
        horizon_s=1.0,
        start=NOW,
        warm_start=False,
    )
    Simulator(
        workload, "dgs", order=order, initial_stats={r.name: r.stats for r in rows}, trace=trace
    ).run()
    assert [(name, worker) for t, name, worker in trace if t == 0.0] == beat[True]
    # The longest waiting first (l11 started its last run earliest).
    assert [name for name, _ in beat[False]] == [f"eq.long@l{i:02d}" for i in range(11, 1, -1)]
    assert [name for name, _ in beat[True]] == [f"eq.long@l{i:02d}" for i in range(11, 9, -1)]
