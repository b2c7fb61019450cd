"""Item counts of runs (partial failures) in every store: the run record keeps
them, the schedule keeps those of its last good or partially failed run, and
both survive a reload (the loader's fast path included)."""

from __future__ import annotations

from datetime import timedelta

import pytest

from celery_dgs.core.condition import Reason, condition
from celery_dgs.core.items import PARTIAL_FAILURE, ItemCounts
from celery_dgs.store import ScheduleStore

from .conftest import T0, periodic, start

S = timedelta(seconds=1)


@pytest.fixture
def one(store: ScheduleStore) -> ScheduleStore:
    store.sync([periodic("a")], T0)
    return store


def loaded(store: ScheduleStore, name: str) -> object:
    [row] = [s for s in store.changes_since(0)[0] if s.name == name]
    return row.stats


def test_a_good_run_keeps_its_counts(one: ScheduleStore) -> None:
    start(one, "a", "r1", token=1, at=T0)
    got = one.record_run_end(
        run_id="r1", outcome="success", ended_at=T0 + 10 * S, items=ItemCounts(9, 1)
    )
    assert (got.stats.last_items_ok, got.stats.last_items_failed) == (9, 1)
    assert got.stats.failure_count == 0
    [run] = one.runs("a")
    assert (run.items_ok, run.items_failed, run.items) == (9, 1, ItemCounts(9, 1))
    assert one.get("a").stats == got.stats == loaded(one, "a")


def test_a_partial_failure_counts_as_a_failure(one: ScheduleStore) -> None:
    start(one, "a", "r1", token=1, at=T0)
    one.record_run_end(run_id="r1", outcome="success", ended_at=T0 + 10 * S)
    start(one, "a", "r2", token=2, at=T0 + 3600 * S)
    got = one.record_run_end(
        run_id="r2",
        outcome=PARTIAL_FAILURE,
        ended_at=T0 + 3610 * S,
        error="3 of 10 items failed",
        items=ItemCounts(7, 3),
    )
    assert got.stats.failure_count == 1
    assert got.stats.last_items == ItemCounts(7, 3)
    assert got.stats.last_good_start_at == T0
    newest = one.runs("a")[0]
    assert (newest.outcome, newest.items, newest.error) == (
        PARTIAL_FAILURE,
        ItemCounts(7, 3),
        "3 of 10 items failed",
    )
    assert one.outcome_counts()[PARTIAL_FAILURE] == 1
    assert loaded(one, "a") == got.stats
    spec = got.spec
    assert spec is not None
    cond = condition(spec, got.stats, None, T0 + 2 * 3600 * S)
    assert cond.reason is Reason.ITEMS_FAILED
    assert "3 of 10 items failed" in cond.message


def test_a_run_that_raised_keeps_its_counts_on_the_record_only(one: ScheduleStore) -> None:
    start(one, "a", "r1", token=1, at=T0)
    got = one.record_run_end(
        run_id="r1", outcome="failure", ended_at=T0 + S, error="boom", items=ItemCounts(2, 8)
    )
    assert got.stats.last_items is None
    assert got.stats.failure_count == 1
    assert one.runs("a")[0].items == ItemCounts(2, 8)


@pytest.mark.parametrize(
    ("items", "message"),
    [
        (ItemCounts(-1, 0), "ok must be zero or more"),
        (ItemCounts(1, 2.5), "failed must be a whole number"),  # type: ignore[arg-type]
        ((1, 2), "items must be ItemCounts"),
    ],
)
def test_bad_counts_are_refused_and_the_run_stays_open(
    one: ScheduleStore, items: object, message: str
) -> None:
    start(one, "a", "r1", token=1, at=T0)
    with pytest.raises(ValueError, match=message):
        one.record_run_end(run_id="r1", outcome="success", ended_at=T0 + S, items=items)  # type: ignore[arg-type]
    [run] = one.runs("a")
    assert run.outcome == "running"  # nothing written: the end can be recorded again
    one.record_run_end(run_id="r1", outcome="success", ended_at=T0 + S)
    assert one.runs("a")[0].outcome == "success"
