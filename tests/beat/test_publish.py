"""DeadlineScheduler.publish (a ``CeleryPublisher``) on a real broker: messages
reach each worker's own queue, and the worker's kombu Queue is built once
(bounded cache)."""

from __future__ import annotations

import time
import uuid
from collections.abc import Iterator
from typing import Any

import pytest
import redis
from celery import Celery

from celery_dgs.beat import publishing as publishing_module
from celery_dgs.beat.engine import DispatchOrder
from celery_dgs.beat.scheduler import DeadlineScheduler
from celery_dgs.dgs import DGS


@pytest.fixture
def app(redis_url: str) -> Iterator[Celery]:
    app = Celery("publish-test", broker=redis_url, set_as_current=False)
    app.conf.dgs_redis_url = redis_url
    app.conf.dgs_key_prefix = f"pub{uuid.uuid4().hex[:6]}"
    DGS(app, install_worker_hooks=False)
    yield app
    app.close()


def order(worker: str) -> DispatchOrder:
    dispatch_id = uuid.uuid4().hex
    return DispatchOrder(
        schedule=f"s-{dispatch_id}",
        task="t.x",
        args=(),
        kwargs={},
        dispatch_id=dispatch_id,
        worker=worker,
        queue=None,
        expires_s=60,
        should_start_by=0.0,
    )


def test_messages_reach_each_worker_queue_and_queues_are_built_once(
    app: Celery, redis_url: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    tag = uuid.uuid4().hex[:6]
    workers = [f"celery@{tag}-{i}" for i in range(3)]
    built: list[str] = []
    real = publishing_module.worker_direct

    def counting(name: str) -> object:
        built.append(name)
        return real(name)

    monkeypatch.setattr(publishing_module, "worker_direct", counting)
    monkeypatch.setattr(publishing_module, "DIRECT_QUEUE_CACHE_SIZE", 2)
    sched = DeadlineScheduler(app, lazy=True)  # its cache is sized when it is built
    assert sched.publish([order(workers[0]), order(workers[1]), order(workers[0])]) == []
    assert built == workers[:2]
    assert sched.publish([order(workers[1]), order(workers[2])]) == []  # w0 is dropped
    assert built == workers
    assert sched.publish([order(workers[0])]) == []
    assert built == [*workers, workers[0]]
    probe = redis.Redis.from_url(redis_url)
    try:
        assert [probe.llen(f"{w}.dq2") for w in workers] == [3, 2, 1]
    finally:
        probe.delete(*(f"{w}.dq2" for w in workers))
        probe.close()


def test_broker_down_fails_every_order_without_raising_and_recovers(
    fresh_redis_server: Any, caplog: pytest.LogCaptureFixture
) -> None:
    """The engine takes back and re-indexes the failed orders (test_engine_errors.py)."""
    url = fresh_redis_server.url
    app = Celery("publish-down", broker=url, set_as_current=False)
    app.conf.dgs_redis_url = url
    app.conf.dgs_key_prefix = f"pub{uuid.uuid4().hex[:6]}"
    app.conf.task_publish_retry_policy = {
        "max_retries": 1,
        "interval_start": 0,
        "interval_step": 0.1,
        "interval_max": 0.1,
    }
    app.conf.broker_connection_timeout = 1
    DGS(app, install_worker_hooks=False)
    sched = DeadlineScheduler(app, lazy=True)
    try:
        fresh_redis_server.stop(kill=True)
        orders = [order("celery@down-0"), order("celery@down-1")]
        started = time.monotonic()
        failed = sched.publish(orders)
        assert [o.dispatch_id for o in failed] == [o.dispatch_id for o in orders]
        assert time.monotonic() - started < 30
        assert "celery-dgs: " in caplog.text
        fresh_redis_server.start()
        assert sched.publish([order("celery@down-0")]) == []
    finally:
        app.close()


def test_the_direct_queue_cache_keeps_1024_workers(app: Celery) -> None:
    sched = DeadlineScheduler(app, lazy=True)
    assert sched.publish.direct_queue.cache_info().maxsize == 1024  # type: ignore[attr-defined]


def test_orders_sent_before_the_broker_went_away_are_not_reported_failed(
    app: Celery, redis_url: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The broker becomes unreachable after the first message: that message is
    in its queue, so only the orders after it come back as failed (a failed
    order's dispatch record is taken back and the schedule re-dispatched)."""
    from kombu.exceptions import OperationalError

    real_send, calls = app.send_task, []

    def send_then_fail(*args: Any, **kwargs: Any) -> Any:
        calls.append(kwargs["task_id"])
        if len(calls) > 1:
            raise OperationalError("Error 111 connecting: Connection refused")
        return real_send(*args, **kwargs)

    monkeypatch.setattr(app, "send_task", send_then_fail)
    worker = f"celery@gone-{uuid.uuid4().hex[:6]}"
    orders = [order(worker), order(worker), order(worker)]
    failed = DeadlineScheduler(app, lazy=True).publish(orders)
    assert [o.dispatch_id for o in failed] == [o.dispatch_id for o in orders[1:]]
    probe = redis.Redis.from_url(redis_url)
    try:
        assert probe.llen(f"{worker}.dq2") == 1
    finally:
        probe.delete(f"{worker}.dq2")
        probe.close()
