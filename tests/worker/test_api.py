"""Task-facing API: bookkeeping never fails the task."""

from __future__ import annotations

import time
from collections.abc import Callable

import pytest

import celery_dgs
from celery_dgs.worker import supervisor as supervisor_module
from celery_dgs.worker.supervisor import RunSupervisor
from tests.worker.helpers import supervisor


def _supervisor() -> RunSupervisor:
    return supervisor(ping_interval=60, termination_grace=1, token=7)


def test_outside_a_run_progress_and_token_are_inert() -> None:
    assert celery_dgs.progress(0.5) is False
    assert celery_dgs.current_token() is None


def test_progress_is_clamped_and_bad_values_ignored() -> None:
    sup = _supervisor()
    sup.start()
    try:
        assert celery_dgs.current_token() == 7
        assert celery_dgs.progress(0.25) is True
        assert sup.progress == 0.25
        assert celery_dgs.progress(1.0000001) is True
        assert sup.progress == 1.0
        assert celery_dgs.progress(-3) is True
        assert sup.progress == 0.0
        assert celery_dgs.progress(float("nan")) is False
        assert celery_dgs.progress("lots") is False  # type: ignore[arg-type]
        assert sup.progress == 0.0
    finally:
        sup.finish()


def test_eventful_is_recorded_on_the_run_and_bad_values_ignored() -> None:
    assert celery_dgs.eventful(True) is False  # outside a run: inert
    sup = _supervisor()
    sup.start()
    try:
        assert sup.eventful is None  # a run that says nothing
        assert celery_dgs.eventful() is True
        assert sup.eventful is True
        assert celery_dgs.eventful(False) is True
        assert sup.eventful is False  # the last call counts
        assert celery_dgs.eventful("yes") is False
        assert sup.eventful is False
    finally:
        sup.finish()


def test_a_changed_progress_is_sent_at_once_then_at_most_every_gap(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """The pings every ping_interval (60 s here) would show a run's progress
    only after a minute: a changed one is sent with a ping of its own at
    once, then at most every PROGRESS_PING_GAP_S; an unchanged one sends none."""
    monkeypatch.setattr(supervisor_module, "PROGRESS_PING_GAP_S", 0.5)
    sent: list[tuple[float, float | None]] = []

    def ping(progress: float | None) -> str:
        sent.append((time.monotonic(), progress))
        return "OK"

    sup = supervisor(ping_interval=60, termination_grace=1, token=7, ping=ping)
    sup.start()
    try:
        started = time.monotonic()
        assert celery_dgs.progress(0.1) is True
        wait_for(lambda: len(sent) == 1, "the first progress sent")
        assert sent[0][1] == 0.1
        assert sent[0][0] - started < 0.4, "at once"
        for step in range(2, 9):  # a loop reporting every 20 ms
            celery_dgs.progress(step / 10)
            time.sleep(0.02)
        wait_for(lambda: len(sent) == 2, "the latest progress sent after the gap")
        assert sent[1][1] == 0.8
        assert sent[1][0] - sent[0][0] >= 0.5
        celery_dgs.progress(0.8)  # unchanged
        time.sleep(0.8)
        assert len(sent) == 2, "no ping for an unchanged progress"
    finally:
        sup.finish()


def wait_for(condition: Callable[[], bool], what: str, timeout: float = 5.0) -> None:
    deadline = time.monotonic() + timeout
    while not condition():
        assert time.monotonic() < deadline, f"timed out waiting for {what}"
        time.sleep(0.01)
