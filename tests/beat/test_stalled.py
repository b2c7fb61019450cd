"""StalledWorkers: which workers beat sets aside, and what it says when it does.

Pure logic (the lease ages and registration times are given), so no servers."""

from __future__ import annotations

import logging
from datetime import datetime, timedelta, timezone

import pytest

from celery_dgs.beat.stalled import StalledWorkers, own_stale_ping
from celery_dgs.registry import WorkerInfo

T0 = datetime(2026, 1, 1, 12, 0, tzinfo=timezone.utc)
PING_TIMEOUT = timedelta(seconds=90)
TTL = timedelta(seconds=60)


def worker(
    name: str, refreshed_at: datetime, *, registered_at: datetime | None = None, pid: int = 1
) -> WorkerInfo:
    return WorkerInfo(
        name=name,
        node=name.split("@")[1],
        queues=("celery",),
        slots=1,
        pool="solo",
        pid=pid,
        started_at=T0,
        registered_at=registered_at,
        expires_at=refreshed_at + TTL,
    )


def messages(caplog: pytest.LogCaptureFixture) -> list[str]:
    return [r.getMessage() for r in caplog.records if r.name == "celery_dgs.beat"]


def test_a_worker_whose_lease_looks_unpinged_is_set_aside_and_the_warning_names_both_causes(
    caplog: pytest.LogCaptureFixture,
) -> None:
    """The lease's age is read by the Redis server's clock: the warning must not
    claim the worker stopped pinging, because a forward step of that clock makes
    a worker that pings normally look the same."""
    stalled = StalledWorkers()
    last_ping = T0
    a, b = worker("celery@a", T0 + timedelta(seconds=80)), worker("celery@b", T0)
    with caplog.at_level(logging.WARNING, logger="celery_dgs.beat"):
        out = stalled.placeable(
            [a, b], {"celery@a": last_ping}, ping_timeout=PING_TIMEOUT, worker_ttl=TTL
        )
    assert [w.name for w in out] == ["celery@b"]
    assert "celery@a" in stalled
    [record] = [r for r in caplog.records if r.levelno == logging.WARNING]
    message = record.getMessage()
    assert "worker celery@a owns a lease not pinged for over ping_timeout (90.0s)" in message
    assert "by the Redis server's clock" in message
    assert f"last ping {last_ping.isoformat()}" in message
    assert "paused, partitioned or dead, or the Redis host's clock was stepped forward" in message
    assert "stopped pinging" not in message


def test_after_a_redis_clock_step_the_next_registration_refresh_brings_the_worker_back(
    caplog: pytest.LogCaptureFixture,
) -> None:
    """The Redis clock jumps 200 s forward: a's lease (pinged at T0, 10 s ago in
    real time) looks 210 s old. Its main process refreshes its registration,
    dated by the same stepped clock, so the next round dispatches to it again;
    also once its next ping has made the lease fresh."""
    stalled = StalledWorkers()
    step = timedelta(seconds=200)
    a = worker("celery@a", T0 - timedelta(seconds=5))
    assert stalled.placeable([a], {"celery@a": T0}, ping_timeout=PING_TIMEOUT, worker_ttl=TTL) == []
    refreshed = worker("celery@a", T0 + timedelta(seconds=12) + step)
    with caplog.at_level(logging.INFO, logger="celery_dgs.beat"):
        out = stalled.placeable([refreshed], {}, ping_timeout=PING_TIMEOUT, worker_ttl=TTL)
    assert [w.name for w in out] == ["celery@a"]
    assert "celery@a" not in stalled
    assert any("is heard from again" in r.getMessage() for r in caplog.records)


