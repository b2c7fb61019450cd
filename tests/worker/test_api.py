"""Task-facing API: bookkeeping never fails the task."""

from __future__ import annotations

import celery_dgs
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
