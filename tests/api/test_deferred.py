"""The deferred-check API: @dgs.deferred declares a check task (its options
validated, naming the task and field), dgs.checks adds (keep or move), bulk
adds, cancels and reads checks, and bad input names the check and field."""

from __future__ import annotations

from datetime import datetime, timedelta, timezone
from typing import Any

import pytest
from celery import Celery

from celery_dgs import DGS
from celery_dgs.core.clock import FakeClock
from celery_dgs.deferred import DeferredChecks
from celery_dgs.errors import ScheduleConfigError
from celery_dgs.store import MemoryScheduleStore

NOW = datetime(2026, 5, 1, 10, 5, tzinfo=timezone.utc)


def _noop(*args: Any, **kwargs: Any) -> None:
    return None


@pytest.fixture
def dgs(memory_app: Celery) -> DGS:
    dgs = DGS(memory_app, install_worker_hooks=False)
    dgs.deferred(within=60, slot=timedelta(minutes=15), max_checks=3)(
        memory_app.task(name="shop.check_order", shared=False)(_noop)
    )
    dgs.deferred(on_exists="move")(memory_app.task(name="mail.remind", shared=False)(_noop))
    return dgs


def api(dgs: DGS) -> tuple[DeferredChecks, MemoryScheduleStore]:
    store = MemoryScheduleStore()
    return DeferredChecks(
        store, dgs.check_templates, clock=FakeClock(NOW), on_exists=dgs.check_on_exists
    ), store


def test_check_at_rounds_to_the_slot_and_keeps_by_default(dgs: DGS) -> None:
    checks, store = api(dgs)
    assert (
        checks.at("shop.check_order", 42, after=timedelta(hours=3), kwargs={"order": 42}) == "added"
    )
    row = store.get("shop.check_order@check:42")
    assert row.stats.next_target_at == NOW.replace(hour=13, minute=15)  # 13:05 -> 13:15
    assert row.spec is not None
    assert row.spec.kwargs == {"order": 42}
    assert row.spec.priority == 50
    assert checks.at("shop.check_order", "42", after=60) == "kept"
    assert checks.at("shop.check_order", "42", after=60, on_exists="move") == "moved"
    assert checks.at("mail.remind", "u1", at=NOW + timedelta(days=1)) == "added"
    assert checks.at("mail.remind", "u1", at=NOW + timedelta(days=2)) == "moved"  # its default


def test_bulk_add_and_cancel(dgs: DGS) -> None:
    checks, store = api(dgs)
    report = checks.at_many(
        {"task": "shop.check_order", "key": f"o{i}", "after": 10} for i in range(100)
    )
    assert len(report.added) == 100
    assert store.check_summary(NOW).pending == {"shop.check_order": 100}
    assert checks.cancel("shop.check_order", "o7") is True
    assert checks.cancel("shop.check_order", "o7") is False
    [record] = checks.history("shop.check_order", "o7")
    assert record.outcome == "cancelled"


@pytest.mark.parametrize(
    ("call", "field"),
    [
        ({"task": "shop.unknown", "key": "1", "after": 1}, "task"),
        ({"task": "shop.check_order", "key": "", "after": 1}, "key"),
        ({"task": "shop.check_order", "key": "1", "at": datetime(2026, 5, 2)}, "at"),
        ({"task": "shop.check_order", "key": "1", "after": -5}, "after"),  # "got -5 s"
        ({"task": "shop.check_order", "key": "1", "after": float("nan")}, "after"),
        ({"task": "shop.check_order", "key": "1", "after": float("inf")}, "after"),
        ({"task": "shop.check_order", "key": "1", "after": "soon"}, "after"),
        ({"task": "shop.check_order", "key": "1", "afte": 5}, "afte"),
        ({"task": "shop.check_order", "key": "1", "after": 1, "at": NOW}, "at"),
        ({"task": "shop.check_order", "key": "1", "at": NOW + timedelta(days=31)}, "at"),
        ({"task": "shop.check_order", "key": "1", "after": 1, "kwargs": {"x": object()}}, "kwargs"),
        ({"task": "shop.check_order", "key": "1", "after": 1, "countdown": 5}, "countdown"),
    ],
)
def test_bad_input_names_the_check_and_field(dgs: DGS, call: dict[str, Any], field: str) -> None:
    checks, store = api(dgs)
    good = {"task": "shop.check_order", "key": "good", "after": 1}
    report = checks.at_many([call, good])
    [error] = report.errors
    assert (error.line, error.field) == (1, field), error
    assert "timedelta(" not in str(error), "durations are shown in seconds"
    if call.get("key") == "1" and call.get("task") == "shop.check_order":
        assert error.schedule == "shop.check_order@check:1", error
    assert [c.name for c in store.pending_checks()] == ["shop.check_order@check:good"]


