from __future__ import annotations

from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from tests.faults.cluster import FaultCluster


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
