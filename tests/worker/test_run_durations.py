"""A run's stored duration, and the EWMA it feeds, come from the worker's
monotonic clock: a step of the wall clock (here the Redis server's, which dates
every run) between start and end changes neither. Real Redis server, real
SQLite store; the step is injected into the runtime's Redis clock. Also: a
run while Redis is down is logged in one line."""

from __future__ import annotations

import logging
import time
from datetime import timedelta

import pytest

from celery_dgs.core.spec import PeriodicSpec
from celery_dgs.embedded import RedisServerProcess
from celery_dgs.runtime import Runtime
from celery_dgs.worker.runs import supervised_run
from tests.worker.helpers import SPEC, Request, in_thread

RUN_S = 0.3


@pytest.fixture
def rt(patient_rt: Runtime) -> Runtime:
    """Not about fencing: the patient runtime."""
    return patient_rt


def run_with_clock_step(rt: Runtime, step: timedelta) -> float:
    """One successful run of RUN_S seconds; the Redis clock steps by ``step``
    while the body runs. Returns the run's real length (the test's monotonic)."""
    real_now = rt.leases.now

    def body() -> None:
        rt.leases.now = lambda: real_now() + step  # type: ignore[method-assign]
        time.sleep(RUN_S)

    began = time.monotonic()
    box = in_thread(lambda: supervised_run(rt, SPEC, Request(), body, (), {}))
    took = time.monotonic() - began
    assert "raised" not in box, box.get("raised")
    return took


def check_duration(rt: Runtime, took: float) -> None:
    (run,) = rt.store.runs(SPEC.name)
    assert run.outcome == "success"
    assert run.duration_s is not None
    assert RUN_S <= run.duration_s <= took, run
    average = rt.store.get(SPEC.name).stats.average_good_duration
    assert average == timedelta(seconds=run.duration_s)
    assert run.ended_at is not None
    assert run.ended_at >= run.started_at


def test_a_forward_step_does_not_lengthen_the_stored_duration(rt: Runtime) -> None:
    took = run_with_clock_step(rt, timedelta(seconds=3.5))
    check_duration(rt, took)
    (run,) = rt.store.runs(SPEC.name)
    assert run.ended_at is not None
    assert run.ended_at - run.started_at > timedelta(seconds=3.5)  # the stamp is kept


def test_a_backward_step_neither_zeroes_the_duration_nor_ends_before_the_start(
    rt: Runtime,
) -> None:
    took = run_with_clock_step(rt, timedelta(seconds=-10))
    check_duration(rt, took)


def test_the_store_takes_a_measured_duration(rt: Runtime) -> None:
    spec = PeriodicSpec(task="m", scheduling_period=timedelta(hours=1))
    start = rt.leases.now()
    rt.store.insert_if_missing(spec, start)
    rt.store.record_run_start(
        schedule=spec.name,
        run_id="r1",
        dispatch_id=None,
        owner_node="n",
        owner_name="w@n",
        owner_tag="r1",
        token=1,
        started_at=start,
    )
    rt.store.record_run_end(
        run_id="r1", outcome="success", ended_at=start + timedelta(seconds=13.5), duration_s=10.0
    )
    (run,) = rt.store.runs(spec.name)
    assert run.duration_s == 10.0
    assert rt.store.get(spec.name).stats.average_good_duration == timedelta(seconds=10)
    with pytest.raises(ValueError, match="duration_s"):
        rt.store.record_run_end(
            run_id="r1", outcome="success", ended_at=start, duration_s=float("nan")
        )


def test_a_run_while_redis_is_down_logs_one_line_without_a_traceback(
    fresh_redis_server: RedisServerProcess,
    fresh_rt: Runtime,
    caplog: pytest.LogCaptureFixture,
) -> None:
    """Every dispatch a worker receives while Redis is down is skipped: each
    says why in one line, not a traceback per run."""
    fresh_redis_server.stop()
    caplog.set_level(logging.INFO, logger="celery_dgs")
    box = in_thread(lambda: supervised_run(fresh_rt, SPEC, Request(), lambda: 1, (), {}))
    assert box.get("value") is None
    (failed,) = [
        r
        for r in caplog.records
        if "acquiring the lease" in r.getMessage() and r.levelno == logging.ERROR
    ]
    assert failed.exc_info is None
    assert "ConnectionError" in failed.getMessage()
    assert all(r.exc_info is None for r in caplog.records), [
        r.getMessage() for r in caplog.records if r.exc_info
    ]
