"""The celery-dgs project the deferred-check side of ``benchmarks.deferred_vs_countdown``
runs in its ``celery worker`` and ``celery beat -S celery_dgs:DeadlineScheduler`` processes.

Configured from the environment:

- ``DGS_BENCH_BROKER``: the Redis broker URL (celery-dgs's leases and registry,
  and the executions, are kept there too);
- ``DGS_BENCH_DATABASE_URL``: the store (``dgs_database_url``);
- ``DGS_BENCH_TRANSPORT_OPTIONS``: JSON of ``broker_transport_options``, as in
  ``benchmarks/countdown_app.py``; empty: kombu's defaults.

celery-dgs's settings are its defaults, except ``dgs_store_poll_interval``
(:data:`DGS_STORE_POLL_INTERVAL_S`).

The benchmark process imports this module for :data:`CHECK_TASK` and
``dgs.check_templates`` (to add checks with the same declaration); it reads
the environment only when a worker or beat uses the app.

``dgs_bench.check(counter, key)`` is a deferred check that adds one to the
field ``key`` of the Redis hash ``counter``, appends the worker's name to the
list ``counter:<key>`` and returns ``None`` (done): every execution of every
check is counted, as ``dgs_bench.record`` counts a countdown task's.
"""

from __future__ import annotations

import os
from datetime import timedelta
from typing import Any

from celery import Celery, Task

import celery_dgs
from benchmarks.bench_app_conf import broker_redis, celery_conf

CHECK_TASK = "dgs_bench.check"
DGS_STORE_POLL_INTERVAL_S = 0.5

app = Celery("dgs_bench", broker=os.environ.get("DGS_BENCH_BROKER"))
app.conf.update(
    **celery_conf(),
    worker_prefetch_multiplier=1,  # as celery-dgs asks of its workers
    dgs_database_url=os.environ.get("DGS_BENCH_DATABASE_URL"),
    dgs_key_prefix="dgs-bench",
    # Beat hands a freed slot its next check at its next tick, at most this often
    # (2 s by default): the duplicate rounds' hundreds of checks due at once pass
    # through the worker's 2 slots in about a minute instead of several.
    dgs_store_poll_interval=DGS_STORE_POLL_INTERVAL_S,
)
dgs = celery_dgs.DGS(app)


@dgs.deferred(within=timedelta(seconds=30))
@app.task(name=CHECK_TASK, bind=True)
def check(self: Task[Any, Any], counter: str, key: str) -> None:
    pipe = broker_redis().pipeline()
    pipe.hincrby(counter, key, 1)
    pipe.rpush(f"{counter}:{key}", self.request.hostname or "?")
    pipe.execute()
    return None
