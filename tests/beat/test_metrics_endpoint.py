"""Beat's metrics endpoint on a real HTTP server (loopback, a free port) over a
real BeatEngine (real Redis, real SQLite): ``/metrics``, ``/healthz``, 404."""

from __future__ import annotations

import logging
import sqlite3
import urllib.error
import urllib.request
import uuid
from collections.abc import Iterator
from datetime import datetime, timedelta, timezone
from pathlib import Path

import pytest
import redis

from celery_dgs import metrics
from celery_dgs.beat.endpoint import (
    HEALTHZ_MIN_LIMIT_S,
    HEALTHZ_TICK_INTERVALS,
    MetricsServer,
    serve_metrics,
    tick_limit,
)
from celery_dgs.beat.engine import BeatEngine
from celery_dgs.core.clock import SystemClock
from celery_dgs.core.spec import PeriodicSpec
from celery_dgs.dispatches import DispatchRecords
from celery_dgs.keys import KeySpace
from celery_dgs.leases.redis import RedisLeases
from celery_dgs.metrics import metrics_registry
from celery_dgs.registry import WorkerInfo, WorkerRegistry
from celery_dgs.settings import DgsSettings
from celery_dgs.store.sql import SqlScheduleStore
from tests.beat.conftest import Mono, Recorder, open_store

KEYS = KeySpace("mep")
MAX_INTERVAL_S = 20.0  # store_poll_interval 1000 s: the tick's longest sleep is 20 s


def get(port: int, path: str) -> tuple[int, str, str]:
    """(status, content type, body) of ``GET path``."""
    try:
        with urllib.request.urlopen(f"http://127.0.0.1:{port}{path}", timeout=5) as resp:
            return resp.status, resp.headers["Content-Type"], resp.read().decode()
    except urllib.error.HTTPError as exc:
        return exc.code, exc.headers["Content-Type"], exc.read().decode()


@pytest.fixture
def store(tmp_path: Path) -> Iterator[SqlScheduleStore]:
    s = open_store(f"sqlite:///{tmp_path / 'dgs.sqlite3'}", 1, 2)
    yield s
    s.close()


@pytest.fixture
def mono() -> Mono:
    return Mono()


@pytest.fixture
def engine(redis_client: redis.Redis, store: SqlScheduleStore, mono: Mono) -> BeatEngine:
    registry = WorkerRegistry(redis_client, KEYS, ttl=300)
    registry.register(
        WorkerInfo(name="celery@w1", node="w1", queues=("celery",), slots=1, pool="prefork", pid=1)
    )
    engine = BeatEngine(
        store=store,
        leases=RedisLeases(redis_client, KEYS, ping_timeout=90, steal_delay=60),
        registry=registry,
        dispatches=DispatchRecords(redis_client, KEYS),
        publish=Recorder(),
        settings=DgsSettings(store_poll_interval=1000),
        clock=SystemClock(),
        max_interval=MAX_INTERVAL_S,
        monotonic=mono,
    )
    engine.load()
    return engine


@pytest.fixture
def server(engine: BeatEngine, store: SqlScheduleStore) -> Iterator[MetricsServer]:
    srv = serve_metrics(engine, store, SystemClock(), 0, "127.0.0.1")  # 0: a free port
    yield srv
    srv.shutdown()


def test_metrics_path_serves_the_metrics(engine: BeatEngine, server: MetricsServer) -> None:
    engine.tick()
    status, ctype, body = get(server.port, "/metrics")
    assert status == 200
    assert ctype.startswith("text/plain")
    assert 'dgs_schedule_condition{reason="ok",schedule="t.p2"} 0.0' in body
    assert "dgs_dispatch_lateness_seconds_count 1.0" in body
    assert 'dgs_worker_slots{state="free"}' in body


def test_the_per_schedule_families_can_be_left_out(
    engine: BeatEngine, server: MetricsServer
) -> None:
    """``dgs_metrics_per_schedule = False``: a scrape of a large fleet keeps
    the aggregate families only."""
    engine.settings = DgsSettings(store_poll_interval=1000, metrics_per_schedule=False)
    engine.tick()
    _, _, body = get(server.port, "/metrics")
    assert "dgs_schedule_condition" not in body
    assert "dgs_schedule_seconds_until_error" not in body
    assert "dgs_schedule_held" not in body
    assert 'dgs_priority_class_schedules{condition="OK",priority="50"} 2.0' in body
    assert "dgs_schedules{" in body


@pytest.mark.parametrize("path", ["/", "/metricsx", "/metrics/extra", "/favicon.ico", "/health"])
def test_other_paths_are_404(server: MetricsServer, path: str) -> None:
    status, ctype, body = get(server.port, path)
    assert status == 404
    assert ctype.startswith("text/plain")
    assert "dgs_" not in body
    assert "/metrics" in body
    assert "/healthz" in body


