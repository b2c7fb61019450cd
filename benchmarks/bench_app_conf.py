"""What the two Celery projects of ``benchmarks.deferred_vs_countdown`` share, so
that they differ only in celery-dgs: their Celery settings and the Redis client
their tasks record executions with (both read the environment when called)."""

from __future__ import annotations

import functools
import json
import os
from typing import Any

import redis


def celery_conf() -> dict[str, Any]:
    """JSON only, no results, kombu's ``broker_transport_options`` from
    ``DGS_BENCH_TRANSPORT_OPTIONS`` (JSON; empty: kombu's defaults)."""
    return {
        "task_serializer": "json",
        "accept_content": ["json"],
        "result_backend": None,
        "task_ignore_result": True,
        "broker_connection_retry_on_startup": True,
        "worker_hijack_root_logger": False,
        "broker_transport_options": json.loads(
            os.environ.get("DGS_BENCH_TRANSPORT_OPTIONS") or "{}"
        ),
    }


@functools.cache
def broker_redis() -> redis.Redis:
    """A client of the broker (``DGS_BENCH_BROKER``), where executions are counted."""
    return redis.Redis.from_url(os.environ["DGS_BENCH_BROKER"])
