"""The plain Celery project the countdown benchmark's workers run (no celery-dgs).

Configured from the environment by ``benchmarks.deferred_vs_countdown``:

- ``DGS_BENCH_BROKER``: the Redis broker URL (executions are recorded there too);
- ``DGS_BENCH_TRANSPORT_OPTIONS``: JSON of ``broker_transport_options`` (e.g.
  ``{"visibility_timeout": 4, "unacked_restore_interval": 1}``); empty: kombu's
  defaults.

``dgs_bench.noop`` does nothing. ``dgs_bench.record(key)`` adds one to the field
of its own task id in the Redis hash ``key`` and appends the worker's name to the
list ``key:<task id>``: every execution of every copy of a message is counted.
"""

from __future__ import annotations

import os
from typing import Any

from celery import Celery, Task

from benchmarks.bench_app_conf import broker_redis, celery_conf

app = Celery("dgs_bench", broker=os.environ["DGS_BENCH_BROKER"])
app.conf.update(celery_conf())


@app.task(name="dgs_bench.noop")
def noop() -> None:
    return None


@app.task(name="dgs_bench.record", bind=True)
def record(self: Task[Any, Any], key: str) -> None:
    task_id = self.request.id
    pipe = broker_redis().pipeline()
    pipe.hincrby(key, task_id, 1)
    pipe.rpush(f"{key}:{task_id}", self.request.hostname or "?")
    pipe.execute()
