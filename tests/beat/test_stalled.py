"""StalledWorkers: which workers beat sets aside, and what it says when it does.

Pure logic (the lease ages and registration times are given), so no servers."""

from __future__ import annotations

import logging
from datetime import datetime, timedelta, timezone

import pytest

from celery_dgs.beat.stalled import StalledWorkers
from celery_dgs.registry import WorkerInfo

T0 = datetime(2026, 1, 1, 12, 0, tzinfo=timezone.utc)
PING_TIMEOUT = timedelta(seconds=90)
TTL = timedelta(seconds=60)


def worker(name: str, refreshed_at: datetime) -> WorkerInfo:
    return WorkerInfo(
        name=name,
        node=name.split("@")[1],
        queues=("celery",),
        slots=1,
        pool="solo",
        pid=1,
        started_at=T0,
        expires_at=refreshed_at + TTL,
    )


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
