"""A run without an expected run time takes the mean of its task's other
schedules, else of the fleet, else 0; the look-ahead's cap holds a first run
of a long task as it holds the others."""

from __future__ import annotations

import pytest

from celery_dgs.core.lookahead import AdmissionRound, DemandBook
from celery_dgs.core.run_estimate import RunEstimates

HOUR, WEEK = 3600.0, 7 * 86400.0


def test_the_estimate_is_the_tasks_mean_else_the_fleets_else_zero() -> None:
    est = RunEstimates()
    assert est.expected_s("new", 0.0) == 0.0
    est.note("a1", "t.a", 10.0)
    est.note("a2", "t.a", 30.0)
    est.note("b1", "t.b", 100.0)
    est.note("a3", "t.a", 0.0)
    est.note("c1", "t.c", 0.0)
    assert len(est) == 3
    assert est.expected_s("a3", 0.0) == pytest.approx(20.0)
    assert est.expected_s("a3", 5.0) == 5.0  # a known figure is kept
    assert est.expected_s("c1", 0.0) == pytest.approx(140.0 / 3)  # no other t.c
    assert est.expected_s("unknown", 0.0) == pytest.approx(140.0 / 3)
    # Notes replace, forgets remove.
    est.note("a2", "t.a", 50.0)
    assert est.expected_s("a3", 0.0) == pytest.approx(30.0)
    est.forget("a1")
    est.forget("a2")
    assert est.expected_s("a3", 0.0) == pytest.approx(100.0)  # the fleet's: b1
    est.forget("b1")
    est.forget("b1")
    assert (len(est), est.expected_s("a3", 0.0)) == (0, 0.0)


def test_the_cap_holds_a_first_run_of_a_long_task() -> None:
    """Seed 000's fleet on two slots: one weekly 12-hour run in progress; a
    new weekly schedule with no run yet (0 s expected) is held as a weekly
    one with a history is: by its task's 12 hours."""
    book = DemandBook()
    for i in range(3):
        book.note(f"weekly{i}", 12 * HOUR, WEEK, "t.weekly")
    for i in range(30):
        book.note(f"hourly{i}", 60.0, HOUR, "t.hourly")
    book.note("weekly_new", 0.0, WEEK, "t.weekly")
    busy = [(5 * HOUR, 12 * HOUR)]
    due = 0.0  # due: only the cap holds it
    known = AdmissionRound(book, 0.0, 2, lambda: list(busy)).hold_until(12 * HOUR, due, "weekly1")
    first = AdmissionRound(book, 0.0, 2, lambda: list(busy)).hold_until(0.0, due, "weekly_new")
    assert known is not None
    assert first is not None
    # A new hourly schedule is estimated short: it starts.
    book.note("hourly_new", 0.0, HOUR, "t.hourly")
    assert (
        AdmissionRound(book, 0.0, 2, lambda: list(busy)).hold_until(0.0, due, "hourly_new") is None
    )
    # A weekly run in progress without a recorded run time counts as long too
    # (beat's runs in progress take the book's estimate).
    running = book.expected_s("weekly_new", 0.0)
    assert running == pytest.approx(12 * HOUR)
    round_ = AdmissionRound(book, 0.0, 2, lambda: [(running, running)])
    assert round_.hold_until(12 * HOUR, due, "weekly2") is not None
