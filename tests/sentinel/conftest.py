"""A real Redis Sentinel deployment (a primary, two replicas, three sentinels on
loopback) for the tests of a ``sentinel://`` dgs_redis_url. Each test gets a
deployment of its own (the fault tests kill and demote its servers). It skips
locally when the server binary does not run as a sentinel, and fails under CI
(``CI=true``), so CI never silently loses these tests.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from tests.conftest import IN_CI
from tests.support.redis_sentinel import RedisSentinelProcesses, SentinelModeUnsupported


def _start(data_dir: Path, *, via_proxy: bool) -> RedisSentinelProcesses:
    try:
        return RedisSentinelProcesses(data_dir, via_proxy=via_proxy).start()
    except SentinelModeUnsupported as exc:
        if IN_CI:
            pytest.fail(f"Redis Sentinel tests need a server with sentinel mode in CI: {exc}")
        pytest.skip(str(exc))


@pytest.fixture
def redis_sentinel(tmp_path: Path) -> Iterator[RedisSentinelProcesses]:
    deployment = _start(tmp_path / "sentinel", via_proxy=False)
    yield deployment
    deployment.stop()


@pytest.fixture
def redis_sentinel_proxied(tmp_path: Path) -> Iterator[RedisSentinelProcesses]:
    """The first primary is reached by everyone through a loopback proxy."""
    deployment = _start(tmp_path / "sentinel", via_proxy=True)
    yield deployment
    deployment.stop()


@pytest.fixture
def sentinel_faults(
    tmp_path: Path, redis_url: str, request: pytest.FixtureRequest
) -> Iterator[Callable[..., Any]]:
    """Makes :class:`~tests.sentinel.harness.SentinelFaults`: real workers and
    beats with the leases on a Sentinel deployment and the Celery broker on a
    single server. Ask for the deployment fixture before this one, so that the
    processes stop while their Redis still answers (a beat's shutdown talks to it)."""
    from tests.sentinel.harness import SentinelFaults

    made: list[SentinelFaults] = []

    def make(deployment: RedisSentinelProcesses, schedules: list[str], **env: str) -> Any:
        faults = SentinelFaults(tmp_path, deployment, redis_url, schedules, **env)
        made.append(faults)
        return faults

    yield make
    rep = getattr(request.node, "rep_call", None)
    for faults in made:
        faults.tear_down(rep is not None and rep.failed)
