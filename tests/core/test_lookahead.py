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
    """Seed 000's example: weekly 12-hour jobs and hourly one-minute jobs."""
    book = DemandBook()
    for name in ("weekly", "other_weekly", "third_weekly"):
        book.note(name, LONG, WEEK)
    for i in range(hourly_jobs):
        book.note(f"hourly{i}", minutes * 60, HOUR)
    return book


#: Seed 000: "a single unit of capacity that is likely to be available for the
#: next hour because all of the other schedulers are busy": three slots, two
#: of them running weekly jobs that end within two hours.
BUSY = [(1000.0 + 2 * HOUR, LONG), (1000.0 + 1.5 * HOUR, LONG)]


def test_seed_example_the_long_job_is_held_while_the_other_slots_are_busy() -> None:
    book = seed_fleet()
    now, should = 1000.0, 1000.0 + 5 * 86400
    wake = hold_until(book, now, LONG, should, slots=3, busy=BUSY)
    assert wake is not None
    assert now < wake <= now + MAX_RECHECK_S
    # Once they have ended, it goes.
    assert hold_until(book, now + 2 * HOUR, LONG, should, slots=3, busy=[]) is None


def test_not_held_when_nothing_would_be_late_no_idle_slot() -> None:
    book = seed_fleet()
    # A fourth slot serves the hourly job (1/60 of a slot) meanwhile.
    assert hold_until(book, 1000.0, LONG, 1000.0 + 86400, slots=4, busy=BUSY) is None
    # One slot and nothing running: no later moment is better (the weekly
    # jobs' own shares need that slot some of the time), so it is not held.
    assert hold_until(book, 1000.0, LONG, 1000.0 + 86400, slots=1, busy=[]) is None
    # Only long jobs beside it: no shorter schedule can be late because of it.
    longs = DemandBook()
    longs.note("weekly", LONG, WEEK)
    longs.note("other", 10 * HOUR, WEEK)
    assert hold_until(longs, 1000.0, LONG, 1000.0 + 86400, slots=1, busy=[(5000.0, LONG)]) is None


def test_never_held_once_due_so_never_starved() -> None:
    book = seed_fleet()
    should = 5000.0
    wake = hold_until(book, 1000.0, LONG, should, slots=3, busy=BUSY)
    assert wake is not None
    assert wake <= should
    # Held again and again, it is looked at by its should_start_by at the latest,
    # and then it goes, whatever the load.
    assert hold_until(book, should - 1, LONG, should, slots=3, busy=BUSY) == should
    assert hold_until(book, should, LONG, should, slots=3, busy=BUSY) is None
    assert hold_until(book, should + 60, LONG, should, slots=1, busy=BUSY) is None


def shorts_and_longs() -> DemandBook:
    """Ten slots; 30 short jobs need 7.5 of them (a quarter slot each), five
    long ones 1.25 (a quarter each)."""
    book = DemandBook()
    for i in range(30):
        book.note(f"short{i}", 150.0, 600.0)
    for i in range(5):
        book.note(f"long{i}", 6000.0, 24_000.0)
    return book


def test_long_runs_in_progress_take_their_slots_for_the_window() -> None:
    book = shorts_and_longs()
    now, should = 0.0, 50_000.0
    # 10 - 7.5 / 0.95 = 2.1 slots for long runs.
    assert hold_until(book, now, 6000.0, should, 10, busy=[]) is None
    one_long = [(now + 5000.0, 6000.0)]
    assert hold_until(book, now, 6000.0, should, 10, busy=one_long) is None
    two_long = [*one_long, (now + 6000.0, 6000.0)]
    assert hold_until(book, now, 6000.0, should, 10, busy=two_long) is not None
    # Even when one of them ends soon: for those seconds three would run.
    ending = [*one_long, (now + 100.0, 6000.0)]
    assert hold_until(book, now, 6000.0, should, 10, busy=ending) is not None
    assert hold_until(book, now + 100.0, 6000.0, should, 10, busy=one_long) is None
    # Short runs in progress hold nothing: their schedules' shares are the demand.
    shorts = [*one_long, *[(now + 100.0, 150.0)] * 8]
    assert hold_until(book, now, 6000.0, should, 10, busy=shorts) is None


def test_the_long_jobs_own_share_rounded_up_may_run() -> None:
    """Seven long jobs of a quarter slot need 1.75 slots: more than the 1.05
    the short jobs leave (10 - 8.5 / 0.95) rounded down. Two long runs at a
    time are allowed, else they would all wait for their should_start_by and
    then run at once."""
    book = DemandBook()
    for i in range(34):
        book.note(f"short{i}", 150.0, 600.0)
    for i in range(7):
        book.note(f"long{i}", 6000.0, 24_000.0)
    one_long = [(5000.0, 6000.0)]
    assert hold_until(book, 0.0, 6000.0, 50_000.0, 10, busy=one_long) is None
    two_long = [*one_long, (5500.0, 6000.0)]
    assert hold_until(book, 0.0, 6000.0, 50_000.0, 10, busy=two_long) is not None


def test_a_round_counts_its_own_admissions() -> None:
    book = shorts_and_longs()
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
    assert book.total() == pytest.approx(0.2)
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
