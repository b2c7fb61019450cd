"""``celery_dgs.report_items`` inside a supervised run (real Redis-compatible
server, real SQLite store): the threshold decides the outcome, the run record
keeps the counts, and bad input never fails the task or loses its record."""

from __future__ import annotations

import dataclasses
import logging
from collections.abc import Callable
from typing import Any

import pytest

import celery_dgs
from celery_dgs.core.items import PARTIAL_FAILURE, ItemCounts
from celery_dgs.core.spec import PeriodicSpec
from celery_dgs.runtime import Runtime
from celery_dgs.worker.runs import supervised_run
from tests.worker.helpers import SPEC, Request, in_thread, only_run


@pytest.fixture
def rt(patient_rt: Runtime) -> Runtime:
    """Not about fencing: the patient runtime."""
    return patient_rt


def run(rt: Runtime, body: Callable[[], Any], spec: PeriodicSpec = SPEC) -> dict[str, Any]:
    return in_thread(lambda: supervised_run(rt, spec, Request(), body, (), {}))


def reporting(ok: Any, failed: Any, result: Any = "done") -> Callable[[], Any]:
    def body() -> Any:
        celery_dgs.report_items(ok=ok, failed=failed)
        return result

    return body


def test_below_the_default_threshold_the_run_is_good_with_its_counts(rt: Runtime) -> None:
    assert run(rt, reporting(6, 4)).get("value") == "done"  # 40 % <= 0.5
    record = only_run(rt)
    assert (record.outcome, record.items) == ("success", ItemCounts(6, 4))
    stats = rt.store.get(SPEC.name).stats
    assert stats.failure_count == 0
    assert stats.last_items == ItemCounts(6, 4)


def test_above_the_schedules_threshold_the_run_is_a_partial_failure(rt: Runtime) -> None:
    strict = dataclasses.replace(SPEC, partial_failure_threshold=0.2)
    # The task's own result reaches Celery unchanged: only the run record says it failed.
    assert run(rt, reporting(7, 3), strict).get("value") == "done"
    record = only_run(rt)
    assert record.outcome == PARTIAL_FAILURE
    assert record.items == ItemCounts(7, 3)
    assert record.error is not None
    assert "3 of 10 items failed" in record.error
    assert rt.store.get(SPEC.name).stats.failure_count == 1


def test_the_last_report_counts(rt: Runtime) -> None:
    def body() -> None:
        celery_dgs.report_items(ok=1, failed=9)
        celery_dgs.report_items(ok=10, failed=0)

    run(rt, body)
    assert (only_run(rt).outcome, only_run(rt).items) == ("success", ItemCounts(10, 0))


def test_a_run_that_raises_keeps_its_outcome_and_its_counts(rt: Runtime) -> None:
    def body() -> None:
        celery_dgs.report_items(ok=0, failed=10)
        raise RuntimeError("upstream down")

    assert isinstance(run(rt, body).get("raised"), RuntimeError)
    record = only_run(rt)
    assert (record.outcome, record.items) == ("failure", ItemCounts(0, 10))
    assert record.error is not None
    assert "upstream down" in record.error


@pytest.mark.parametrize(
    ("ok", "failed", "field"),
    [(-1, 2, "ok must be zero or more"), (3, 1.5, "failed must be a whole number")],
)
def test_bad_counts_are_logged_with_the_schedule_and_the_field(
    rt: Runtime, caplog: pytest.LogCaptureFixture, ok: Any, failed: Any, field: str
) -> None:
    answers: list[bool] = []

    def body() -> str:
        answers.append(celery_dgs.report_items(ok=ok, failed=failed))
        return "done"

    with caplog.at_level(logging.ERROR, logger="celery_dgs.worker"):
        assert run(rt, body).get("value") == "done"
    assert answers == [False]
    assert f"report_items of schedule {SPEC.name} ignored: {field}" in caplog.text
    record = only_run(rt)  # the run record is kept, without counts
    assert (record.outcome, record.items) == ("success", None)


def test_outside_a_run_the_call_is_ignored_with_a_warning(
    caplog: pytest.LogCaptureFixture,
) -> None:
    with caplog.at_level(logging.WARNING, logger="celery_dgs.worker"):
        assert celery_dgs.report_items(ok=1, failed=0) is False
    assert "not inside a run of a schedule" in caplog.text


def test_the_setting_is_the_threshold_of_a_schedule_without_one(rt: Runtime) -> None:
    rt.settings = dataclasses.replace(rt.settings, partial_failure_threshold=0.05)
    run(rt, reporting(9, 1))
    assert only_run(rt).outcome == PARTIAL_FAILURE
    assert rt.store.get(SPEC.name).stats.last_items == ItemCounts(9, 1)
    assert SPEC.partial_failure_threshold is None
