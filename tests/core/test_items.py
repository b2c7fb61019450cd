"""Partial failures (core/items.py, run_end, condition): the threshold rule,
the counts kept in the statistics, and the condition that names them."""

from __future__ import annotations

import pytest

from celery_dgs.core import Level, Reason, condition
from celery_dgs.core.items import (
    DEFAULT_PARTIAL_FAILURE_THRESHOLD,
    PARTIAL_FAILURE,
    ItemCounts,
    check_threshold,
    is_partial_failure,
    item_counts,
    outcome_with_items,
)
from celery_dgs.core.run_end import FAILURE_OUTCOMES, stats_after
from celery_dgs.errors import ScheduleConfigError

from .helpers import H, good, periodic, utc

START, END = utc(2026, 6, 1, 12), utc(2026, 6, 1, 12, 30)
STATS = good(utc(2026, 6, 1, 10), utc(2026, 6, 1, 11))


def test_partial_failure_is_a_failure_outcome() -> None:
    assert PARTIAL_FAILURE in FAILURE_OUTCOMES
    assert DEFAULT_PARTIAL_FAILURE_THRESHOLD == 0.5


@pytest.mark.parametrize(
    ("ok", "failed", "threshold", "partial"),
    [
        (7, 3, 0.2, True),  # 30 % > 20 %
        (8, 2, 0.2, False),  # exactly the threshold: not above it
        (9, 1, 0.2, False),
        (0, 0, 0.2, False),  # no items: judged by the outcome alone
        (0, 5, 1.0, False),  # a threshold of 1 never fails a run on its items
        (4, 6, DEFAULT_PARTIAL_FAILURE_THRESHOLD, True),
    ],
)
def test_threshold_rule(ok: int, failed: int, threshold: float, partial: bool) -> None:
    assert is_partial_failure(ItemCounts(ok, failed), threshold) is partial


def test_outcome_with_items_names_the_counts_and_the_threshold() -> None:
    outcome, error = outcome_with_items("success", None, ItemCounts(7, 3), 0.2)
    assert outcome == PARTIAL_FAILURE
    assert error is not None
    assert "3 of 10 items failed" in error
    assert "30%" in error
    assert "0.2" in error
    assert outcome_with_items("success", None, ItemCounts(9, 1), 0.2) == ("success", None)
    # A run that raised (or was interrupted) keeps its own outcome.
    assert outcome_with_items("failure", "boom", ItemCounts(0, 10), 0.2) == ("failure", "boom")
    assert outcome_with_items("cancelled", "op", ItemCounts(0, 10), 0.2) == ("cancelled", "op")
    assert outcome_with_items("success", None, None, 0.2) == ("success", None)


@pytest.mark.parametrize(
    ("ok", "failed", "message"),
    [
        (-1, 0, "ok must be zero or more"),
        (1, -3, "failed must be zero or more"),
        (1.5, 0, "ok must be a whole number"),
        (1, "2", "failed must be a whole number"),
        (True, 0, "ok must be a whole number"),
        (1, None, "failed must be a whole number"),
    ],
)
def test_bad_counts_name_the_field(ok: object, failed: object, message: str) -> None:
    with pytest.raises(ValueError, match=message):
        item_counts(ok, failed)


@pytest.mark.parametrize("value", [0, 0.0, -0.1, 1.01, float("nan"), float("inf"), "0.5", True])
def test_threshold_outside_zero_one(value: object) -> None:
    with pytest.raises(ValueError, match=r"\(0, 1\]"):
        check_threshold(value)
    with pytest.raises(ScheduleConfigError) as info:
        periodic(partial_failure_threshold=value)
    assert "scrape" in str(info.value)
    assert "partial_failure_threshold" in str(info.value)


def test_threshold_in_the_spec_round_trips() -> None:
    spec = periodic(partial_failure_threshold=0.2)
    assert spec.to_dict()["partial_failure_threshold"] == 0.2
    assert "partial_failure_threshold" not in periodic().to_dict()  # stored JSON unchanged
    assert periodic(partial_failure_threshold=1).partial_failure_threshold == 1.0


def test_stats_keep_the_counts_of_a_good_run_and_of_a_partial_failure() -> None:
    ok = stats_after(STATS, "success", START, END, 0.37, items=ItemCounts(9, 1))
    assert (ok.last_items_ok, ok.last_items_failed, ok.failure_count) == (9, 1, 0)
    assert ok.last_good_start_at == START
    partial = stats_after(STATS, PARTIAL_FAILURE, START, END, 0.37, items=ItemCounts(7, 3))
    assert partial.last_items == ItemCounts(7, 3)
    assert partial.failure_count == 1
    assert partial.last_good_start_at == STATS.last_good_start_at  # not a good run
    # An outright failure clears them; an interruption leaves them.
    raised = stats_after(partial, "failure", END, END + H, 0.37, items=ItemCounts(1, 1))
    assert raised.last_items is None
    assert raised.failure_count == 2
    stolen = stats_after(partial, "stolen", END, END + H, 0.37)
    assert stolen.last_items == ItemCounts(7, 3)


def test_condition_names_the_counts_of_a_partial_failure() -> None:
    spec = periodic()
    partial = stats_after(STATS, PARTIAL_FAILURE, START, END, 0.37, items=ItemCounts(7, 3))
    cond = condition(spec, partial, None, END + H)
    assert (cond.level, cond.reason) == (Level.WARNING, Reason.ITEMS_FAILED)
    assert "3 of 10 items failed" in cond.message
    assert "30%" in cond.message
    # Past the deadline: ERROR deadline_passed, its message still names the counts.
    late = condition(spec, partial, None, utc(2026, 6, 3))
    assert (late.level, late.reason) == (Level.ERROR, Reason.DEADLINE_PASSED)
    assert "3 of 10 items failed" in late.message
    # An outright failure keeps the plain reason; a good run with failed items is OK.
    raised = stats_after(STATS, "failure", START, END, 0.37)
    assert condition(spec, raised, None, END + H).reason is Reason.LAST_RUN_FAILED
    fine = stats_after(STATS, "success", START, END, 0.37, items=ItemCounts(9, 1))
    assert condition(spec, fine, None, END + H).reason is Reason.OK
