"""Beat's round with priority classes: a real BeatEngine, real Redis, a real SQLite
store and an injected clock. One free slot; which schedule gets it."""

from __future__ import annotations

import uuid
from collections.abc import Iterator, Sequence
from datetime import datetime, timedelta, timezone
from pathlib import Path

import pytest
import redis

from celery_dgs.beat.engine import BeatEngine
from celery_dgs.core.clock import FakeClock
from celery_dgs.core.spec import PeriodicSpec
from celery_dgs.dispatches import DispatchRecords
from celery_dgs.keys import KeySpace
from celery_dgs.leases.redis import RedisLeases
from celery_dgs.registry import WorkerInfo, WorkerRegistry
from celery_dgs.settings import DgsSettings
from celery_dgs.store.sql import SqlScheduleStore
from tests.beat.conftest import Mono, Recorder

H = timedelta(hours=1)
#: Registered (never run) at T0: due from T0 + 50 min (t.low, class 80, in ERROR
#: first: 50 min period) and T0 + 1 h (t.high, class 20). Beat reads T0 + 1 h 5 min.
#: With a 20-minute elevator interval capacity counts as short (t.low has waited
#: more than 10 minutes); with the default one (2 h) it does not.
T0 = datetime(2026, 3, 1, 12, 0, tzinfo=timezone.utc)
NOW = T0 + H + timedelta(minutes=5)


@pytest.fixture
def store(tmp_path: Path) -> Iterator[SqlScheduleStore]:
    s = SqlScheduleStore.open(f"sqlite:///{tmp_path / 'dgs.sqlite3'}")
    s.sync(
        [
            PeriodicSpec(task="t.low", scheduling_period=timedelta(minutes=50), priority=80),
            PeriodicSpec(task="t.high", scheduling_period=H, priority=20),
            PeriodicSpec(task="t.asked", scheduling_period=10 * H, priority=50),
        ],
        T0,
    )
    yield s
    s.close()


SHORT = {"elevator_interval": 1200}


def make_engine(
    client: redis.Redis,
    store: SqlScheduleStore,
    now: datetime = NOW,
    slots: int = 1,
    *,
    queues: tuple[str, ...] = ("celery",),
    others: Sequence[WorkerInfo] = (),
    **settings: object,
) -> tuple[BeatEngine, Recorder]:
    """A loaded beat whose worker (consuming ``queues``) has ``slots`` free
    slots, beside the ``others``, and what it sends."""
    keys = KeySpace(f"prio{uuid.uuid4().hex[:8]}")
    registry = WorkerRegistry(client, keys, ttl=300)
    for worker in (
        WorkerInfo(name="celery@w1", node="w1", queues=queues, slots=slots, pool="prefork", pid=1),
        *others,
    ):
        registry.register(worker)
    publish = Recorder()
    engine = BeatEngine(
        store=store,
        leases=RedisLeases(client, keys, ping_timeout=90, steal_delay=60),
        registry=registry,
        dispatches=DispatchRecords(client, keys),
        publish=publish,
        settings=DgsSettings(store_poll_interval=1000, **settings),  # type: ignore[arg-type]
        clock=FakeClock(now),
        monotonic=Mono(),
    )
    engine.load()
    return engine, publish


def dispatches(
    client: redis.Redis,
    store: SqlScheduleStore,
    now: datetime = NOW,
    slots: int = 1,
    **settings: object,
) -> list[str]:
    """The schedules beat's first round dispatches to a worker of ``slots``
    free slots, in the order beat chose them (``settings`` may give
    :func:`make_engine`'s ``queues`` and ``others``)."""
    engine, publish = make_engine(client, store, now, slots, **settings)  # type: ignore[arg-type]
    engine.tick()
    return list(publish.names())


def first_dispatch(
    client: redis.Redis, store: SqlScheduleStore, now: datetime = NOW, **settings: object
) -> str:
    """The one schedule beat's first round dispatches to a one-slot worker."""
    [name] = dispatches(client, store, now, **settings)
    return name


def test_the_due_higher_class_gets_the_slot_before_a_lower_one_in_error(
    redis_client: redis.Redis, store: SqlScheduleStore
) -> None:
    assert first_dispatch(redis_client, store, **SHORT) == "t.high"
    plain = [
        PeriodicSpec(task="t.low", scheduling_period=timedelta(minutes=50)),
        PeriodicSpec(task="t.high", scheduling_period=H),
        PeriodicSpec(task="t.asked", scheduling_period=10 * H),
    ]
    store.sync(plain, T0)
    assert first_dispatch(redis_client, store, **SHORT) == "t.low"  # without classes: ERROR first


def test_below_capacity_the_classes_change_no_decision(
    redis_client: redis.Redis, store: SqlScheduleStore
) -> None:
    """No due schedule has waited half the default elevator interval, and the
    schedules' demand fits the slot (none has run: no demand is known): the
    order is the one without classes (ERROR first)."""
    assert first_dispatch(redis_client, store) == "t.low"


