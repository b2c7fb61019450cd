"""The beat leader lease on a real Redis server: grant, renew, take-over at the
exact boundary (pinned Redis time), resign, token floor, and the leader fence
on dispatch records (a stale leader's dispatch is refused, nothing written)."""

from __future__ import annotations

import time

import pytest
import redis

from celery_dgs.dispatches import DispatchRecord, DispatchRecords
from celery_dgs.errors import MalformedDataError, NotLeaderError
from celery_dgs.keys import KeySpace
from celery_dgs.leases.codec import ms_to_datetime
from celery_dgs.leases.leader import ElectResult, LeaderFence, RedisLeader
from tests.leases.helpers import T0_MS, MsClock

TIMEOUT_MS = 2000


@pytest.fixture
def leader(client: redis.Redis, keys: KeySpace, clock: MsClock) -> RedisLeader:
    return RedisLeader(client, keys, timeout=TIMEOUT_MS / 1000, clock_ms=clock)


def elect(leader: RedisLeader, tag: str, min_token: int = 0) -> ElectResult:
    return leader.elect(
        owner_tag=tag, owner_node=f"host-{tag}", owner_pid=100 + len(tag), min_token=min_token
    )


def rec(schedule: str, dispatch_id: str) -> DispatchRecord:
    return DispatchRecord(schedule=schedule, dispatch_id=dispatch_id, worker="celery@w1")


def test_first_candidate_is_granted_the_others_follow(leader: RedisLeader) -> None:
    a = elect(leader, "a")
    assert a.leading
    assert not a.renewed
    assert (a.token, a.since, a.previous) == (1, ms_to_datetime(T0_MS), None)
    b = elect(leader, "b")
    assert not b.leading
    assert b.holder is not None
    assert (b.holder.owner_tag, b.holder.owner_node, b.holder.token) == ("a", "host-a", 1)
    current = leader.current()
    assert current is not None
    assert current.owner_pid == 101


def test_take_over_only_after_the_timeout_at_the_exact_boundary(
    leader: RedisLeader, clock: MsClock
) -> None:
    elect(leader, "a")
    clock.advance(TIMEOUT_MS - 500)
    renewed = elect(leader, "a")
    assert renewed.leading
    assert renewed.renewed
    assert renewed.token == 1
    assert renewed.since == ms_to_datetime(T0_MS)  # the term started at the grant
    clock.advance(TIMEOUT_MS)  # exactly timeout since the renewal: still a's
    assert not elect(leader, "b").leading
    clock.advance(1)
    b = elect(leader, "b")
    assert b.leading
    assert not b.renewed
    assert b.token == 2
    assert b.previous is not None
    assert b.previous.owner_tag == "a"
    resumed = elect(leader, "a")  # the old leader comes back: it follows
    assert not resumed.leading
    assert resumed.holder is not None
    assert resumed.holder.owner_tag == "b"


def test_an_expired_leader_nobody_replaced_still_leads(leader: RedisLeader, clock: MsClock) -> None:
    elect(leader, "a")
    clock.advance(10 * TIMEOUT_MS)
    again = elect(leader, "a")
    assert again.leading
    assert again.renewed
    assert again.token == 1


def test_tokens_strictly_increase_over_take_overs(leader: RedisLeader, clock: MsClock) -> None:
    tokens = []
    for i in range(6):
        tokens.append(elect(leader, f"c{i}").token)
        clock.advance(TIMEOUT_MS + 1)
    assert tokens == sorted(set(tokens)) == list(range(1, 7))


def test_token_floor_survives_a_lost_counter(
    leader: RedisLeader, client: redis.Redis, keys: KeySpace
) -> None:
    elect(leader, "a")
    client.delete(keys.leader(), keys.leader_token())  # Redis lost its data
    b = elect(leader, "b", min_token=7)  # b had seen token 7
    assert b.token == 8
    client.delete(keys.leader())
    assert elect(leader, "c").token == 9  # the counter was raised to the floor


def test_resign_frees_the_lease_for_an_immediate_take_over(leader: RedisLeader) -> None:
    elect(leader, "a")
    assert not leader.resign("b")  # not b's to give up
    assert not elect(leader, "b").leading
    assert leader.resign("a")
    assert leader.current() is None
    b = elect(leader, "b")
    assert b.leading
    assert b.previous is None
    assert b.token == 2


