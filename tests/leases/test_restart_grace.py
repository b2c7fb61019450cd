"""Redis restart / failover grace (acquire.lua step 4), on a pinned clock against a real server.

After the server is seen with another ``run_id``, or without the epoch hash (the
data was lost), no schedule whose token counter is below the store's floor (the
server lost a recorded grant) gets a new lease for ``ping_timeout +
steal_delay``: a lease lost with the data may still have a live owner, who stops
at its next ping or fences itself.
"""

from __future__ import annotations

import pytest
import redis

from celery_dgs.errors import MalformedDataError
from celery_dgs.keys import KeySpace
from celery_dgs.leases import AcquireStatus, PingStatus, RedisLeases
from celery_dgs.leases.codec import ms_to_datetime
from tests.leases.helpers import MsClock

GRACE = 600  # ms: PING_TIMEOUT_S + STEAL_DELAY_S of the fixtures


def grab(leases: RedisLeases, tag: str, floor: int, schedule: str = "s") -> AcquireStatus:
    return leases.acquire(
        schedule, owner_node="n", owner_name="w", owner_tag=tag, min_token=floor
    ).status


def test_first_sighting_starts_the_grace_for_schedules_whose_grants_it_lost(
    leases: RedisLeases, clock: MsClock, client: redis.Redis, keys: KeySpace
) -> None:
    assert grab(leases, "A", 0, "never-ran") is AcquireStatus.GRANTED  # nothing to lose
    epoch = client.hgetall(keys.epoch())
    assert epoch[b"since"] == str(clock.ms).encode()
    assert epoch[b"run_id"] == client.info("server")["run_id"].encode()
    result = leases.acquire("s", owner_node="n", owner_name="w", owner_tag="B", min_token=7)
    assert result.status is AcquireStatus.RECOVERING
    assert result.grace_ends_at == ms_to_datetime(clock.ms + GRACE)
    assert leases.get("s") is None  # nothing written
    clock.advance(GRACE - 1)
    assert grab(leases, "B", 7) is AcquireStatus.RECOVERING
    clock.advance(1)
    result = leases.acquire("s", owner_node="n", owner_name="w", owner_tag="B", min_token=7)
    assert result.granted
    assert result.token == 8


def test_data_loss_restarts_the_grace_and_the_floor_keeps_tokens_rising(
    leases: RedisLeases, clock: MsClock, client: redis.Redis
) -> None:
    clock.advance(GRACE)
    assert grab(leases, "A", 0) is AcquireStatus.GRANTED  # epoch seen at T0 + GRACE
    clock.advance(GRACE)
    assert grab(leases, "A2", 0, "t") is AcquireStatus.GRANTED  # same server: no grace
    client.flushall()  # a restart without persistence, as far as the data goes
    # The owner's lease vanished with the data: its next ping says so and it stops.
    ping = leases.ping("s", "A")
    assert ping.status is PingStatus.NOT_OWNER
    assert ping.holder_tag is None  # gone, not held by another
    assert grab(leases, "B", 1) is AcquireStatus.RECOVERING
    clock.advance(GRACE)
    result = leases.acquire("s", owner_node="n", owner_name="w", owner_tag="B", min_token=1)
    assert (result.status, result.token) == (AcquireStatus.GRANTED, 2)  # not 1 again


def test_a_new_run_id_is_a_failover_and_waits_only_if_the_replica_missed_a_grant(
    leases: RedisLeases, clock: MsClock
) -> None:
    """A replica promoted with the data it had: its copy may miss the last grants."""
    assert grab(leases, "A", 0) is AcquireStatus.GRANTED  # token 1
    assert leases.release("s", "A")
    clock.advance(GRACE)
    leases.run_id_override = "f" * 40
    # The replica has the counter at 1 and the store recorded 1: nothing lost.
    assert grab(leases, "B", 1) is AcquireStatus.GRANTED
    assert leases.release("s", "B")
    leases.run_id_override = "a" * 40
    # The store recorded token 5, which this replica never saw.
    assert grab(leases, "C", 5) is AcquireStatus.RECOVERING
    clock.advance(GRACE)
    result = leases.acquire("s", owner_node="n", owner_name="w", owner_tag="C", min_token=5)
    assert (result.status, result.token) == (AcquireStatus.GRANTED, 6)


