"""``retry()`` inside a supervised run publishes nothing and raises the
exception it retries after (its ``exc``, else the one being handled), as
Celery's own ``retry()`` does once ``max_retries`` is reached; with none,
``RetryRefused``. Outside a run it is Celery's own. End to end (no broker
message, the recorded error): tests/e2e/test_fencing_e2e.py."""

from __future__ import annotations

import threading
from typing import Any

import pytest

from celery_dgs.errors import RetryRefused
from celery_dgs.worker import supervisor as supervisor_module
from celery_dgs.worker.retries import keep_retries_in_the_scheduler
from tests.worker.helpers import supervisor


class Task:
    """A task's ``retry`` as Celery binds it: records that it was called."""

    def __init__(self) -> None:
        self.celery_retries: list[dict[str, Any]] = []

    def retry(self, *args: Any, **kwargs: Any) -> None:
        self.celery_retries.append(kwargs)


@pytest.fixture
def in_a_run(monkeypatch: pytest.MonkeyPatch) -> None:
    sup = supervisor(ping_interval=1.0, termination_grace=1.0)  # never started
    monkeypatch.setitem(supervisor_module._live, threading.get_ident(), sup)


def test_retry_raises_the_exception_it_was_given(in_a_run: None) -> None:
    task = Task()
    keep_retries_in_the_scheduler(task)
    given = ValueError("upstream 503")
    with pytest.raises(ValueError, match="upstream 503") as raised:
        task.retry(exc=given, countdown=5)
    assert raised.value is given
    assert task.celery_retries == [], "no broker message"
    assert supervisor_module.current_supervisor().retry_refused  # type: ignore[union-attr]


def test_retry_in_an_except_block_raises_the_handled_exception(in_a_run: None) -> None:
    task = Task()
    keep_retries_in_the_scheduler(task)

    def handling() -> None:
        try:
            raise KeyError("missing")
        except KeyError:
            task.retry(countdown=5)

    with pytest.raises(KeyError):
        handling()


def test_retry_with_no_exception_is_refused(in_a_run: None) -> None:
    task = Task()
    keep_retries_in_the_scheduler(task)
    with pytest.raises(RetryRefused, match="called retry\\(\\): celery-dgs retries"):
        task.retry((), {}, None, countdown=1)


def test_outside_a_run_retry_is_celerys_own() -> None:
    task = Task()
    keep_retries_in_the_scheduler(task)
    task.retry(countdown=5)
    assert task.celery_retries == [{"countdown": 5}]
