"""Dispatch records: current, stale, taken back; and how the acquire script consumes them."""

from __future__ import annotations

import logging

import pytest
import redis

from celery_dgs.dispatches import DispatchRecord, DispatchRecords
from celery_dgs.errors import MalformedDataError
from celery_dgs.keys import KeySpace
from celery_dgs.leases import AcquireResult, AcquireStatus, RedisLeases
from celery_dgs.leases.codec import ms_to_datetime
from tests.leases.helpers import T0_MS, MsClock


def rec(schedule: str, dispatch_id: str, worker: str = "celery@w1") -> DispatchRecord:
    return DispatchRecord(schedule=schedule, dispatch_id=dispatch_id, worker=worker)


def start(leases: RedisLeases, schedule: str, dispatch_id: str | None, tag: str) -> AcquireResult:
    return leases.acquire(
        schedule, owner_node="w1", owner_name="celery@w1", owner_tag=tag, dispatch_id=dispatch_id
    )


def test_add_many_then_current(dispatches: DispatchRecords) -> None:
    at = dispatches.add_many([rec("a", "d1"), rec("b", "d2", "celery@w2")], ttl=5)
    assert at == ms_to_datetime(T0_MS)
    current = dispatches.current("b")
    assert current == DispatchRecord(
        schedule="b",
        dispatch_id="d2",
        worker="celery@w2",
        dispatched_at=ms_to_datetime(T0_MS),
        expires_at=ms_to_datetime(T0_MS + 5000),
    )
    assert dispatches.current("c") is None
    assert dispatches.pending_count() == 2
    assert dispatches.pending_names() == {"a", "b"}
    assert dispatches.add_many([], ttl=5) is None


def test_a_new_dispatch_replaces_the_old_one(dispatches: DispatchRecords) -> None:
    dispatches.add_many([rec("a", "d1")], ttl=5)
    dispatches.add_many([rec("a", "d2")], ttl=5)
    current = dispatches.current("a")
    assert current is not None
    assert current.dispatch_id == "d2"
    assert dispatches.pending_count() == 1
    with pytest.raises(ValueError, match="same schedule"):
        dispatches.add_many([rec("x", "1"), rec("x", "2")], ttl=5)


def test_matching_dispatch_starts_and_is_consumed(
    dispatches: DispatchRecords, leases: RedisLeases
) -> None:
    dispatches.add_many([rec("a", "d1"), rec("b", "d2")], ttl=5)
    result = start(leases, "a", "d1", "run1")
    assert result.granted
    info = leases.get("a")
    assert info is not None
    assert info.dispatch_id == "d1"
    assert dispatches.current("a") is None
    assert dispatches.pending_names() == {"b"}
    # the broker redelivers the same message: no record any more, so it is stale
    leases.release("a", "run1")
    again = start(leases, "a", "d1", "run2")
    assert again.status is AcquireStatus.STALE_DISPATCH
    assert again.current_dispatch_id is None


def test_a_message_of_a_replaced_dispatch_is_stale(
    dispatches: DispatchRecords, leases: RedisLeases
) -> None:
    dispatches.add_many([rec("a", "old")], ttl=5)
    dispatches.add_many([rec("a", "new")], ttl=5)
    stale = start(leases, "a", "old", "run1")
    assert stale.status is AcquireStatus.STALE_DISPATCH
    assert stale.current_dispatch_id == "new"
    assert leases.get("a") is None  # nothing written
    assert dispatches.current("a") is not None
    assert start(leases, "a", "new", "run2").granted


def test_taken_back_dispatch_is_stale(dispatches: DispatchRecords, leases: RedisLeases) -> None:
    dispatches.add_many([rec("a", "d1")], ttl=5)
    assert dispatches.take_back("a", "other") is False
    assert dispatches.take_back("a", "d1") is True
    assert dispatches.take_back("a", "d1") is False
    assert dispatches.pending_count() == 0
    assert start(leases, "a", "d1", "run1").status is AcquireStatus.STALE_DISPATCH


