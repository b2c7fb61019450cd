"""The same rules on the server's own TIME (no pinned clock), with bounded polls."""

from __future__ import annotations

import threading
from datetime import timedelta

import redis

from celery_dgs.connection import redis_from_url
from celery_dgs.keys import KeySpace
from celery_dgs.leases import AcquireResult, AcquireStatus, PingStatus, RedisLeases
from tests.leases.helpers import PING_TIMEOUT_S, STEAL_DELAY_S, MsClock, running_names, wait_for

PING_TIMEOUT = timedelta(seconds=PING_TIMEOUT_S)
STEAL_DELAY = timedelta(seconds=STEAL_DELAY_S)


def attempt(leases: RedisLeases, tag: str) -> AcquireResult:
    return leases.acquire("s", owner_node="n", owner_name="celery@" + tag, owner_tag=tag)


def _unless(result: AcquireResult, status: AcquireStatus) -> AcquireResult | None:
    return None if result.status is status else result


def test_abandoned_lease_is_taken_only_after_ping_timeout_plus_steal_delay(
    real_leases: RedisLeases,
) -> None:
    first = attempt(real_leases, "A")
    assert first.granted
    assert first.started_at is not None
    held = attempt(real_leases, "B")
    assert held.status is AcquireStatus.HELD
    pending = wait_for(lambda: _unless(attempt(real_leases, "B"), AcquireStatus.HELD), timeout=3)
    assert pending.status is AcquireStatus.STEAL_PENDING
    assert pending.holder is not None
    assert pending.holder.steal_start_at is not None
    assert pending.holder.steal_start_at - first.started_at > PING_TIMEOUT
    taken = wait_for(
        lambda: _unless(attempt(real_leases, "B"), AcquireStatus.STEAL_PENDING), timeout=3
    )
    assert taken.granted
    assert taken.token == 2
    assert taken.took_over_from is not None
    assert taken.took_over_from.owner_tag == "A"
    assert taken.now - pending.holder.steal_start_at > STEAL_DELAY
    assert real_leases.ping("s", "A").status is PingStatus.NOT_OWNER
    assert real_leases.release("s", "A") is False


def test_a_pinging_owner_keeps_its_lease(client: redis.Redis, keys: KeySpace) -> None:
    # A ping timeout of 1 s against pings every 0.05 s: a thread stall of a
    # loaded machine does not count as a missed ping.
    leases = RedisLeases(client, keys, ping_timeout=1.0, steal_delay=STEAL_DELAY_S)
    assert attempt(leases, "A").granted
    stop = threading.Event()

    def heartbeat() -> None:
        while not stop.wait(0.05):
            leases.ping("s", "A")

    pinger = threading.Thread(target=heartbeat)
    pinger.start()
    try:
        seen = set()
        start = leases.now()
        while leases.now() - start < timedelta(seconds=1.0) + STEAL_DELAY + timedelta(seconds=0.2):
            seen.add(attempt(leases, "B").status)
            assert leases.beat_view().takeable == set()
        assert seen == {AcquireStatus.HELD}
    finally:
        stop.set()
        pinger.join(5)


def test_beat_view_on_redis_time_reports_the_abandoned_lease(real_leases: RedisLeases) -> None:
    assert attempt(real_leases, "A").granted
    wait_for(lambda: real_leases.beat_view().marked == {"s"}, timeout=3)
    assert running_names(real_leases) == {"s"}
    wait_for(lambda: real_leases.beat_view().takeable == {"s"}, timeout=3)
    assert running_names(real_leases) == set()


def _race(
    redis_url: str, keys: KeySpace, clock: MsClock | None, racers: int
) -> list[AcquireResult]:
    barrier = threading.Barrier(racers)
    results: list[AcquireResult] = []
    lock = threading.Lock()

    def run(i: int) -> None:
        client = redis_from_url(redis_url)
        try:
            leases = RedisLeases(
                client, keys, ping_timeout=PING_TIMEOUT_S, steal_delay=STEAL_DELAY_S, clock_ms=clock
            )
            leases.now()  # connect before the start line
            barrier.wait(5)
            result = leases.acquire("s", owner_node="n", owner_name=f"w{i}", owner_tag=f"R{i}")
            with lock:
                results.append(result)
        finally:
            client.close()

    threads = [threading.Thread(target=run, args=(i,)) for i in range(racers)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(10)
    assert len(results) == racers
    return results


def test_twenty_racers_on_a_free_lease_one_wins(
    redis_url: str, keys: KeySpace, client: redis.Redis
) -> None:
    results = _race(redis_url, keys, None, 20)
    winners = [r for r in results if r.granted]
    assert len(winners) == 1
    assert winners[0].token == 1
    assert {r.status for r in results if not r.granted} == {AcquireStatus.HELD}
    assert int(client.get(keys.token("s")) or 0) == 1


def test_twenty_racers_on_an_abandoned_lease_one_takes_it_over(
    redis_url: str, keys: KeySpace, client: redis.Redis, leases: RedisLeases, clock: MsClock
) -> None:
    assert leases.acquire("s", owner_node="n", owner_name="w", owner_tag="dead").token == 1
    clock.advance(301)
    assert leases.beat_view().marked == {"s"}
    clock.advance(301)
    results = _race(redis_url, keys, clock, 20)
    winners = [r for r in results if r.granted]
    assert len(winners) == 1
    assert winners[0].token == 2
    assert winners[0].took_over_from is not None
    assert winners[0].took_over_from.owner_tag == "dead"
    assert {r.status for r in results if not r.granted} == {AcquireStatus.HELD}
    assert int(client.get(keys.token("s")) or 0) == 2
