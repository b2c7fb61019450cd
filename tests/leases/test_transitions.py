"""Every lease transition against a real server, on a pinned Redis clock (exact boundaries)."""

from __future__ import annotations

from typing import Any

import pytest
import redis

from celery_dgs.keys import KeySpace
from celery_dgs.leases import AcquireStatus, CancelStatus, PingStatus, RedisLeases
from celery_dgs.leases.codec import ms_to_datetime
from celery_dgs.leases.types import ReclaimStatus
from tests.leases.helpers import T0_MS, MsClock, running_names

PT = 300  # ping_timeout, ms
SD = 300  # steal_delay, ms


def grab(leases: RedisLeases, tag: str, schedule: str = "s", **kw: object) -> AcquireStatus:
    result = leases.acquire(
        schedule, owner_node="n-" + tag, owner_name="celery@" + tag, owner_tag=tag, **kw
    )  # type: ignore[arg-type]
    return result.status


def test_fresh_acquire_writes_every_field(leases: RedisLeases) -> None:
    result = leases.acquire("s", owner_node="node1", owner_name="celery@node1", owner_tag="A")
    assert result.granted
    assert result.token == 1
    assert result.started_at == result.now == ms_to_datetime(T0_MS)
    assert result.took_over_from is None
    info = leases.get("s")
    assert info is not None
    assert (info.schedule, info.owner_node, info.owner_name, info.owner_tag) == (
        "s",
        "node1",
        "celery@node1",
        "A",
    )
    assert info.started_at == info.last_ping_at == ms_to_datetime(T0_MS)
    assert info.started_at.tzinfo is not None
    assert info.steal_start_at is None
    assert info.token == 1
    assert info.progress is None
    assert info.cancel_requested is False
    assert info.dispatch_id is None
    assert leases.get("other") is None


def test_retry_by_the_same_owner_is_granted_again_with_the_same_token(
    leases: RedisLeases, clock: MsClock
) -> None:
    first = leases.acquire("s", owner_node="n", owner_name="w", owner_tag="A")
    clock.advance(100)
    again = leases.acquire("s", owner_node="n", owner_name="w", owner_tag="A")
    assert again.granted
    assert again.renewed
    assert (again.token, again.started_at) == (first.token, first.started_at)
    info = leases.get("s")
    assert info is not None
    assert info.last_ping_at == ms_to_datetime(T0_MS + 100)


def test_live_owner_holds_up_to_exactly_ping_timeout(leases: RedisLeases, clock: MsClock) -> None:
    assert grab(leases, "A") is AcquireStatus.GRANTED
    clock.advance(PT)  # exactly ping_timeout since the last ping: still live
    held = leases.acquire("s", owner_node="n", owner_name="celery@B", owner_tag="B")
    assert held.status is AcquireStatus.HELD
    assert held.holder is not None
    assert held.holder.owner_tag == "A"
    info = leases.get("s")
    assert info is not None
    assert info.steal_start_at is None


def test_steal_marked_after_ping_timeout_and_takeable_only_after_steal_delay(
    leases: RedisLeases, clock: MsClock
) -> None:
    assert grab(leases, "A") is AcquireStatus.GRANTED
    marked_at = clock.advance(PT + 1)
    pending = leases.acquire("s", owner_node="n", owner_name="w", owner_tag="B")
    assert pending.status is AcquireStatus.STEAL_PENDING
    assert pending.holder is not None
    assert pending.holder.steal_start_at == ms_to_datetime(marked_at)

    clock.advance(SD)  # exactly steal_delay after the mark: not yet
    again = leases.acquire("s", owner_node="n", owner_name="w", owner_tag="B")
    assert again.status is AcquireStatus.STEAL_PENDING
    assert again.holder is not None  # the mark is not moved by a second attempt
    assert again.holder.steal_start_at == ms_to_datetime(marked_at)

    clock.advance(1)  # a moment later it can be taken
    taken = leases.acquire("s", owner_node="n2", owner_name="celery@B", owner_tag="B")
    assert taken.status is AcquireStatus.GRANTED
    assert taken.token == 2
    assert taken.took_over_from is not None
    assert taken.took_over_from.owner_tag == "A"
    assert taken.took_over_from.token == 1
    assert taken.took_over_from.steal_start_at == ms_to_datetime(marked_at)
    info = leases.get("s")
    assert info is not None
    assert (info.owner_tag, info.owner_node, info.token, info.steal_start_at) == (
        "B",
        "n2",
        2,
        None,
    )


def test_stolen_owner_ping_is_not_owner_and_its_release_and_yield_fail(
    leases: RedisLeases, clock: MsClock
) -> None:
    grab(leases, "A")
    clock.advance(PT + 1)
    grab(leases, "B")
    clock.advance(SD + 1)
    assert grab(leases, "B") is AcquireStatus.GRANTED
    ping = leases.ping("s", "A")
    assert ping.status is PingStatus.NOT_OWNER
    assert not ping.owner
    assert ping.token is None
    assert ping.holder_tag == "B"
    assert leases.release("s", "A") is False
    assert leases.yield_lease("s", "A") is False
    info = leases.get("s")
    assert info is not None
    assert info.owner_tag == "B"
    assert leases.ping("s", "B").status is PingStatus.OK