def test_healthz_follows_beats_ticks(engine: BeatEngine, server: MetricsServer, mono: Mono) -> None:
    status, ctype, body = get(server.port, "/healthz")
    assert (status, ctype) == (503, "text/plain; charset=utf-8")
    assert body == "unhealthy: beat has not completed a tick yet (limit 60s)\n"
    engine.tick()
    mono.t += 12.5
    status, _, body = get(server.port, "/healthz")
    assert (status, body) == (200, "ok: beat's last tick was 12.5s ago\n")
    limit = HEALTHZ_TICK_INTERVALS * MAX_INTERVAL_S
    mono.t += limit - 12.5  # exactly at the limit: still healthy
    assert get(server.port, "/healthz")[0] == 200
    mono.t += 0.5
    status, _, body = get(server.port, "/healthz")
    assert status == 503
    assert body == "unhealthy: beat's last tick was 60.5s ago, over the 60s limit\n"
    engine.tick()
    assert get(server.port, "/healthz")[:2] == (200, "text/plain; charset=utf-8")


def test_the_health_limit_follows_the_longest_sleep_of_a_tick(engine: BeatEngine) -> None:
    """Three of the longest sleeps a tick asks for (max_interval, 5 x
    store_poll_interval, the leader renewal), at least 30 s."""
    assert tick_limit(engine) == 3 * MAX_INTERVAL_S
    engine.settings = DgsSettings(store_poll_interval=3.0)  # a tick sleeps at most 15 s
    assert tick_limit(engine) == 45.0
    engine.settings = DgsSettings(store_poll_interval=1.0)
    assert tick_limit(engine) == HEALTHZ_MIN_LIMIT_S
    engine.max_interval = 300.0  # Celery's default beat_max_loop_interval
    engine.settings = DgsSettings()  # store_poll_interval 2 s: ticks sleep at most 10 s
    assert tick_limit(engine) == HEALTHZ_MIN_LIMIT_S


def test_a_tick_that_raises_does_not_count(
    engine: BeatEngine, server: MetricsServer, mono: Mono, monkeypatch: pytest.MonkeyPatch
) -> None:
    engine.tick()
    first = engine.last_tick

    def down(*_: object, **__: object) -> object:
        raise redis.ConnectionError("Redis is down")

    monkeypatch.setattr(engine.lease_view, "read", down)
    mono.t += 61  # past the 60 s limit
    assert engine.state.parked  # t.p1 was dispatched: the next tick reads Redis
    with pytest.raises(redis.ConnectionError):
        engine.tick()
    assert engine.last_tick == first
    assert get(server.port, "/healthz")[0] == 503


def record(store: SqlScheduleStore, name: str, outcome: str, started: datetime) -> None:
    run_id = uuid.uuid4().hex
    token = (store.get(name).current_token or 0) + 1
    store.record_run_start(
        schedule=name,
        run_id=run_id,
        dispatch_id=None,
        owner_node="w1",
        owner_name="celery@w1",
        owner_tag=run_id,
        token=token,
        started_at=started,
    )
    if outcome != "running":
        store.record_run_end(
            run_id=run_id, outcome=outcome, ended_at=started + timedelta(seconds=1)
        )


def test_run_counters_never_drop_when_history_is_pruned(
    engine: BeatEngine, store: SqlScheduleStore
) -> None:
    """Pruning deletes old runs: a counter that then drops reads as a reset to
    Prometheus, and rate() would count every stored run again."""
    metrics = metrics_registry(engine, store, SystemClock())
    old = datetime.now(timezone.utc) - timedelta(days=30)
    for day in range(3):
        record(store, "t.p1", "success", old + timedelta(days=day))
    record(store, "t.p1", "failure", old + timedelta(days=4))
    record(store, "t.p2", "running", datetime.now(timezone.utc))

    def runs(outcome: str) -> float | None:
        return metrics.get_sample_value("dgs_runs_total", {"outcome": outcome})

    assert (runs("success"), runs("failure"), runs("running")) == (3, 1, None)
    assert metrics.get_sample_value("dgs_runs_running") == 1
    assert store.prune_runs(old + timedelta(days=10)) == 4  # every ended run
    assert (runs("success"), runs("failure")) == (3, 1)
    record(store, "t.p1", "success", datetime.now(timezone.utc) - timedelta(minutes=5))
    assert (runs("success"), runs("failure")) == (4, 1)
    assert store.outcome_counts() == {"success": 1, "running": 1}
    assert metrics.get_sample_value("dgs_lease_steals_total") == 0


