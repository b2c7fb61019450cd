"""A project for ``celery -A tests.cli.decl_proj dgs ...`` subprocesses: one
task, ``decl.a``, declared in ``dgs_schedules`` with the period in
``DECL_PERIOD`` (seconds), on the Redis and SQLite store named by the
environment."""

from __future__ import annotations

import os

from celery import Celery

import celery_dgs

app = Celery("decl", broker=os.environ["DECL_REDIS_URL"])
app.conf.update(
    dgs_database_url=os.environ["DECL_DATABASE_URL"],
    dgs_key_prefix=os.environ["DECL_PREFIX"],
    dgs_schedules={"decl.a": {"period": float(os.environ["DECL_PERIOD"])}},
)
celery_dgs.DGS(app)


@app.task(name="decl.a")
def a() -> None:
    """Never run here: the tests only sync and read status."""