def test_ping_clears_a_pending_steal(leases: RedisLeases, clock: MsClock) -> None:
    grab(leases, "A")
    clock.advance(PT + 1)
    assert grab(leases, "B") is AcquireStatus.STEAL_PENDING
    clock.advance(100)
    ping = leases.ping("s", "A", progress=0.25)
    assert ping.status is PingStatus.OK
    assert ping.now == ms_to_datetime(clock.ms)
    assert ping.token == 1
    info = leases.get("s")
    assert info is not None
    assert info.steal_start_at is None
    assert info.last_ping_at == ms_to_datetime(clock.ms)
    assert info.progress == 0.25
    clock.advance(250)  # past the old mark's steal delay, within ping_timeout of the ping
    assert grab(leases, "B") is AcquireStatus.HELD


def test_ping_without_lease_is_not_owner(leases: RedisLeases) -> None:
    assert leases.ping("nothing", "A").status is PingStatus.NOT_OWNER


def test_ping_progress_must_be_a_fraction(leases: RedisLeases) -> None:
    grab(leases, "A")
    with pytest.raises(ValueError, match="progress"):
        leases.ping("s", "A", progress=1.5)


def test_release_only_by_the_owner(
    leases: RedisLeases, client: redis.Redis, keys: KeySpace
) -> None:
    grab(leases, "A")
    assert leases.release("s", "B") is False
    assert leases.get("s") is not None
    assert leases.release("s", "A") is True
    assert leases.get("s") is None
    assert client.zscore(keys.lease_index(), "s") is None
    assert leases.release("s", "A") is False
    assert leases.acquire("s", owner_node="n", owner_name="w", owner_tag="C").token == 2


def test_reclaim_follows_the_steal_protocol_for_the_silent_owner_only(
    leases: RedisLeases, client: redis.Redis, keys: KeySpace, clock: MsClock
) -> None:
    assert leases.reclaim("s", "A") is ReclaimStatus.OTHER  # no lease
    grab(leases, "A")
    assert leases.reclaim("s", "B") is ReclaimStatus.OTHER  # another owner's
    clock.advance(PT)
    assert leases.reclaim("s", "A") is ReclaimStatus.LIVE  # pinged within ping_timeout
    clock.advance(1)
    assert leases.reclaim("s", "A") is ReclaimStatus.PENDING  # the steal is marked
    info = leases.get("s")
    assert info is not None
    assert info.steal_start_at == ms_to_datetime(clock())
    clock.advance(SD)
    assert leases.reclaim("s", "A") is ReclaimStatus.PENDING  # the owner may still ping
    generation = client.get(keys.lease_generation())
    clock.advance(1)
    assert leases.reclaim("s", "A") is ReclaimStatus.RECLAIMED
    assert leases.get("s") is None
    assert client.zscore(keys.lease_index(), "s") is None
    assert client.get(keys.lease_generation()) != generation, "beat's view reads the change"
    assert leases.ping("s", "A").status is PingStatus.NOT_OWNER  # a resumed owner stops
    assert leases.acquire("s", owner_node="n", owner_name="w", owner_tag="C").token == 2


