"""A freed slot's signal to the leading beat, on a real server (celery_dgs/wake.py)."""

from __future__ import annotations

import threading
import time

import redis

from celery_dgs.embedded import RedisServerProcess
from celery_dgs.keys import KeySpace
from celery_dgs.leases import RedisLeases
from celery_dgs.wake import MAX_SIGNALS, SIGNAL_TTL_MS, BeatWake


def test_a_signal_sent_before_the_wait_ends_it_at_once(client: redis.Redis, keys: KeySpace) -> None:
    wake = BeatWake(client, keys)
    wake.notify()
    start = time.monotonic()
    assert wake.wait(5.0) is True
    assert time.monotonic() - start < 0.5


def test_without_a_signal_the_wait_lasts_its_timeout(client: redis.Redis, keys: KeySpace) -> None:
    wake = BeatWake(client, keys, max_block_s=0.1)
    start = time.monotonic()
    assert wake.wait(0.35) is False
    assert 0.3 <= time.monotonic() - start < 2.0


def test_a_signal_during_the_wait_wakes_it_within_milliseconds(
    client: redis.Redis, keys: KeySpace
) -> None:
    waiter = BeatWake(client, keys)
    notifier = BeatWake(redis.Redis(connection_pool=client.connection_pool), keys)
    sent_at: list[float] = []

    def notify_later() -> None:
        time.sleep(0.3)
        sent_at.append(time.monotonic())
        notifier.notify()

    thread = threading.Thread(target=notify_later)
    thread.start()
    assert waiter.wait(10.0) is True
    woke_at = time.monotonic()
    thread.join()
    assert woke_at - sent_at[0] < 0.1


def test_a_burst_of_signals_costs_one_wake(client: redis.Redis, keys: KeySpace) -> None:
    wake = BeatWake(client, keys)
    for _ in range(50):
        wake.notify()
    assert client.llen(keys.beat_wake()) == MAX_SIGNALS
    assert 0 < client.pttl(keys.beat_wake()) <= SIGNAL_TTL_MS
    assert wake.wait(1.0) is True
    assert wake.wait(0.2) is False


def test_the_signal_lives_under_the_key_prefix(client: redis.Redis) -> None:
    BeatWake(client, KeySpace("other-prefix")).notify()
    assert client.keys("*") == [b"other-prefix:beat:wake"]


def test_redis_down_turns_the_wait_into_a_sleep_and_the_signal_into_nothing(
    fresh_redis_server: RedisServerProcess, keys: KeySpace
) -> None:
    client = redis.Redis.from_url(fresh_redis_server.url, socket_timeout=1.0)
    wake = BeatWake(client, keys)
    fresh_redis_server.stop()
    wake.notify()  # logged, not raised
    start = time.monotonic()
    assert wake.wait(0.4) is False
    assert 0.35 <= time.monotonic() - start < 3.0
    client.close()


def test_a_release_signals_beat_in_the_same_call_owner_or_not(
    client: redis.Redis, keys: KeySpace
) -> None:
    leases = RedisLeases(client, keys, ping_timeout=1, steal_delay=1)
    assert leases.acquire("a1", owner_node="n", owner_name="w@n", owner_tag="t1").granted
    assert client.llen(keys.beat_wake()) == 0  # a grant frees no slot
    assert leases.release("a1", "t1") is True
    assert client.llen(keys.beat_wake()) == 1
    assert 0 < client.pttl(keys.beat_wake()) <= SIGNAL_TTL_MS
    assert leases.release("a1", "t1") is False  # already released: its slot is free anyway
    assert client.llen(keys.beat_wake()) == 2
    assert BeatWake(client, keys).wait(1.0) is True
