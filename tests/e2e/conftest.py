from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.e2e.harness import Cluster


@pytest.fixture
def cluster_factory(
    tmp_path: Path, redis_url: str, request: pytest.FixtureRequest
) -> Iterator[type[Cluster]]:
    made: list[Cluster] = []

    def make(schedules: list[str], **env: str) -> Cluster:
        cluster = Cluster(tmp_path, redis_url, schedules, **env)
        made.append(cluster)
        return cluster

    yield make  # type: ignore[misc]
    for cluster in made:
        cluster.stop_all()
        rep = getattr(request.node, "rep_call", None)
        if rep is not None and rep.failed:
            print(cluster.logs())