def test_a_ping_within_the_steal_delay_clears_the_reclaims_mark(
    leases: RedisLeases, clock: MsClock
) -> None:
    grab(leases, "A")
    clock.advance(PT + 1)
    assert leases.reclaim("s", "A") is ReclaimStatus.PENDING
    assert leases.ping("s", "A").owner
    clock.advance(PT // 2)  # the mark is cleared: silent for less than ping_timeout
    assert leases.reclaim("s", "A") is ReclaimStatus.LIVE


def test_yield_frees_the_lease_at_once(leases: RedisLeases) -> None:
    grab(leases, "A")
    assert leases.yield_lease("s", "B") is False
    assert leases.yield_lease("s", "A") is True
    assert running_names(leases) == set()
    taken = leases.acquire("s", owner_node="n", owner_name="w", owner_tag="B")  # same instant
    assert taken.granted
    assert taken.token == 2
    assert taken.took_over_from is None


def test_cancel_flag_is_seen_by_the_owners_ping(leases: RedisLeases) -> None:
    assert leases.request_cancel("s", owner_tag="A").status is CancelStatus.NO_LEASE
    grab(leases, "A")
    assert leases.ping("s", "A").status is PingStatus.OK
    done = leases.request_cancel("s", owner_tag="A")
    assert (done.status, done.owner_tag, done.token, done.requested) == (
        CancelStatus.REQUESTED,
        "A",
        1,
        True,
    )
    assert leases.request_cancel("s", token=1).status is CancelStatus.ALREADY
    info = leases.get("s")
    assert info is not None
    assert info.cancel_requested
    ping = leases.ping("s", "A")
    assert ping.status is PingStatus.CANCELLED
    assert ping.owner
    assert ping.token == 1
    assert leases.ping("s", "B").status is PingStatus.NOT_OWNER
    assert leases.release("s", "A") is True
    grab(leases, "C")
    assert leases.ping("s", "C").status is PingStatus.OK  # a new run starts uncancelled


@pytest.mark.parametrize(
    "target", [{"owner_tag": "A"}, {"token": 1}, {"owner_tag": "A", "token": 1}]
)
def test_cancel_aimed_at_an_ended_run_leaves_the_next_run_alone(
    leases: RedisLeases, target: dict[str, Any]
) -> None:
    # The race `celery dgs cancel` can lose: it read run 1's lease, run 1 ended
    # and run 2 started before the request reached Redis.
    assert grab(leases, "A") is AcquireStatus.GRANTED
    assert leases.release("s", "A") is True
    assert grab(leases, "B") is AcquireStatus.GRANTED
    missed = leases.request_cancel("s", **target)
    assert (missed.status, missed.owner_tag, missed.token, missed.requested) == (
        CancelStatus.OTHER_RUN,
        "B",
        2,
        False,
    )
    info = leases.get("s")
    assert info is not None
    assert not info.cancel_requested
    assert leases.ping("s", "B").status is PingStatus.OK
    # A token that names run 2 but a tag that names run 1 is not run 2 either.
    both = leases.request_cancel("s", owner_tag="A", token=2)
    assert both.status is CancelStatus.OTHER_RUN


def test_cancel_needs_a_target(leases: RedisLeases) -> None:
    with pytest.raises(ValueError, match="owner_tag or token"):
        leases.request_cancel("s")
    with pytest.raises(ValueError, match="owner_tag"):
        leases.request_cancel("s", owner_tag="")


def test_token_strictly_increases_and_respects_the_min_token_floor(
    leases: RedisLeases, clock: MsClock
) -> None:
    tokens = []
    for i, floor in enumerate([0, 41, 0, 10, 100]):
        result = leases.acquire(
            "s", owner_node="n", owner_name="w", owner_tag=f"T{i}", min_token=floor
        )
        clock.advance(PT + SD)  # past the restart grace of the first sighting of this server
        assert result.granted
        assert result.token is not None
        assert result.token > floor
        tokens.append(result.token)
        assert leases.release("s", f"T{i}")
    assert tokens == [1, 42, 43, 44, 101]
    # tokens are per schedule
    assert leases.acquire("other", owner_node="n", owner_name="w", owner_tag="X").token == 1


def test_min_token_must_be_a_non_negative_int(leases: RedisLeases) -> None:
    with pytest.raises(ValueError, match="min_token"):
        leases.acquire("s", owner_node="n", owner_name="w", owner_tag="A", min_token=-1)
    with pytest.raises(ValueError, match="owner_tag"):
        leases.acquire("s", owner_node="n", owner_name="w", owner_tag="")


def test_beat_view_sweep_marks_stale_leases_and_reports_takeable_ones(
    leases: RedisLeases, clock: MsClock
) -> None:
    for name in ("a", "b", "c"):
        grab(leases, "owner-" + name, schedule=name)
    clock.advance(PT)
    first = leases.beat_view()
    assert (first.marked, first.takeable) == (set(), set())  # exactly ping_timeout: still live
    clock.advance(1)
    leases.ping("c", "owner-c")
    second = leases.beat_view()
    assert second.marked == {"a", "b"}
    assert second.takeable == set()
    assert running_names(leases) == {"a", "b", "c"}  # a steal pending still counts as running
    clock.advance(100)
    leases.ping("b", "owner-b")  # b answers within the steal delay
    clock.advance(SD - 100)
    assert leases.beat_view().takeable == set()  # exactly steal_delay after the mark
    clock.advance(1)
    third = leases.beat_view()
    assert third.takeable == {"a"}
    assert "c" in third.marked  # c last pinged more than ping_timeout ago by now
    assert running_names(leases) == {"b", "c"}
    assert grab(leases, "new", schedule="a") is AcquireStatus.GRANTED
    assert running_names(leases) == {"a", "b", "c"}


def test_all_lists_every_lease_via_the_index(leases: RedisLeases) -> None:
    for name in ("x", "y", "z"):
        grab(leases, "t-" + name, schedule=name)
    leases.release("y", "t-y")
    assert sorted(lease.schedule for lease in leases.all()) == ["x", "z"]
    assert {lease.owner_tag for lease in leases.all()} == {"t-x", "t-z"}


def test_now_reads_redis_time(real_leases: RedisLeases, client: redis.Redis) -> None:
    seconds, micros = client.time()
    now = real_leases.now()
    assert now.tzinfo is not None
    assert 0 <= (now - ms_to_datetime(seconds * 1000 + micros // 1000)).total_seconds() < 5
