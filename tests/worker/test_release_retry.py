"""A run's lease release is retried while Redis does not answer (a
fail-over's seconds), so its schedule does not wait for the lease to
expire; foreign data is not retried. The leases here are a stand-in that
fails on purpose (the retry rule is what is tested; the release itself is
tested on a real Redis in tests/leases)."""

from __future__ import annotations

import logging
from types import SimpleNamespace
from typing import Any

import pytest

from celery_dgs.errors import LeaseError, MalformedDataError
from celery_dgs.worker import run_records
from celery_dgs.worker.run_records import RELEASE_ATTEMPTS, release_lease


class FailingLeases:
    def __init__(self, failures: list[Exception]) -> None:
        self.failures = failures
        self.calls = 0

    def release(self, schedule: str, run_id: str) -> bool:
        self.calls += 1
        if self.failures:
            raise self.failures.pop(0)
        return True


@pytest.fixture(autouse=True)
def no_sleep(monkeypatch: pytest.MonkeyPatch) -> list[float]:
    slept: list[float] = []
    monkeypatch.setattr(run_records.time, "sleep", slept.append)
    return slept


def rt_with(leases: FailingLeases) -> Any:
    return SimpleNamespace(leases=leases)


def test_a_release_is_retried_through_a_failover(no_sleep: list[float]) -> None:
    noreplicas = LeaseError("release.lua failed: NOREPLICAS Not enough good replicas")
    leases = FailingLeases([noreplicas, noreplicas])
    release_lease(rt_with(leases), "s", "r")
    assert leases.calls == 3
    assert no_sleep == [0.2, 0.4]


def test_a_release_gives_up_after_its_attempts_and_says_when_the_lease_frees(
    no_sleep: list[float], caplog: pytest.LogCaptureFixture
) -> None:
    down = LeaseError("release.lua failed: ConnectionError")
    leases = FailingLeases([down] * RELEASE_ATTEMPTS)
    with caplog.at_level(logging.WARNING, logger="celery_dgs.worker"):
        release_lease(rt_with(leases), "s", "r")
    assert leases.calls == RELEASE_ATTEMPTS
    assert no_sleep == [0.2, 0.4, 0.8, 1.6]
    assert "releasing the lease of s failed after 5 attempts; it expires after " in caplog.text


def test_foreign_data_is_not_retried(no_sleep: list[float]) -> None:
    leases = FailingLeases([MalformedDataError("foreign data")])
    release_lease(rt_with(leases), "s", "r")
    assert leases.calls == 1
    assert no_sleep == []


def test_a_primary_refusing_writes_is_not_called_unreachable() -> None:
    import redis

    from celery_dgs.failures import explain_failure

    exc = redis.ConnectionError("the primary refuses writes (NOREPLICAS Not enough good replicas)")
    line, refused = explain_failure(
        exc, redis_url="redis://h:1/0", redis_setting="dgs_redis_url", database_url=""
    ) or ("", True)
    assert not refused
    assert line.startswith("Redis at redis://h:1/0 (dgs_redis_url) refuses writes for now (")
    assert line.endswith("a fail-over in progress, or the primary cut off from its replicas")
