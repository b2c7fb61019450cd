"""A real Redis Cluster (three primaries on loopback) for the tests of
``dgs_redis_cluster``. It skips locally when the server binary has no cluster
mode, and fails under CI (``CI=true``), so CI never silently loses these tests.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
import redis

from tests.conftest import IN_CI
from tests.support.redis_cluster import ClusterModeUnsupported, RedisClusterProcesses


@pytest.fixture(scope="session")
def redis_cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[RedisClusterProcesses]:
    try:
        cluster = RedisClusterProcesses(tmp_path_factory.mktemp("redis-cluster")).start()
    except ClusterModeUnsupported as exc:
        if IN_CI:
            pytest.fail(f"Redis Cluster tests need a server with cluster mode in CI: {exc}")
        pytest.skip(str(exc))
    yield cluster
    cluster.stop()


@pytest.fixture
def cluster_url(redis_cluster: RedisClusterProcesses) -> str:
    """A node URL of the cluster, every primary emptied before the test."""
    for node in redis_cluster.nodes:
        client = redis.Redis.from_url(node.url)
        client.flushall()
        client.close()
    return redis_cluster.url


@pytest.fixture
def cluster_faults(
    tmp_path: Path, cluster_url: str, redis_url: str, request: pytest.FixtureRequest
) -> Iterator[Callable[..., Any]]:
    """Makes :class:`~tests.cluster.harness.ClusterFaults`: real workers and beats
    with the leases on the cluster and the Celery broker on a single server."""
    from tests.cluster.harness import ClusterFaults

    made: list[ClusterFaults] = []

    def make(schedules: list[str], **env: str) -> ClusterFaults:
        faults = ClusterFaults(tmp_path, cluster_url, redis_url, schedules, **env)
        made.append(faults)
        return faults

    yield make
    rep = getattr(request.node, "rep_call", None)
    for faults in made:
        faults.tear_down(rep is not None and rep.failed)