def test_held_schedules_say_why_in_the_metrics(
    redis_client: redis.Redis, store: SqlScheduleStore, mono: Mono
) -> None:
    """The same holds as ``celery dgs status``: paused, no worker, backoff."""
    now = datetime.now(timezone.utc)
    store.sync(
        [
            PeriodicSpec(task=f"t.{n}", scheduling_period=timedelta(hours=1), pool=pool)
            for n, pool in (("ok", None), ("paused", None), ("slow", "slow"), ("flaky", None))
        ],
        now - timedelta(hours=2),
    )
    store.set_paused("t.paused", True)
    record(store, "t.flaky", "failure", now - timedelta(seconds=30))  # 5 min backoff
    registry = WorkerRegistry(redis_client, KEYS, ttl=300)
    registry.register(
        WorkerInfo(name="celery@w1", node="w1", queues=("celery",), slots=1, pool="prefork", pid=1)
    )
    engine = BeatEngine(
        store=store,
        leases=RedisLeases(redis_client, KEYS, ping_timeout=90, steal_delay=60),
        registry=registry,
        dispatches=DispatchRecords(redis_client, KEYS),
        publish=Recorder(),
        settings=DgsSettings(store_poll_interval=1000),
        clock=SystemClock(),
        monotonic=mono,
    )
    engine.load()
    metrics = metrics_registry(engine, store, SystemClock())

    def held(name: str) -> list[str]:
        return sorted(
            s.labels["reason"]
            for family in metrics.collect()
            for s in family.samples
            if s.name == "dgs_schedule_held" and s.labels["schedule"] == name and s.value == 1
        )

    assert held("t.ok") == []
    assert held("t.paused") == ["paused"]
    assert held("t.slow") == ["no_worker"]
    assert held("t.flaky") == ["backoff"]
    registry.deregister("celery@w1")  # no worker at all, no dgs_capacity: nothing can run
    assert held("t.ok") == ["no_worker"]
    assert held("t.paused") == ["no_worker", "paused"]


def scrape_once(redis_client: redis.Redis, store: SqlScheduleStore, *, slots: int = 0) -> str:
    """``/metrics`` of a beat engine loaded from ``store`` (one worker with
    ``slots`` registered when ``slots``), after one tick; closes the store."""
    registry = WorkerRegistry(redis_client, KEYS, ttl=300)
    if slots:
        registry.register(
            WorkerInfo(
                name="celery@w1", node="w1", queues=("celery",), slots=slots, pool="prefork", pid=1
            )
        )
    engine = BeatEngine(
        store=store,
        leases=RedisLeases(redis_client, KEYS, ping_timeout=90, steal_delay=60),
        registry=registry,
        dispatches=DispatchRecords(redis_client, KEYS),
        publish=Recorder(),
        settings=DgsSettings(store_poll_interval=1000),
        clock=SystemClock(),
        max_interval=MAX_INTERVAL_S,
        monotonic=Mono(),
    )
    engine.load()
    engine.tick()
    srv = serve_metrics(engine, store, SystemClock(), 0, "127.0.0.1")
    try:
        return get(srv.port, "/metrics")[2]
    finally:
        srv.shutdown()
        store.close()


def test_worker_slots_are_read_at_scrape_time_with_nothing_due(
    redis_client: redis.Redis, tmp_path: Path
) -> None:
    """With no schedule due beat runs no dispatch round; the slot gauges still
    show the live workers' slots, not zeros left from start-up."""
    body = scrape_once(redis_client, open_store(f"sqlite:///{tmp_path / 'idle.sqlite3'}"), slots=3)
    assert 'dgs_worker_slots{state="free"} 3.0' in body
    assert 'dgs_worker_slots{state="used"} 0.0' in body
    assert 'dgs_queue_slots{queue="celery",state="free"} 3.0' in body


def test_each_queues_slots_say_which_pool_is_full(redis_client: redis.Redis) -> None:
    """A pool whose one slot runs keeps no free slot of its own, whatever the
    other pools have: the queue gauges say so where the total does not."""
    from celery_dgs.metric_families import queue_slot_family
    from celery_dgs.status.queues import queue_loads

    leases = RedisLeases(redis_client, KEYS, ping_timeout=90, steal_delay=60)
    assert leases.acquire("t.gpu", owner_node="g", owner_name="celery@g", owner_tag="x").granted
    workers = [
        # as workers register: their own direct queue too, which is no pool
        WorkerInfo(
            name="celery@g", node="g", queues=("gpu", "celery@g.dq2"), slots=1, pool="solo", pid=1
        ),
        WorkerInfo(
            name="celery@c",
            node="c",
            queues=("celery", "gpu", "celery@c.dq2"),
            slots=4,
            pool="solo",
            pid=2,
        ),
    ]
    family = queue_slot_family(queue_loads(leases.all(), workers))
    samples = {(s.labels["queue"], s.labels["state"]): s.value for s in family.samples}
    assert samples == {
        ("celery", "free"): 4,
        ("celery", "used"): 0,
        ("gpu", "free"): 4,
        ("gpu", "used"): 1,
    }


