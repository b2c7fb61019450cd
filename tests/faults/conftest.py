from __future__ import annotations

from collections.abc import Callable, Iterator
from pathlib import Path

import pytest
import redis

from tests.faults.cluster import FaultCluster
from tests.faults.proxy import TcpProxy


@pytest.fixture
def fault_cluster(
    tmp_path: Path, redis_url: str, request: pytest.FixtureRequest
) -> Iterator[Callable[..., FaultCluster]]:
    made: list[FaultCluster] = []

    def make(schedules: list[str], redis_url: str = redis_url, **env: str) -> FaultCluster:
        cluster = FaultCluster(tmp_path, redis_url, schedules, **env)
        made.append(cluster)
        return cluster

    yield make
    rep = getattr(request.node, "rep_call", None)
    for cluster in made:
        cluster.tear_down(rep is not None and rep.failed)


@pytest.fixture
def proxy(redis_url: str) -> Iterator[TcpProxy]:
    """A TCP proxy in front of the session's Redis server (``proxy.url()``)."""
    kwargs = redis.Redis.from_url(redis_url).connection_pool.connection_kwargs
    p = TcpProxy(kwargs["host"], kwargs["port"])
    yield p
    p.close()
