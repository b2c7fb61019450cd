"""``ClusterFaults``: the fault tests' real worker and beat processes
(``tests.faults.proj``) with celery-dgs's Redis on a Redis Cluster
(``dgs_redis_cluster``, hash tag on) and the Celery broker on a single server
(kombu has no cluster transport). The test's own view of leases, registry and
beat leader reads the cluster too."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from celery_dgs.connection import redis_from_url
from celery_dgs.keys import KeySpace
from tests.faults.cluster import FaultCluster

#: The key space of ``tests.faults.proj`` with the hash tag: ``{e2e}:...``.
KEYS = KeySpace("e2e", hash_tag=True)


class ClusterFaults(FaultCluster):
    def __init__(
        self, tmp: Path, cluster_url: str, broker_url: str, schedules: list[str], **env: str
    ) -> None:
        super().__init__(
            tmp,
            broker_url,
            schedules,
            E2E_DGS_REDIS_URL=cluster_url,
            E2E_REDIS_CLUSTER="1",
            **env,
        )
        self.broker = self.redis
        self.redis = redis_from_url(cluster_url, cluster=True)

    def keyspace(self) -> Any:
        return KEYS
