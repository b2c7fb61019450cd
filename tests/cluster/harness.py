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
            tmp, broker_url, schedules, E2E_DGS_REDIS_URL=cluster_url, E2E_REDIS_CLUSTER="1",
            **env,
        )  # fmt: skip
        self.broker = self.redis
        self.redis = redis_from_url(cluster_url, cluster=True)

    def worker_registered(self, hostname: str) -> bool:
        from celery_dgs.registry import WorkerRegistry

        registry = WorkerRegistry(self.redis, KEYS, ttl=3)
        return any(w.name == hostname for w in registry.live_workers())

    def beat_leader(self) -> Any:
        from celery_dgs.leases.leader import RedisLeader

        timeout = float(self.env.get("E2E_BEAT_LEADER_TIMEOUT", "2.0"))
        return RedisLeader(self.redis, KEYS, timeout=timeout).current()

    def leases(self) -> Any:
        from celery_dgs.leases.redis import RedisLeases

        return RedisLeases(
            self.redis, KEYS,
            ping_timeout=float(self.env.get("E2E_PING_TIMEOUT", "1.5")),
            steal_delay=float(self.env.get("E2E_STEAL_DELAY", "1.0")),
        )  # fmt: skip
