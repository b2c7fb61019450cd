"""Beat reads the live workers again only when they may have changed: the
worker generation in its round's view (bumped by registering, deregistering
and expiry), a registration's expiry passing, or the cache's age. On a real
server, with a counting registry."""

from __future__ import annotations

import redis

from celery_dgs.beat.live_workers import LiveWorkers
from celery_dgs.keys import KeySpace
from celery_dgs.leases import RedisLeases
from celery_dgs.leases.base import BeatViewSource
from celery_dgs.registry import WorkerInfo, WorkerRegistry
from tests.leases.helpers import MsClock

KEYS = KeySpace("lw")


class CountingRegistry(WorkerRegistry):
    reads = 0

    def live_workers(self) -> list[WorkerInfo]:
        self.reads += 1
        return super().live_workers()


def worker(name: str, slots: int = 2) -> WorkerInfo:
    return WorkerInfo(name=name, node="n", queues=("celery",), slots=slots, pool="solo", pid=1)


class Mono:
    t = 0.0

    def __call__(self) -> float:
        return self.t


def pinned(
    client: redis.Redis,
) -> tuple[MsClock, Mono, CountingRegistry, BeatViewSource, LiveWorkers]:
    """A registry and a lease view on one pinned Redis clock, and the cache
    (its age on its own monotonic clock, at most 5 s)."""
    clock, mono = MsClock(), Mono()
    registry = CountingRegistry(client, KEYS, ttl=10, clock_ms=clock)
    leases = RedisLeases(client, KEYS, ping_timeout=1, steal_delay=1, clock_ms=clock)
    live = LiveWorkers(registry, max_age_s=5.0, monotonic=mono)
    return clock, mono, registry, leases.beat_view_reader(), live


def test_the_workers_are_read_again_only_after_a_change(client: redis.Redis) -> None:
    clock, _, registry, view, live = pinned(client)

    registry.register(worker("w1@n"))
    assert [w.name for w in live.at(view.read())] == ["w1@n"]
    for _ in range(5):  # nothing changed: no read
        clock.advance(100)
        assert [w.name for w in live.at(view.read())] == ["w1@n"]
    assert registry.reads == 1

    registry.register(worker("w2@n"))  # a worker joins: read at the next round
    assert sorted(w.name for w in live.at(view.read())) == ["w1@n", "w2@n"]
    assert registry.reads == 2

    registry.register(worker("w2@n", slots=8))  # re-registered with more slots
    assert {w.name: w.slots for w in live.at(view.read())} == {"w1@n": 2, "w2@n": 8}
    assert registry.reads == 3

    registry.deregister("w1@n")  # a worker leaves
    assert [w.name for w in live.at(view.read())] == ["w2@n"]
    assert registry.reads == 4

    registry.heartbeat("w2@n")  # moves its expiry on: no bump, no read
    live.at(view.read())
    assert registry.reads == 4
    clock.advance(10_001)  # past the expiry read with it: read again (and dropped)
    assert live.at(view.read()) == []
    assert registry.reads == 5


def test_a_heartbeat_keeps_the_worker_after_its_first_expiry_and_age_bounds_the_cache(
    client: redis.Redis,
) -> None:
    clock, mono, registry, view, live = pinned(client)
    registry.register(worker("w1@n"))
    live.at(view.read())
    clock.advance(6_000)
    registry.heartbeat("w1@n")
    clock.advance(5_000)  # past the expiry first read, within the heartbeat's
    assert [w.name for w in live.at(view.read())] == ["w1@n"]
    assert registry.reads == 2
    mono.t += 5.0  # the cache's age
    live.at(view.read())
    assert registry.reads == 3


def test_a_worker_generation_that_is_foreign_data_means_reading_every_round(
    client: redis.Redis,
) -> None:
    registry = CountingRegistry(client, KEYS, ttl=10)
    leases = RedisLeases(client, KEYS, ping_timeout=1, steal_delay=1)
    registry.register(worker("w1@n"))
    client.set(KEYS.worker_generation(), "not a number")
    view = leases.beat_view_reader()
    live = LiveWorkers(registry)
    for _ in range(3):
        assert [w.name for w in live.at(view.read())] == ["w1@n"]
    assert registry.reads == 3