def test_after_takes_seconds_a_timedelta_or_duration_text(dgs: DGS) -> None:
    checks, store = api(dgs)
    report = checks.at_many(
        {"task": "shop.check_order", "key": str(i), "after": after}
        for i, after in enumerate((90, 90.0, timedelta(seconds=90), "90s", "1m30s"))
    )
    assert report.errors == []
    assert len({c.stats.next_target_at for c in store.pending_checks()}) == 1
    [error] = checks.at_many([{"task": "shop.check_order", "key": "x", "afte": 5}]).errors
    assert error.message == "is not a field of a check; did you mean 'after'?"


@pytest.mark.parametrize(
    ("options", "field"),
    [
        ({"within": 0}, "within"),
        ({"max_checks": 0}, "max_checks"),
        ({"horizon": -1}, "horizon"),
        ({"on_exists": "replace"}, "on_exists"),
        ({"priority": 100}, "priority"),
        ({"slot": "15m"}, "slot"),
    ],
)
def test_bad_deferred_options_name_the_task_and_field(
    memory_app: Celery, options: dict[str, Any], field: str
) -> None:
    """Recorded, not raised: the task's module still imports."""
    dgs = DGS(memory_app, install_worker_hooks=False)
    task = memory_app.task(name="t.bad", shared=False)(_noop)
    assert dgs.deferred(**options)(task) is task
    err = dgs.check_template_errors["t.bad"]
    assert err.field == field
    assert err.schedule == "t.bad", "the task, not the template's name"
    assert "t.bad" not in dgs.check_templates
    with pytest.raises(ScheduleConfigError, match=r"its @dgs\.deferred declaration is invalid"):
        dgs.check_at("t.bad", "k", after=60)


def test_a_misspelt_deferred_keyword_is_the_declarations_error(memory_app: Celery) -> None:
    dgs = DGS(memory_app, install_worker_hooks=False)
    options: dict[str, Any] = {"withn": 60}
    dgs.deferred(**options)(memory_app.task(name="t.typo", shared=False)(_noop))
    err = dgs.check_template_errors["t.typo"]
    assert err.field == "withn"
    assert "is not an option of @dgs.deferred; did you mean 'within'?" in err.message
    dgs.deferred(within=60)(memory_app.task(name="t.typo", shared=False)(_noop))
    assert "t.typo" in dgs.check_templates, "fixed: declared"
    assert "t.typo" not in dgs.check_template_errors


def test_a_bad_on_exists_names_the_check(dgs: DGS) -> None:
    checks, _store = api(dgs)
    with pytest.raises(ScheduleConfigError) as bad:
        checks.at("shop.check_order", "o-1", after=60, on_exists="replace")
    assert bad.value.field == "on_exists"
    assert bad.value.schedule.startswith("shop.check_order@"), bad.value.schedule
    with pytest.raises(ScheduleConfigError, match="every item"):
        checks.at_many([], on_exists="replace")


def test_a_key_too_long_is_named_by_its_start(dgs: DGS) -> None:
    checks, _ = api(dgs)
    [error] = checks.at_many([{"task": "shop.check_order", "key": "k" * 5000, "after": 1}]).errors
    assert error.field == "key"
    assert error.schedule == "shop.check_order@check:" + "k" * 40 + "..."
    assert error.message == "must be at most 200 characters on one line, got 5000"
    assert len(str(error)) < 300
