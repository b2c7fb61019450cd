"""The engine benchmark runs beat on the package's in-memory store, not on a fake
of its own: every store call beat makes (the change poll, the reaper's paging,
pruning) is the one the contract suite checks on every backend."""

from __future__ import annotations

from datetime import timedelta

import redis

from benchmarks.engine_bench import build_store
from celery_dgs.beat.reaper import RunReaper
from celery_dgs.core.clock import FakeClock
from celery_dgs.keys import KeySpace
from celery_dgs.leases.redis import RedisLeases
from celery_dgs.store import MemoryScheduleStore

from .conftest import T0, start


def test_the_engine_benchmark_store_serves_beat_and_its_reaper(
    redis_client: redis.Redis,
) -> None:
    store, names = build_store(50, 5, T0)
    assert isinstance(store, MemoryScheduleStore)
    rows, cursor = store.load_active()
    assert [r.name for r in rows] == sorted(names)
    assert len([r for r in rows if r.stats.registered_at <= T0 + timedelta(seconds=10)]) == 5
    assert store.changes_since(cursor) == ([], cursor)
    assert store.changes_calls == 1

    start(store, names[0], "leaked", token=1)  # a run whose owner holds no lease
    mono = [0.0]
    leases = RedisLeases(redis_client, KeySpace("benchstore"), ping_timeout=1, steal_delay=1)
    reaper = RunReaper(
        store,
        leases,
        FakeClock(T0 + timedelta(minutes=1)),
        grace_s=1.0,
        ping_timeout_s=1.0,
        interval_s=1.0,
        batch_size=10,
        monotonic=lambda: mono[0],
    )
    mono[0] = 2.0
    assert reaper.maybe_reap() == 0  # first look: a suspect
    mono[0] = 4.0
    assert reaper.maybe_reap() == 1  # still no lease after the grace: lost
    [run] = store.runs(names[0])
    assert (run.run_id, run.outcome) == ("leaked", "lost")
    assert store.prune_runs(T0 + timedelta(days=1), batch_size=10) == 1
