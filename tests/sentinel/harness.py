"""``SentinelFaults``: the fault tests' real worker and beat processes
(``tests.faults.proj``) with celery-dgs's Redis behind Redis Sentinel (a
``sentinel://`` dgs_redis_url and dgs_redis_master_name) and the Celery broker
on a single server. The test's own view of leases, registry and beat leader
goes through the sentinels too, so it follows fail-overs as the processes do."""

from __future__ import annotations

from pathlib import Path

from celery_dgs.connection import redis_from_url
from tests.faults.cluster import FaultCluster
from tests.support.redis_sentinel import MASTER_NAME, RedisSentinelProcesses


class SentinelFaults(FaultCluster):
    def __init__(
        self,
        tmp: Path,
        deployment: RedisSentinelProcesses,
        broker_url: str,
        schedules: list[str],
        **env: str,
    ) -> None:
        super().__init__(
            tmp,
            broker_url,
            schedules,
            E2E_DGS_REDIS_URL=deployment.url,
            E2E_REDIS_MASTER_NAME=MASTER_NAME,
            **env,
        )
        self.deployment = deployment
        self.broker = self.redis
        self.redis = redis_from_url(
            deployment.url,
            sentinel_master=MASTER_NAME,
            socket_timeout=2.0,
            socket_connect_timeout=2.0,
        )