#: t.low (50 min, class 80) and t.high (1 h, class 20) each ran 30 minutes from
#: T0: together they need 0.6 + 0.5 = 1.1 slots. At T0 + 55 min both are due,
#: t.low in ERROR since T0 + 50 min; neither has waited half an elevator interval.
BUSY_NOW = T0 + timedelta(minutes=55)


def busy_store(store: SqlScheduleStore, pool: str | None = None) -> SqlScheduleStore:
    """t.low and t.high (in ``pool``) as :data:`BUSY_NOW` says."""
    store.sync(
        [
            PeriodicSpec(
                task="t.low", scheduling_period=timedelta(minutes=50), priority=80, pool=pool
            ),
            PeriodicSpec(task="t.high", scheduling_period=H, priority=20, pool=pool),
        ],
        T0,
    )
    for name in ("t.low", "t.high"):
        run_id = uuid.uuid4().hex
        store.record_run_start(
            schedule=name,
            run_id=run_id,
            dispatch_id=None,
            owner_node="w1",
            owner_name="celery@w1",
            owner_tag=run_id,
            token=1,
            started_at=T0,
        )
        store.record_run_end(run_id=run_id, outcome="success", ended_at=T0 + timedelta(minutes=30))
    return store


def test_demand_above_the_live_slots_puts_the_classes_in_charge_at_once(
    redis_client: redis.Redis, store: SqlScheduleStore
) -> None:
    """1.1 slots of demand on one live slot (as when half the workers die):
    capacity is short before any wait reaches half an elevator interval, and
    the higher class goes first. On two slots the demand fits: the order is
    the one without classes (ERROR first), as it is without classes on one."""
    busy_store(store)
    assert first_dispatch(redis_client, store, BUSY_NOW) == "t.high"
    assert dispatches(redis_client, store, BUSY_NOW, slots=2) == ["t.low", "t.high"]
    store.sync(
        [
            PeriodicSpec(task="t.low", scheduling_period=timedelta(minutes=50)),
            PeriodicSpec(task="t.high", scheduling_period=H),
        ],
        T0,
    )
    assert first_dispatch(redis_client, store, BUSY_NOW) == "t.low"


def test_one_pool_short_of_slots_puts_the_classes_in_charge_beside_idle_ones(
    redis_client: redis.Redis, store: SqlScheduleStore
) -> None:
    """The 1.1 slots of demand are pool ``prio``'s, served by one slot, while a
    worker of the default queue has two idle: the fleet's demand fits its
    three slots, the pool's does not, and the higher class goes first. With a
    second slot consuming ``prio`` the pool's demand fits: ERROR first."""
    busy_store(store, pool="prio")
    idle = WorkerInfo(
        name="celery@w2", node="w2", queues=("celery",), slots=2, pool="prefork", pid=2
    )
    short = dispatches(redis_client, store, BUSY_NOW, queues=("prio",), others=[idle])
    assert short == ["t.high"]
    second = WorkerInfo(name="celery@w3", node="w3", queues=("prio",), slots=1, pool="solo", pid=3)
    fits = dispatches(redis_client, store, BUSY_NOW, queues=("prio",), others=[idle, second])
    assert fits == ["t.low", "t.high"]


def test_a_run_request_goes_first_unless_asked_in_a_lower_class(
    redis_client: redis.Redis, store: SqlScheduleStore
) -> None:
    """A due run request puts the classes in charge even below capacity: it
    goes in its asked class (0 unless asked otherwise)."""
    store.request_run("t.asked", NOW - timedelta(seconds=30))
    assert first_dispatch(redis_client, store) == "t.asked"
    store.request_run("t.asked", NOW - timedelta(seconds=30), priority=60)
    assert first_dispatch(redis_client, store) == "t.high"


def test_the_elevator_lets_the_waiting_lower_class_go_first(
    redis_client: redis.Redis, store: SqlScheduleStore
) -> None:
    """t.low due since T0 + 50 min, t.high since T0 + 1 h; with a 5-minute
    elevator t.low has waited three steps by NOW, t.high one. Without the
    elevator (strict classes) capacity counts as short after an hour's wait."""
    assert first_dispatch(redis_client, store, elevator_interval=300) == "t.low"
    assert first_dispatch(redis_client, store, NOW + H, elevator_interval=None) == "t.high"


def test_the_demand_book_is_built_on_first_need_and_kept_at_each_change_poll(
    redis_client: redis.Redis, store: SqlScheduleStore
) -> None:
    busy_store(store)
    # With the look-ahead (the default) beat keeps the book from the load on.
    assert make_engine(redis_client, store, BUSY_NOW)[0].ranking.demand is not None
    engine, _ = make_engine(redis_client, store, BUSY_NOW, lookahead=False)
    assert engine.ranking.demand is None  # not at load: a fleet with one class never needs it
    engine.tick()
    assert engine.ranking.demand is not None
    assert engine.ranking.demand.total() == pytest.approx(0.6 + 0.5)
    store.set_paused("t.low", True)
    engine.loader.refresh()
    assert engine.ranking.demand.total() == pytest.approx(0.5)
