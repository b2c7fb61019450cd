"""Pieces shared by the worker tests: the schedule they run, a Celery request
stand-in, a runtime on a real Redis-compatible server and SQLite file, a
supervisor with a stand-in ping, and a body run on a thread of the test (as in
a threads pool)."""

from __future__ import annotations

import threading
from datetime import datetime, timedelta, timezone
from pathlib import Path
from typing import Any

import pytest

from celery_dgs.core.spec import PeriodicSpec
from celery_dgs.runtime import Runtime
from celery_dgs.settings import DgsSettings
from celery_dgs.store.records import RunRecord
from celery_dgs.worker.supervisor import RunSupervisor

SPEC = PeriodicSpec(task="s", scheduling_period=timedelta(hours=1))


class Request:
    hostname = "celery@node-a"
    dgs_dispatch_id = None


def make_runtime(redis_url: str, db_path: Path, *, ping_timeout: float = 1.0) -> Runtime:
    """A runtime pinging every 0.2 s (fenced after 0.75 s without a good ping,
    with the default ``ping_timeout``) whose store holds :data:`SPEC`."""
    settings = DgsSettings.from_conf(
        {
            "dgs_redis_url": redis_url,
            "dgs_database_url": f"sqlite:///{db_path}",
            "dgs_ping_interval": 0.2,
            "dgs_ping_timeout": ping_timeout,
            "dgs_steal_delay": 1.0,
        }
    )
    if ping_timeout == 1.0:
        assert settings.fence_after == pytest.approx(0.75)
    rt = Runtime(settings)
    rt.store.insert_if_missing(SPEC, rt.leases.now())
    return rt


def only_run(rt: Runtime) -> RunRecord:
    (run,) = rt.store.runs(SPEC.name)
    return run


def in_thread(fn: Any) -> dict[str, Any]:
    """Call ``fn`` on a new thread: ``{"value": ...}`` or ``{"raised": ...}``."""
    box: dict[str, Any] = {}

    def target() -> None:
        try:
            box["value"] = fn()
        except BaseException as exc:
            box["raised"] = exc

    t = threading.Thread(target=target)
    t.start()
    t.join(timeout=30)
    assert not t.is_alive()
    return box


def supervisor(**fields: Any) -> RunSupervisor:
    """A supervisor of run ``r`` of :data:`SPEC` (token 1) on the wall clock,
    whose ping answers OK and whose unresponsive run is left alone; ``fields``
    replace any of these."""
    args: dict[str, Any] = {
        "schedule": "s",
        "run_id": "r",
        "spec": SPEC,
        "token": 1,
        "ping": lambda progress: "OK",
        "now": lambda: datetime.now(timezone.utc),
        "on_unresponsive": lambda stop: None,
        **fields,
    }
    return RunSupervisor(**args)
