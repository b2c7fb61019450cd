"""What ``DeadlineScheduler`` logs when a tick or a publish fails: the delay it
names is the one it returns, and a lost connection (Redis, the database, the
broker) is one line with no traceback."""

from __future__ import annotations

import logging
import threading
import uuid
from typing import Any

import pytest
import redis
from celery import Celery, beat

from celery_dgs.beat.engine import DispatchOrder
from celery_dgs.beat.scheduler import TICK_ERROR_BACKOFF_S, DeadlineScheduler
from celery_dgs.dgs import DGS


class Failing:
    def __init__(self, error: Exception) -> None:
        self.error = error

    def tick(self) -> float:
        raise self.error


class Leadership:
    renew_interval = 0.7


def scheduler(error: Exception, *, leading: bool, max_interval: float = 300) -> Any:
    app = Celery("tick-errors", broker="redis://127.0.0.1:1/0", set_as_current=False)
    app.conf.dgs_database_url = "sqlite:///:memory:"
    DGS(app, install_worker_hooks=False)
    sched = DeadlineScheduler(app, lazy=True, max_interval=max_interval)
    sched.engine = Failing(error)
    sched.leadership = Leadership() if leading else None
    return sched


def messages(caplog: pytest.LogCaptureFixture) -> list[logging.LogRecord]:
    return [r for r in caplog.records if "beat tick failed" in r.getMessage()]


def test_the_retry_delay_logged_is_the_one_returned(caplog: pytest.LogCaptureFixture) -> None:
    # A leader renews every 0.7 s: it must come back within that, and say so.
    sched = scheduler(RuntimeError("a bug"), leading=True)
    assert sched.tick() == pytest.approx(0.7)
    (record,) = messages(caplog)
    assert record.getMessage().endswith("retrying in 0.7s")
    assert f"{TICK_ERROR_BACKOFF_S:.0f}s" not in record.getMessage()
    assert record.exc_info is not None  # an unexpected error keeps its traceback


def test_a_short_max_interval_bounds_the_delay_and_the_message(
    caplog: pytest.LogCaptureFixture,
) -> None:
    sched = scheduler(RuntimeError("a bug"), leading=False, max_interval=1)
    assert sched.tick() == 1.0
    (record,) = messages(caplog)
    assert record.getMessage().endswith("retrying in 1.0s")


def test_redis_gone_is_one_line_naming_it_without_a_traceback(
    caplog: pytest.LogCaptureFixture,
) -> None:
    error = redis.ConnectionError("Error 111 connecting to 127.0.0.1:1. Connection refused.")
    sched = scheduler(error, leading=False)
    assert sched.tick() == TICK_ERROR_BACKOFF_S
    (record,) = messages(caplog)
    text = record.getMessage()
    assert "Redis at redis://127.0.0.1:1/0 (broker_url) is unreachable" in text
    assert "Connection refused" in text
    assert text.endswith(f"retrying in {TICK_ERROR_BACKOFF_S:.1f}s")
    assert record.exc_info is None
    assert "\n" not in text


class ClosingUnderTheTick:
    """An engine whose tick is interrupted by the scheduler's close: Celery's
    SIGTERM handler closes the clients, and its SystemExit is lost (raised in
    a finalizer), so the tick goes on and fails on the closed clients."""

    def __init__(self) -> None:
        self.scheduler: Any = None
        self.ticks = 0

    def tick(self) -> float:
        self.ticks += 1
        self.scheduler.closed = True
        raise ValueError("I/O operation on closed file.")


def test_a_tick_under_the_close_fails_quietly_and_ends_the_loop(
    caplog: pytest.LogCaptureFixture,
) -> None:
    sched = scheduler(RuntimeError("unused"), leading=True)
    engine = ClosingUnderTheTick()
    engine.scheduler = sched
    sched.engine = engine
    with pytest.raises(SystemExit) as exited:
        sched.tick()
    assert exited.value.code == 0
    assert messages(caplog) == []
    with pytest.raises(SystemExit):
        sched.tick()
    assert engine.ticks == 1  # a tick after the close runs no engine tick


def test_celerys_beat_loop_ends_when_the_signals_exit_was_lost() -> None:
    """Celery's ``beat.Service`` loop, as ``celery beat`` runs it, with the
    scheduler closed by the SIGTERM handler whose ``SystemExit`` was lost:
    the loop ends at its next tick instead of ticking forever."""
    sched = scheduler(RuntimeError("unused"), leading=True)
    engine = ClosingUnderTheTick()
    engine.scheduler = sched
    sched.engine = engine
    service = beat.Service(sched.app, max_interval=1)
    service.__dict__["scheduler"] = sched  # Celery's cached property, set as it builds it
    ended = threading.Event()
    runner = threading.Thread(target=lambda: (service.start(), ended.set()), daemon=True)
    runner.start()
    assert ended.wait(5), "Celery's beat loop kept ticking after the close"
    assert engine.ticks == 1
    sched.app.close()


def order(schedule: str) -> DispatchOrder:
    return DispatchOrder(
        schedule=schedule,
        task="t.x",
        args=(),
        kwargs={},
        dispatch_id=uuid.uuid4().hex,
        worker="celery@w1",
        queue=None,
        expires_s=60,
        should_start_by=0.0,
    )


def test_an_unreachable_broker_is_one_line_and_every_order_comes_back(
    caplog: pytest.LogCaptureFixture,
) -> None:
    """Nothing listens on the broker's port: the first order fails after kombu's
    own retries, the others are not tried (each would wait the same), and the
    log says so once, without a traceback."""
    sched = scheduler(RuntimeError("unused"), leading=False)
    orders = [order(f"s{i}") for i in range(5)]
    caplog.set_level(logging.INFO, logger="celery_dgs")
    try:
        assert sched.publish(orders) == orders
    finally:
        sched.app.close()
    records = [r for r in caplog.records if r.name.startswith("celery_dgs")]
    assert len(records) == 1, [r.getMessage() for r in records]
    (record,) = records
    assert record.exc_info is None
    assert "the broker at redis://127.0.0.1:1/0 is unreachable" in record.getMessage()
    assert "5 dispatch(es) not published" in record.getMessage()