def test_grants_of_the_current_epoch_do_not_wait(leases: RedisLeases, clock: MsClock) -> None:
    """Right after the first sighting, a schedule granted on this server (its
    counter has reached the floor) is granted again at once."""
    assert grab(leases, "A", 0) is AcquireStatus.GRANTED  # epoch starts now; token 1
    assert leases.release("s", "A")
    assert grab(leases, "B", 1) is AcquireStatus.GRANTED


def test_a_live_lease_and_a_retry_are_unaffected(leases: RedisLeases, clock: MsClock) -> None:
    clock.advance(GRACE)
    assert grab(leases, "A", 0) is AcquireStatus.GRANTED
    leases.run_id_override = "e" * 40
    assert grab(leases, "B", 1) is AcquireStatus.HELD  # the surviving lease still rules
    assert grab(leases, "A", 1) is AcquireStatus.GRANTED  # its owner's retry


def test_beats_round_starts_the_grace_before_any_acquire(
    leases: RedisLeases, clock: MsClock, client: redis.Redis, keys: KeySpace
) -> None:
    """After a restart, beat's first round (beat_view.lua) notes the new
    server, so the grace runs from there and a dispatch that reaches a worker
    later (its broker connection was still coming back) waits only for what is
    left."""
    assert grab(leases, "A", 0) is AcquireStatus.GRANTED  # token 1, recorded by the store
    client.flushall()  # the restart without persistence
    swept_at = clock.ms
    leases.beat_view()
    assert client.hget(keys.epoch(), "since") == str(swept_at).encode()
    clock.advance(GRACE // 2)
    result = leases.acquire("s", owner_node="n", owner_name="w", owner_tag="B", min_token=1)
    assert result.status is AcquireStatus.RECOVERING
    assert result.grace_ends_at == ms_to_datetime(swept_at + GRACE)  # not the acquire's + GRACE
    clock.advance(GRACE - GRACE // 2)
    assert grab(leases, "B", 1) is AcquireStatus.GRANTED
    leases.beat_view()  # the same server again: the epoch stays
    assert client.hget(keys.epoch(), "since") == str(swept_at).encode()


def test_the_grace_in_force_is_read_as_status_shows_it(
    leases: RedisLeases, clock: MsClock, client: redis.Redis, keys: KeySpace
) -> None:
    assert leases.restart_grace() is None  # no grant or beat round has seen the server
    assert grab(leases, "A", 0) is AcquireStatus.GRANTED
    token = int(client.get(keys.token("s")) or 0)
    grace = leases.restart_grace()
    assert grace is not None
    assert (grace.since, grace.ends_at) == (
        ms_to_datetime(clock.ms),
        ms_to_datetime(clock.ms + GRACE),
    )
    # A first use holds nothing back: the counter is the recorded token.
    assert not leases.lacks_tokens({"s": token})
    assert leases.lacks_tokens({"s": token + 1, "never": 0})
    assert not leases.lacks_tokens({})
    clock.advance(GRACE)
    assert leases.restart_grace() is None
    client.flushall()  # the data is lost: the next sighting starts a grace
    assert grab(leases, "B", token) is AcquireStatus.RECOVERING
    assert leases.restart_grace() is not None
    assert leases.lacks_tokens({"s": token})


def test_malformed_epoch_or_counter_is_named(
    leases: RedisLeases, client: redis.Redis, keys: KeySpace
) -> None:
    client.hset(keys.epoch(), "since", "soon")
    with pytest.raises(MalformedDataError, match="field 'since' is not milliseconds"):
        leases.restart_grace()
    client.set(keys.token("s"), "x")
    with pytest.raises(MalformedDataError, match="not a token counter"):
        leases.lacks_tokens({"s": 1})
