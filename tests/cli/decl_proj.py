"""A project for ``celery -A tests.cli.decl_proj ...`` subprocesses (``dgs``
commands, a worker, beat): one task, ``decl.a``, declared in ``dgs_schedules``
with the period in ``DECL_PERIOD`` (seconds; ``0`` is an invalid declaration),
and ``decl.check``, a deferred check within ``DECL_CHECK_WITHIN`` (seconds,
60 by default; ``0`` is invalid), on the Redis and SQLite store named by the
environment."""

from __future__ import annotations

import os

from celery import Celery

import celery_dgs

app = Celery("decl", broker=os.environ["DECL_REDIS_URL"])
app.conf.update(
    task_serializer="json",
    accept_content=["json"],
    result_backend=None,
    worker_hijack_root_logger=False,
    broker_connection_retry_on_startup=True,
    worker_prefetch_multiplier=1,
    beat_max_loop_interval=1,
    dgs_database_url=os.environ["DECL_DATABASE_URL"],
    dgs_key_prefix=os.environ["DECL_PREFIX"],
    dgs_store_poll_interval=0.2,
    dgs_schedules={"decl.a": {"period": float(os.environ["DECL_PERIOD"])}},
    dgs_web_token=os.environ.get("DECL_WEB_TOKEN"),
)
dgs = celery_dgs.DGS(app)


@app.task(name="decl.a")
def a() -> str:
    return "done"


@dgs.deferred(within=float(os.environ.get("DECL_CHECK_WITHIN", "60")))
@app.task(name="decl.check")
def check(order: str) -> None:
    return None
