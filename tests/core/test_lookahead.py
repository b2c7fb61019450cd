"""Look-ahead admission (pure): a long run is held while it would leave the short
schedules too few slots, never when nothing would be late, never past its own
``should_start_by``. Time is the ``now`` passed in (seconds)."""

from __future__ import annotations

from datetime import timedelta

import pytest

from celery_dgs.core.lookahead import (
    MAX_RECHECK_S,
    AdmissionRound,
    DemandBook,
    demand_period_s,
    hold_until,
)
from celery_dgs.core.spec import AdaptiveSpec, CronSpec, PeriodicSpec
from celery_dgs.core.stats import ScheduleStats

HOUR, WEEK = 3600.0, 7 * 86400.0
LONG = 12 * HOUR  # seed 000's weekly 12-hour job


def seed_fleet(hourly_jobs: int = 1, minutes: float = 1.0) -> DemandBook:
    """Seed 000's example: a weekly 12-hour job and hourly one-minute jobs."""
    book = DemandBook()
    book.note("weekly", LONG, WEEK)
    for i in range(hourly_jobs):
        book.note(f"hourly{i}", minutes * 60, HOUR)
    return book


def test_seed_example_one_free_slot_the_long_job_is_held_for_the_hourly_one() -> None:
    book = seed_fleet()
    now, should = 1000.0, 1000.0 + 5 * 86400
    # One slot in all: starting the 12-hour job leaves nothing for the hourly job.
    wake = hold_until(book, now, LONG, should, slots=1, busy=[])
    assert wake is not None
    assert now < wake <= now + MAX_RECHECK_S


def test_not_held_when_nothing_would_be_late_no_idle_slot() -> None:
    book = seed_fleet()
    # A second slot serves the hourly job (1/60 of a slot) during the 12 hours.
    assert hold_until(book, 1000.0, LONG, 1000.0 + 86400, slots=2, busy=[]) is None
    # Only long jobs beside it: no shorter schedule can be late because of it.
    longs = DemandBook()
    longs.note("weekly", LONG, WEEK)
    longs.note("other", 10 * HOUR, WEEK)
    assert hold_until(longs, 1000.0, LONG, 1000.0 + 86400, slots=1, busy=[]) is None


def test_never_held_once_due_so_never_starved() -> None:
    book = seed_fleet()
    should = 5000.0
    wake = hold_until(book, 1000.0, LONG, should, slots=1, busy=[])
    assert wake is not None
    assert wake <= should
    # Held again and again, it is looked at by its should_start_by at the latest,
    # and then it goes, whatever the load.
    assert hold_until(book, should - 1, LONG, should, slots=1, busy=[]) == should
    assert hold_until(book, should, LONG, should, slots=1, busy=[]) is None
    assert hold_until(book, should + 60, LONG, should, slots=1, busy=[]) is None


def test_long_runs_in_progress_take_their_slots_for_the_window() -> None:
    # Ten slots; the short jobs need 7.5 of them (30 jobs, a quarter slot each).
    book = DemandBook()
    for i in range(30):
        book.note(f"short{i}", 150.0, 600.0)
    book.note("long", 6000.0, 86400.0)
    now, should = 0.0, 50_000.0
    assert hold_until(book, now, 6000.0, should, 10, busy=[]) is None
    one_long = [(now + 5000.0, 6000.0)]
    assert hold_until(book, now, 6000.0, should, 10, busy=one_long) is None  # 7.5 <= 0.95 * 8
    two_long = [*one_long, (now + 6000.0, 6000.0)]
    assert hold_until(book, now, 6000.0, should, 10, busy=two_long) is not None
    # A long run that ends soon holds little of the window; short runs hold nothing
    # (their schedules' shares are the demand already).
    ending = [*one_long, (now + 100.0, 6000.0)]
    assert hold_until(book, now, 6000.0, should, 10, busy=ending) is None
    shorts = [*one_long, *[(now + 100.0, 150.0)] * 8]
    assert hold_until(book, now, 6000.0, should, 10, busy=shorts) is None


def test_a_round_counts_its_own_admissions() -> None:
    book = DemandBook()
    for i in range(30):
        book.note(f"short{i}", 150.0, 600.0)
    calls = []

    def busy() -> list[tuple[float, float]]:
        calls.append(1)
        return []

    admission = AdmissionRound(book, 0.0, 10, busy)
    assert admission.hold_until(150.0, 900.0) is None  # a short one: nothing to look at
    assert calls == []
    assert admission.hold_until(6000.0, 50_000.0) is None
    assert admission.hold_until(6000.0, 50_000.0) is None
    assert admission.hold_until(6000.0, 50_000.0) is not None  # the third long one
    assert calls == [1]


def test_the_book_follows_notes_and_forgets() -> None:
    book = DemandBook()
    book.note("a", 60.0, 600.0)
    book.note("b", 30.0, 300.0)
    assert book.share_below(1000.0) == pytest.approx(0.2)
    book.note("a", 120.0, 600.0)  # its run time grew
    assert book.share_below(1000.0) == pytest.approx(0.3)
    assert book.share_below(100.0) == pytest.approx(0.1)  # only b is below 100 s
    book.forget("b")
    book.forget("never")
    assert book.share_below(1000.0) == pytest.approx(0.2)
    assert len(book) == 1


def test_demand_period_of_each_kind() -> None:
    stats = ScheduleStats()
    periodic = PeriodicSpec(task="t", scheduling_period=timedelta(hours=2))
    assert demand_period_s(periodic, stats) == 7200.0
    cron = CronSpec(task="t", cron_schedule="0 * * * *",
                    cron_max_schedule_duration=timedelta(minutes=10))  # fmt: skip
    assert demand_period_s(cron, stats) == 4200.0
    adaptive = AdaptiveSpec(task="t", interval_unit=timedelta(hours=1))
    assert demand_period_s(adaptive, stats) > 0
