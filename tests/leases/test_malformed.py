"""Foreign or corrupted data under our keys: a clear MalformedDataError, never a crash loop."""

from __future__ import annotations

import logging
from collections.abc import Callable

import pytest
import redis

from celery_dgs.errors import MalformedDataError
from celery_dgs.keys import KeySpace
from celery_dgs.leases import RedisLeases
from tests.leases.helpers import running_names


def _grab(leases: RedisLeases, schedule: str) -> object:
    return leases.acquire(schedule, owner_node="n", owner_name="w", owner_tag="A")


OPERATIONS: dict[str, Callable[[RedisLeases], object]] = {
    "acquire": lambda lz: _grab(lz, "s"),
    "ping": lambda lz: lz.ping("s", "A"),
    "release": lambda lz: lz.release("s", "A"),
    "yield": lambda lz: lz.yield_lease("s", "A"),
    "cancel": lambda lz: lz.request_cancel("s", owner_tag="A"),
    "get": lambda lz: lz.get("s"),
}


@pytest.mark.parametrize("operation", sorted(OPERATIONS))
def test_a_string_under_the_lease_key(
    operation: str, leases: RedisLeases, client: redis.Redis, keys: KeySpace
) -> None:
    client.set(keys.lease("s"), "not a lease")
    with pytest.raises(MalformedDataError, match=rf"{keys.lease('s')}.*(string|WRONGTYPE)"):
        OPERATIONS[operation](leases)
    assert client.get(keys.lease("s")) == b"not a lease"  # left alone


@pytest.mark.parametrize("operation", sorted(OPERATIONS))
def test_a_hash_with_another_format_version(
    operation: str, leases: RedisLeases, client: redis.Redis, keys: KeySpace
) -> None:
    client.hset(keys.lease("s"), mapping={"format": "99", "owner_tag": "A"})
    with pytest.raises(MalformedDataError, match=rf"{keys.lease('s')}.*format version.*99"):
        OPERATIONS[operation](leases)
    assert client.hget(keys.lease("s"), "format") == b"99"


def test_a_missing_field_is_named(leases: RedisLeases, client: redis.Redis, keys: KeySpace) -> None:
    _grab(leases, "s")
    client.hdel(keys.lease("s"), "owner_node")
    with pytest.raises(MalformedDataError, match=r"test-dgs:lease:s.*'owner_node' is missing"):
        leases.get("s")


def test_a_foreign_token_counter(leases: RedisLeases, client: redis.Redis, keys: KeySpace) -> None:
    client.hset(keys.token("s"), "x", "1")
    with pytest.raises(MalformedDataError, match=keys.token("s")):
        _grab(leases, "s")
    client.delete(keys.token("s"))
    client.set(keys.token("s"), "abc")
    with pytest.raises(MalformedDataError, match=rf"{keys.token('s')}.*not an integer"):
        _grab(leases, "s")
    assert leases.get("s") is None  # nothing half-written


def test_a_foreign_index(leases: RedisLeases, client: redis.Redis, keys: KeySpace) -> None:
    client.set(keys.lease_index(), "x")
    with pytest.raises(MalformedDataError, match=keys.lease_index()):
        _grab(leases, "s")
    with pytest.raises(MalformedDataError, match=keys.lease_index()):
        leases.beat_view()
    with pytest.raises(MalformedDataError, match=keys.lease_index()):
        leases.all()


def test_all_and_beat_view_skip_and_report_malformed_entries(
    leases: RedisLeases, client: redis.Redis, keys: KeySpace, caplog: pytest.LogCaptureFixture
) -> None:
    _grab(leases, "good")
    for name in ("bad-type", "bad-format"):
        _grab(leases, name)
        client.delete(keys.lease(name))
    client.rpush(keys.lease("bad-type"), "x")
    client.hset(keys.lease("bad-format"), mapping={"format": "0"})
    client.zadd(keys.lease_index(), {"bad-type": 0, "bad-format": 0})

    scan = leases.scan()
    assert [lease.schedule for lease in scan.leases] == ["good"]
    assert sorted(str(e).split("'")[1] for e in scan.malformed) == [
        keys.lease("bad-format"),
        keys.lease("bad-type"),
    ]
    with caplog.at_level(logging.ERROR):
        assert [lease.schedule for lease in leases.all()] == ["good"]
    assert sum("skipping a lease" in r.message for r in caplog.records) == 2

    caplog.clear()
    with caplog.at_level(logging.ERROR):
        swept = leases.beat_view()
    assert sorted(swept.malformed) == ["bad-format", "bad-type"]
    assert swept.takeable == set()
    assert any(keys.lease("bad-type") in r.getMessage() for r in caplog.records)
    # unknown state counts as running: nothing is dispatched over foreign data
    assert running_names(leases) == {"good", "bad-type", "bad-format"}


def test_get_many_returns_each_lease_none_or_the_error(
    leases: RedisLeases, client: redis.Redis, keys: KeySpace
) -> None:
    _grab(leases, "good")
    client.set(keys.lease("string"), "not a lease")
    client.hset(keys.lease("old"), mapping={"format": "0"})
    got = leases.get_many(["good", "none", "string", "old"])
    assert list(got) == ["good", "none", "string", "old"]
    good = got["good"]
    assert good is not None
    assert not isinstance(good, MalformedDataError)
    assert good.owner_tag == "A"
    assert got["none"] is None
    assert isinstance(got["string"], MalformedDataError)
    assert keys.lease("string") in str(got["string"])
    assert isinstance(got["old"], MalformedDataError)
    assert "format version is '0'" in str(got["old"])
    assert leases.get_many([]) == {}