def test_take_back_after_the_start_changes_nothing(
    dispatches: DispatchRecords, leases: RedisLeases
) -> None:
    dispatches.add_many([rec("a", "d1")], ttl=5)
    assert start(leases, "a", "d1", "run1").granted
    assert dispatches.take_back("a", "d1") is False
    info = leases.get("a")
    assert info is not None
    assert info.owner_tag == "run1"


def test_ad_hoc_runs_skip_the_dispatch_check(
    dispatches: DispatchRecords, leases: RedisLeases
) -> None:
    dispatches.add_many([rec("a", "d1")], ttl=5)
    assert start(leases, "a", None, "adhoc").granted
    assert dispatches.current("a") is not None  # the pending dispatch is not consumed
    held = start(leases, "a", "d1", "run1")
    assert held.status is AcquireStatus.HELD  # the dispatch stays until taken back
    assert dispatches.current("a") is not None


def test_expired(dispatches: DispatchRecords, clock: MsClock) -> None:
    dispatches.add_many([rec("a", "d1")], ttl=1)
    clock.advance(500)
    dispatches.add_many([rec("b", "d2")], ttl=1)
    assert dispatches.expired() == []
    clock.advance(500)  # a expires exactly now
    assert [r.schedule for r in dispatches.expired()] == ["a"]
    clock.advance(500)
    expired = dispatches.expired()
    assert [(r.schedule, r.dispatch_id) for r in expired] == [("a", "d1"), ("b", "d2")]
    assert expired[1].expires_at == ms_to_datetime(T0_MS + 1500)
    assert [r.schedule for r in dispatches.expired(ms_to_datetime(T0_MS + 999))] == []
    assert len(dispatches.expired(limit=1)) == 1
    for r in expired:
        assert dispatches.take_back(r.schedule, r.dispatch_id)
    assert dispatches.expired() == []


def test_expired_skips_foreign_records(
    dispatches: DispatchRecords,
    client: redis.Redis,
    keys: KeySpace,
    clock: MsClock,
    caplog: pytest.LogCaptureFixture,
) -> None:
    dispatches.add_many([rec("a", "d1"), rec("b", "d2")], ttl=1)
    client.delete(keys.dispatch("b"))
    client.set(keys.dispatch("b"), "junk")
    clock.advance(2000)
    with caplog.at_level(logging.ERROR):
        assert [r.schedule for r in dispatches.expired()] == ["a"]
    assert keys.dispatch("b") in caplog.text
    with pytest.raises(MalformedDataError, match=keys.dispatch("b")):
        dispatches.current("b")
    with pytest.raises(MalformedDataError, match=keys.dispatch("b")):
        dispatches.add_many([rec("b", "d3")], ttl=1)
    with pytest.raises(MalformedDataError, match=keys.dispatch("b")):
        start(dispatches_leases(dispatches, clock), "b", "d2", "run")


def dispatches_leases(dispatches: DispatchRecords, clock: MsClock) -> RedisLeases:
    return RedisLeases(
        dispatches.client, dispatches.keys, ping_timeout=1, steal_delay=1, clock_ms=clock
    )


def test_add_many_into_the_callers_pipeline(
    dispatches: DispatchRecords, client: redis.Redis, keys: KeySpace
) -> None:
    pipe = client.pipeline(transaction=False)
    pipe.set(keys.leader(), "me")
    batch = [rec(f"s{i}", f"d{i}") for i in range(2500)]  # three script calls
    assert dispatches.add_many(batch, ttl=5, pipeline=pipe) is None
    assert dispatches.pending_count() == 0  # nothing sent yet
    replies = pipe.execute()
    assert replies[0] is True
    assert len(replies) == 4
    assert dispatches.pending_count() == 2500
    record = dispatches.current("s2499")
    assert record is not None
    assert record.dispatch_id == "d2499"


def test_add_many_larger_than_a_chunk_without_pipeline(dispatches: DispatchRecords) -> None:
    at = dispatches.add_many((rec(f"s{i}", f"d{i}") for i in range(1500)), ttl=5)
    assert at == ms_to_datetime(T0_MS)
    assert dispatches.pending_count() == 1500
