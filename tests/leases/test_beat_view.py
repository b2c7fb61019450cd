"""beat_view.lua on a real server and a pinned clock: the compact state of a
dispatch round must agree with reading every lease (the old way), honour the
key prefix, and report foreign data without failing the round."""

from __future__ import annotations

import random
from datetime import datetime

import pytest
import redis

from celery_dgs.dispatches import DispatchRecord, DispatchRecords
from celery_dgs.errors import MalformedDataError
from celery_dgs.keys import KeySpace
from celery_dgs.leases import RedisLeases
from celery_dgs.leases.codec import ms_to_datetime
from tests.leases.helpers import PING_TIMEOUT_S, STEAL_DELAY_S, MsClock

PT = int(PING_TIMEOUT_S * 1000)
SD = int(STEAL_DELAY_S * 1000)


def grab(leases: RedisLeases, schedule: str, worker: str) -> None:
    result = leases.acquire(
        schedule, owner_node="n", owner_name=worker, owner_tag=f"{worker}/{schedule}"
    )
    assert result.granted, result


def test_running_per_worker_stale_owners_and_takeable(leases: RedisLeases, clock: MsClock) -> None:
    grab(leases, "a1", "celery@a")
    grab(leases, "a2", "celery@a")
    grab(leases, "b1", "celery@b")
    grab(leases, "c1", "celery@c")
    clock.advance(PT + 1)  # every lease is stale now; a and c ping again
    for schedule, worker in (("a1", "celery@a"), ("a2", "celery@a"), ("c1", "celery@c")):
        assert leases.ping(schedule, f"{worker}/{schedule}").token
    view = leases.beat_view()
    assert view.running == {"a1", "a2", "b1", "c1"}  # b1's steal is pending: still running
    assert view.running_by_worker == {"celery@a": 2, "celery@b": 1, "celery@c": 1}
    assert view.stale_workers == {"celery@b": ms_to_datetime(clock.ms - PT - 1)}
    assert view.takeable == frozenset()
    assert leases.get("b1").steal_start_at is not None  # type: ignore[union-attr]  # swept

    clock.advance(SD // 2)
    for schedule, worker in (("a1", "celery@a"), ("a2", "celery@a"), ("c1", "celery@c")):
        assert leases.ping(schedule, f"{worker}/{schedule}").token
    clock.advance(SD // 2 + 1)  # b1 takeable; a and c within ping_timeout
    view = leases.beat_view()
    assert view.takeable == {"b1"}
    assert view.running == {"a1", "a2", "c1"}
    assert view.running_by_worker == {"celery@a": 2, "celery@c": 1}
    assert set(view.stale_workers) == {"celery@b"}  # its owner is still the stalled worker

    grab(leases, "b1", "celery@c")  # c takes the lease over: b owns nothing stale
    view = leases.beat_view()
    assert view.stale_workers == {}
    assert view.running_by_worker == {"celery@a": 2, "celery@c": 2}


def test_dispatch_names_are_sent_only_when_the_count_differs(
    leases: RedisLeases, dispatches: DispatchRecords
) -> None:
    dispatches.add_many(
        [DispatchRecord(schedule=s, dispatch_id=f"d-{s}", worker="celery@a") for s in ("x", "y")],
        ttl=60,
    )
    assert leases.beat_view().dispatch_names == {"x", "y"}  # None expected: always read
    same = leases.beat_view(expected_dispatches=2)
    assert (same.dispatch_count, same.dispatch_names) == (2, None)
    fewer = leases.beat_view(expected_dispatches=3)
    assert fewer.dispatch_names == {"x", "y"}
    with pytest.raises(ValueError, match="expected_dispatches"):
        leases.beat_view(expected_dispatches=-1)


def test_agrees_with_reading_every_lease(leases: RedisLeases, clock: MsClock) -> None:
    rng = random.Random(7)
    workers = [f"celery@w{i}" for i in range(5)]
    owner: dict[str, str] = {}
    reader = leases.beat_view_reader()  # one reader: owners kept between generations
    cached_rounds = 0
    for step in range(40):
        for i in range(rng.randint(0, 6)):
            name, worker = f"s{step}-{i}", rng.choice(workers)
            grab(leases, name, worker)
            owner[name] = worker
        for name in rng.sample(sorted(owner), k=min(len(owner), 3)):
            if rng.random() < 0.5:
                leases.ping(name, f"{owner[name]}/{name}")
            else:
                leases.release(name, f"{owner[name]}/{name}")
                owner.pop(name)
        if rng.random() < 0.3:  # a take-over: same lease set, another owner
            stale = [
                n
                for n in owner
                if (lease := leases.get(n))
                and lease.steal_start_at
                and clock.ms - lease.steal_start_at.timestamp() * 1000 > SD
            ]
            if stale:
                name, worker = stale[0], rng.choice(workers)
                grab(leases, name, worker)
                owner[name] = worker
        clock.advance(rng.randint(0, PT // 2))
        view = reader.read()
        cached_rounds += not view.owners_read
        if rng.random() < 0.3:
            view = reader.read()  # nothing changed in between: from the kept owners
            assert not view.owners_read
        # takeable: a steal marked more than steal_delay ago (the view marked the rest)
        takeable = {
            lease.schedule
            for lease in leases.all()
            if lease.steal_start_at and clock.ms - lease.steal_start_at.timestamp() * 1000 > SD
        }
        assert view.takeable == takeable
        old = [lease for lease in leases.all() if lease.schedule not in takeable]
        assert view.running == {lease.schedule for lease in old}
        counts: dict[str, int] = {}
        for lease in old:
            counts[lease.owner_name] = counts.get(lease.owner_name, 0) + 1
        assert view.running_by_worker == counts
        stale_ms = clock.ms - PT
        expected: dict[str, datetime] = {}
        for lease in leases.all():
            if lease.last_ping_at.timestamp() * 1000 < stale_ms:
                expected[lease.owner_name] = max(
                    lease.last_ping_at, expected.get(lease.owner_name, lease.last_ping_at)
                )
        assert view.stale_workers == expected
    assert len(owner) > 10
    assert cached_rounds > 0


def test_owners_are_re_read_only_after_a_change(
    leases: RedisLeases, client: redis.Redis, keys: KeySpace, clock: MsClock
) -> None:
    now = [0.0]
    reader = leases.beat_view_reader()
    reader._monotonic = lambda: now[0]
    grab(leases, "a", "celery@a")
    grab(leases, "b", "celery@b")
    assert reader.read().owners_read
    again = reader.read()
    assert not again.owners_read
    assert again.running == {"a", "b"}
    assert again.running_by_worker == {"celery@a": 1, "celery@b": 1}

    assert leases.release("b", "celery@b/b")
    view = reader.read()
    assert view.owners_read
    assert view.running == {"a"}

    clock.advance(PT + SD + 2)  # a is takeable (marked, then past the steal delay)
    reader.read()
    clock.advance(SD + 1)
    view = reader.read()
    assert not view.owners_read
    assert view.takeable == {"a"}
    assert view.running == frozenset()
    assert view.running_by_worker == {}  # the kept counts, minus the takeable lease
    assert set(view.stale_workers) == {"celery@a"}
    grab(leases, "a", "celery@b")  # take-over: the same lease set, a new owner
    view = reader.read()
    assert view.owners_read
    assert view.running_by_worker == {"celery@b": 1}
    assert view.stale_workers == {}

    client.zadd(keys.lease_index(), {"ghost": clock.ms - PT - 1})  # no hash: dropped
    assert reader.read().owners_read
    assert client.zscore(keys.lease_index(), "ghost") is None
    assert not reader.read().owners_read

    client.delete(keys.lease_generation())  # lost: the next change starts from the time
    assert reader.read().owners_read
    assert leases.release("a", "celery@b/a")
    gen = int(client.get(keys.lease_generation()) or 0)
    assert gen > 1_000_000_000_000_000  # microseconds since the epoch
    assert reader.read().owners_read
    assert not reader.read().owners_read
    now[0] += 61  # the safety net: every owner at least every FULL_READ_EVERY_S
    assert reader.read().owners_read


def test_a_foreign_generation_key_means_reading_every_owner(
    leases: RedisLeases, client: redis.Redis, keys: KeySpace
) -> None:
    client.hset(keys.lease_generation(), "x", "1")
    grab(leases, "a", "celery@a")  # acquire leaves the foreign key alone and still grants
    reader = leases.beat_view_reader()
    for _ in range(2):
        view = reader.read()
        assert view.owners_read
        assert view.running_by_worker == {"celery@a": 1}
    assert client.type(keys.lease_generation()) == b"hash"


def test_the_key_prefix_separates_beats(client: redis.Redis, clock: MsClock) -> None:
    one = RedisLeases(client, KeySpace("view-one"), ping_timeout=1, steal_delay=1, clock_ms=clock)
    two = RedisLeases(
        client, KeySpace("view-two", hash_tag=True), ping_timeout=1, steal_delay=1, clock_ms=clock
    )
    grab(one, "s", "celery@one")
    DispatchRecords(client, KeySpace("view-one")).add_many(
        [DispatchRecord(schedule="d", dispatch_id="1", worker="celery@one")], ttl=60
    )
    assert one.beat_view().running_by_worker == {"celery@one": 1}
    assert one.beat_view().dispatch_names == {"d"}
    other = two.beat_view()
    assert (other.running, other.running_by_worker, other.dispatch_names) == (
        frozenset(),
        {},
        frozenset(),
    )


def test_foreign_data_under_lease_keys_counts_as_running_and_is_reported(
    leases: RedisLeases,
    client: redis.Redis,
    keys: KeySpace,
    clock: MsClock,
    caplog: pytest.LogCaptureFixture,
) -> None:
    grab(leases, "good", "celery@a")
    index = keys.lease_index()
    client.set(keys.lease("string"), "not a lease")
    client.hset(keys.lease("oldformat"), mapping={"format": "0", "owner_name": "celery@z"})
    client.hset(keys.lease("noping"), mapping={"format": "1", "owner_name": "celery@y"})
    client.zadd(
        index,
        {"string": clock.ms, "oldformat": clock.ms, "ghost": clock.ms, "noping": clock.ms - PT - 1},
    )
    view = leases.beat_view()
    assert view.running == {"good", "string", "oldformat", "noping"}  # ghost: no hash
    assert view.running_by_worker == {"celery@a": 1}
    assert set(view.malformed) == {"string", "oldformat", "noping"}
    assert "string" in view.malformed["string"]
    assert "format version 0" in view.malformed["oldformat"]
    assert "last_ping_at" in view.malformed["noping"]
    assert f"{keys.lease('string')!r}" in caplog.text  # logged, naming the key
    assert client.get(keys.lease("string")) == b"not a lease"  # left alone


@pytest.mark.parametrize("which", ["lease index", "dispatch index"])
def test_a_foreign_index_is_a_clear_error(
    leases: RedisLeases, client: redis.Redis, keys: KeySpace, which: str
) -> None:
    key = keys.lease_index() if which == "lease index" else keys.dispatch_index()
    client.set(key, "x")
    with pytest.raises(MalformedDataError, match=rf"{key}.*string"):
        leases.beat_view()


def test_running_leases_pinged_before_a_moment_per_worker(
    leases: RedisLeases, clock: MsClock
) -> None:
    """What placement reads to leave an earlier instance's leases out of a
    restarted worker's slots: its running leases last pinged before the
    instance registered (takeable ones are not running)."""
    grab(leases, "old1", "celery@a")
    grab(leases, "old2", "celery@a")
    registered = clock.advance(10)
    grab(leases, "new1", "celery@a")
    grab(leases, "b1", "celery@b")
    view = leases.beat_view()
    at = ms_to_datetime(registered)
    assert view.running_by_worker == {"celery@a": 3, "celery@b": 1}
    assert view.running_pinged_before("celery@a", at) == 2
    assert view.running_pinged_before("celery@b", at) == 0
    assert view.running_pinged_before("celery@c", at) == 0
    clock.advance(PT - 9)  # old1 and old2 stale, new1 and b1 not
    assert leases.beat_view().marked == {"old1", "old2"}
    for _ in range(2):
        for schedule, worker in (("new1", "celery@a"), ("b1", "celery@b")):
            assert leases.ping(schedule, f"{worker}/{schedule}").token
        clock.advance(SD // 2 + 1)
    view = leases.beat_view()
    assert view.takeable == {"old1", "old2"}
    assert view.running_by_worker == {"celery@a": 1, "celery@b": 1}
    assert view.running_pinged_before("celery@a", at) == 0