def test_a_stored_row_beat_cannot_schedule_is_an_error_in_the_metrics(
    redis_client: redis.Redis, tmp_path: Path
) -> None:
    """An active schedule whose stored spec is invalid is not schedulable; the
    condition gauge still reports it, in ERROR ``invalid_spec`` (as ``status``),
    so an alert on the metric sees it."""
    path = tmp_path / "bad.sqlite3"
    store = open_store(f"sqlite:///{path}", 1, 2)
    with sqlite3.connect(path) as db:
        db.execute("UPDATE dgs_schedules SET spec = '{\"kind\": \"weekly\"}' WHERE name = 't.p2'")
    db.close()
    body = scrape_once(redis_client, store)
    assert 'dgs_schedule_condition{reason="invalid_spec",schedule="t.p2"} 2.0' in body
    assert 'dgs_schedule_held{reason="invalid_spec",schedule="t.p2"} 1.0' in body
    assert 'dgs_schedule_condition{reason="ok",schedule="t.p1"} 0.0' in body


def test_each_priority_class_counts_its_schedules_by_condition(
    redis_client: redis.Redis, store: SqlScheduleStore, mono: Mono
) -> None:
    now = datetime.now(timezone.utc)
    store.sync(
        [
            PeriodicSpec(task=f"t.{n}", scheduling_period=timedelta(hours=1), priority=p)
            for n, p in (("a", 10), ("b", 10), ("c", 80))
        ],
        now - timedelta(hours=2),
    )
    record(store, "t.b", "success", now - timedelta(minutes=5))  # fresh: OK
    engine = BeatEngine(
        store=store,
        leases=RedisLeases(redis_client, KEYS, ping_timeout=90, steal_delay=60),
        registry=WorkerRegistry(redis_client, KEYS, ttl=300),
        dispatches=DispatchRecords(redis_client, KEYS),
        publish=Recorder(),
        settings=DgsSettings(store_poll_interval=1000),
        clock=SystemClock(),
        monotonic=mono,
    )
    engine.load()
    metrics = metrics_registry(engine, store, SystemClock())
    sample = metrics.get_sample_value
    assert sample("dgs_priority_class_schedules", {"priority": "10", "condition": "OK"}) == 1
    assert sample("dgs_priority_class_schedules", {"priority": "10", "condition": "ERROR"}) == 1
    assert sample("dgs_priority_class_schedules", {"priority": "80", "condition": "ERROR"}) == 1
    assert sample("dgs_priority_class_schedules", {"priority": "80", "condition": "OK"}) == 0
    assert sample("dgs_priority_class_schedules", {"priority": "50", "condition": "OK"}) is None


def test_unset_the_per_schedule_families_are_served_up_to_a_fleet_size(
    engine: BeatEngine,
    server: MetricsServer,
    monkeypatch: pytest.MonkeyPatch,
    caplog: pytest.LogCaptureFixture,
) -> None:
    """``dgs_metrics_per_schedule`` unset: served while beat tracks at most
    ``PER_SCHEDULE_METRICS_MAX`` schedules (2 here), left out past it, with
    one INFO line; ``True`` serves them at any size."""
    engine.tick()
    monkeypatch.setattr(metrics, "PER_SCHEDULE_METRICS_MAX", 2)
    assert "dgs_schedule_condition{" in get(server.port, "/metrics")[2]
    monkeypatch.setattr(metrics, "PER_SCHEDULE_METRICS_MAX", 1)
    caplog.set_level(logging.INFO, logger="celery_dgs")
    for _ in range(2):
        body = get(server.port, "/metrics")[2]
        assert "dgs_schedule_condition{" not in body
        assert "dgs_schedules{" in body
    said = [r.getMessage() for r in caplog.records if "per-schedule families" in r.getMessage()]
    assert said == [
        "celery-dgs: metrics: beat tracks 2 schedules, more than 1: the per-schedule families "
        "are left out of /metrics (a scrape of each series would cost beat's ticks CPU; "
        "dgs_metrics_per_schedule = True serves them)"
    ]
    engine.settings = DgsSettings(store_poll_interval=1000, metrics_per_schedule=True)
    assert "dgs_schedule_condition{" in get(server.port, "/metrics")[2]