def test_a_worker_heard_from_again_is_not_set_aside_again_for_the_same_stale_lease(
    caplog: pytest.LogCaptureFixture,
) -> None:
    """One pool child stuck: the main process refreshes its registration after
    the lease went stale, so the worker is back; the same stale lease (still
    there until it is taken over) must not set it aside again at every round.
    A lease that goes stale later does."""
    stalled = StalledWorkers()
    stale = {"celery@a": T0}
    kw = {"ping_timeout": PING_TIMEOUT, "worker_ttl": TTL}
    with caplog.at_level(logging.INFO, logger="celery_dgs.beat"):
        assert stalled.placeable([worker("celery@a", T0)], stale, **kw) == []
        refreshed = worker("celery@a", T0 + PING_TIMEOUT + timedelta(seconds=1))
        for _ in range(5):
            assert [w.name for w in stalled.placeable([refreshed], stale, **kw)] == ["celery@a"]
            assert "celery@a" not in stalled
        later = {"celery@a": T0 + timedelta(seconds=30)}  # another lease, stale later
        assert stalled.placeable([refreshed], later, **kw) == []
    log = messages(caplog)
    assert sum("owns a lease not pinged" in m for m in log) == 2, log
    assert sum("is heard from again" in m for m in log) == 1, log


def test_a_new_instance_is_not_set_aside_for_its_earlier_instances_stale_lease(
    caplog: pytest.LogCaptureFixture,
) -> None:
    """kill -9 of w1 and its pool at T0 + 1 s (last ping T0), a new w1 registers
    at T0 + 2 s: its first refresh comes long before T0 + ping_timeout, yet it
    takes dispatches at once, at every round, and beat says nothing about it."""
    stalled = StalledWorkers()
    new = worker("w1@node1", T0 + timedelta(seconds=2), registered_at=T0 + timedelta(seconds=2))
    kw = {"ping_timeout": PING_TIMEOUT, "worker_ttl": TTL}
    with caplog.at_level(logging.INFO, logger="celery_dgs.beat"):
        for _ in range(5):
            out = stalled.placeable([new], {"w1@node1": T0}, **kw)
            assert [w.name for w in out] == ["w1@node1"]
            assert "w1@node1" not in stalled
    assert messages(caplog) == []


def test_a_set_aside_worker_restarted_under_its_name_is_back_at_once(
    caplog: pytest.LogCaptureFixture,
) -> None:
    """Set aside while the old instance was dead and still registered; the new
    instance registers before the old registration's refresh would have
    brought it back: dispatches go to it at the next round."""
    stalled = StalledWorkers()
    kw = {"ping_timeout": PING_TIMEOUT, "worker_ttl": TTL}
    old = worker("w1@node1", T0, registered_at=T0 - timedelta(hours=1))
    stale = {"w1@node1": T0}
    assert stalled.placeable([old], stale, **kw) == []
    restarted_at = T0 + timedelta(seconds=5)
    new = worker("w1@node1", restarted_at, registered_at=restarted_at, pid=2)
    caplog.clear()
    with caplog.at_level(logging.INFO, logger="celery_dgs.beat"):
        for _ in range(3):
            assert [w.name for w in stalled.placeable([new], stale, **kw)] == ["w1@node1"]
    [line] = messages(caplog)
    assert "worker w1@node1 registered again as a new instance (pid 2)" in line
    assert "taken over as a dead owner's" in line


def test_a_new_instance_whose_own_lease_goes_stale_is_set_aside() -> None:
    """The rule spares only leases pinged before the instance registered."""
    stalled = StalledWorkers()
    new = worker("w1@node1", T0, registered_at=T0)
    own_ping = T0 + timedelta(seconds=10)
    out = stalled.placeable(
        [new], {"w1@node1": own_ping}, ping_timeout=PING_TIMEOUT, worker_ttl=TTL
    )
    assert out == []
    assert "w1@node1" in stalled


@pytest.mark.parametrize(
    ("registered_at", "last_ping", "counts"),
    [
        (None, T0, True),  # a registration without registered_at: as before
        (T0, T0 - timedelta(milliseconds=1), False),
        (T0, T0, True),
        (T0, T0 + timedelta(seconds=1), True),
    ],
)
def test_own_stale_ping(registered_at: datetime | None, last_ping: datetime, counts: bool) -> None:
    w = worker("w1@node1", T0, registered_at=registered_at)
    assert own_stale_ping(w, last_ping) == (last_ping if counts else None)
    assert own_stale_ping(w, None) is None
