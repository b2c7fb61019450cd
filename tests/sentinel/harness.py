"""``SentinelFaults``: the fault tests' real worker and beat processes
(``tests.faults.proj``) with celery-dgs's Redis behind Redis Sentinel (a
``sentinel://`` dgs_redis_url and dgs_redis_master_name) and the Celery broker
on a single server. The test's own view of leases, registry and beat leader
goes through the sentinels too, so it follows fail-overs as the processes do."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from celery_dgs.connection import redis_from_url
from celery_dgs.keys import KeySpace
from tests.faults.cluster import FaultCluster
from tests.support.redis_sentinel import MASTER_NAME, RedisSentinelProcesses

KEYS = KeySpace("e2e")


class SentinelFaults(FaultCluster):
    def __init__(
        self, tmp: Path, deployment: RedisSentinelProcesses, broker_url: str,
        schedules: list[str], **env: str,
    ) -> None:  # fmt: skip
        super().__init__(
            tmp, broker_url, schedules, E2E_DGS_REDIS_URL=deployment.url,
            E2E_REDIS_MASTER_NAME=MASTER_NAME, **env,
        )  # fmt: skip
        self.deployment = deployment
        self.broker = self.redis
        self.redis = redis_from_url(
            deployment.url, sentinel_master=MASTER_NAME, socket_timeout=2.0,
            socket_connect_timeout=2.0,
        )  # fmt: skip

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