def test_stale_leaders_dispatch_is_refused_and_nothing_written(
    leader: RedisLeader, dispatches: DispatchRecords, clock: MsClock
) -> None:
    a = elect(leader, "a")
    a_fence = LeaderFence(owner_tag="a", token=a.token)
    dispatches.add_many([rec("s1", "d1")], ttl=5, fence=a_fence)
    assert dispatches.pending_names() == {"s1"}
    clock.advance(TIMEOUT_MS + 1)
    b = elect(leader, "b")  # a was stopped: b takes over
    with pytest.raises(NotLeaderError, match=r"host-b|token 2"):
        dispatches.add_many([rec("s1", "d-late"), rec("s2", "d2")], ttl=5, fence=a_fence)
    current = dispatches.current("s1")
    assert current is not None
    assert current.dispatch_id == "d1"
    assert dispatches.pending_names() == {"s1"}
    dispatches.add_many([rec("s2", "d2")], ttl=5, fence=LeaderFence(owner_tag="b", token=b.token))
    assert dispatches.pending_names() == {"s1", "s2"}


def test_fence_needs_both_tag_and_token(
    leader: RedisLeader, dispatches: DispatchRecords, client: redis.Redis, keys: KeySpace
) -> None:
    a = elect(leader, "a")
    with pytest.raises(NotLeaderError):  # the right owner with an older term's token
        dispatches.add_many([rec("s", "d")], ttl=5, fence=LeaderFence(owner_tag="a", token=0))
    with pytest.raises(NotLeaderError):  # the right token from another process
        dispatches.add_many([rec("s", "d")], ttl=5, fence=LeaderFence(owner_tag="x", token=a.token))
    client.delete(keys.leader())  # no leader at all (e.g. Redis restarted empty)
    with pytest.raises(NotLeaderError, match="nobody"):
        dispatches.add_many([rec("s", "d")], ttl=5, fence=LeaderFence(owner_tag="a", token=a.token))
    assert dispatches.pending_count() == 0
    dispatches.add_many([rec("s", "d")], ttl=5)  # unfenced (tools, tests): written
    assert dispatches.pending_count() == 1


def test_fence_is_checked_in_every_chunk_of_a_pipeline(
    leader: RedisLeader, dispatches: DispatchRecords, client: redis.Redis
) -> None:
    a = elect(leader, "a")
    batch = [rec(f"s{i}", f"d{i}") for i in range(1500)]
    with pytest.raises(NotLeaderError):
        dispatches.add_many(batch, ttl=5, fence=LeaderFence(owner_tag="a", token=a.token + 1))
    assert dispatches.pending_count() == 0
    dispatches.add_many(batch, ttl=5, fence=LeaderFence(owner_tag="a", token=a.token))
    assert dispatches.pending_count() == 1500


def test_foreign_data_under_the_leader_key(
    leader: RedisLeader, dispatches: DispatchRecords, client: redis.Redis, keys: KeySpace
) -> None:
    client.set(keys.leader(), "not a hash")
    with pytest.raises(MalformedDataError, match=keys.leader()):
        elect(leader, "a")
    with pytest.raises(MalformedDataError, match=keys.leader()):
        dispatches.add_many([rec("s", "d")], ttl=5, fence=LeaderFence(owner_tag="a", token=1))
    client.delete(keys.leader())
    client.hset(keys.leader(), mapping={"format": "1", "owner_tag": "z", "token": "x"})
    with pytest.raises(MalformedDataError, match="not a number"):
        elect(leader, "a")
    with pytest.raises(MalformedDataError, match=keys.leader()):
        leader.current()


def test_real_redis_time_take_over(client: redis.Redis, keys: KeySpace) -> None:
    """Production path: the scripts read TIME; nobody passes a clock."""
    real = RedisLeader(client, keys, timeout=0.3)
    assert elect(real, "a").leading
    assert not elect(real, "b").leading
    deadline = time.monotonic() + 5
    while not elect(real, "b").leading:
        assert time.monotonic() < deadline, "b never took over"
        time.sleep(0.02)
    current = real.current()
    assert current is not None
    assert current.owner_tag == "b"
    assert real.expired(current, ms_to_datetime(int(time.time() * 1000) + 10_000))
