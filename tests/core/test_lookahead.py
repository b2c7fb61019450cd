"""Look-ahead admission (pure): a long run is held while it would leave the short
schedules too few slots, never when nothing would be late; past its own
``should_start_by`` only while the long runs in progress take their
allowance. Time is the ``now`` passed in (seconds)."""

from __future__ import annotations

from datetime import timedelta
from typing import Any

import pytest

from celery_dgs.core.lookahead import (
    MAX_RECHECK_S,
    RECHECK_FRACTION,
    AdmissionRound,
    CapQueue,
    DemandBook,
    admit,
    demand_period_s,
    long_run_allowance,
)
from celery_dgs.core.spec import AdaptiveSpec, CheckSpec, CronSpec, PeriodicSpec
from celery_dgs.core.stats import ScheduleStats


def hold_until(*args: Any, **kwargs: Any) -> float | None:
    """:func:`admit`'s time to look again (None: start now)."""
    return admit(*args, **kwargs)[0]


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


def test_once_due_only_the_cap_holds_it_so_never_starved() -> None:
    book = seed_fleet()
    should = 5000.0
    one_long = BUSY[:1]
    # Due: it goes beside one weekly run (3 - 1/60 / 0.95 slots are allowed) ...
    assert hold_until(book, should, LONG, should, slots=3, busy=one_long) is None
    # ... but not as the third weekly run on three slots: it waits for one of
    # them to end, looked at again every 1 % of its run time, however late.
    for now in (should, should + 3600.0):
        wake = hold_until(book, now, LONG, should, slots=3, busy=BUSY)
        assert wake == now + LONG * RECHECK_FRACTION
    # A run past its expected end still holds its slot.
    overrun = [(end - 2 * HOUR, run_s) for end, run_s in BUSY]
    assert hold_until(book, should + 3600.0, LONG, should, slots=3, busy=overrun) is not None
    # Alone, it always goes: the allowance is at least one slot.
    assert hold_until(book, should + 60, LONG, should, slots=1, busy=[]) is None


def test_under_overload_the_long_runs_get_what_the_short_ones_leave_at_least_one() -> None:
    """Ten slots; 34 short jobs need 8.5 of them and seven long ones 1.75: the
    demand (10.25) exceeds the slots, so the long runs get 10 - 8.5 / 0.95 =
    1.05 slots, one run at a time, instead of their own share rounded up."""
    book = DemandBook()
    for i in range(34):
        book.note(f"short{i}", 150.0, 600.0)
    for i in range(7):
        book.note(f"long{i}", 6000.0, 24_000.0)
    assert long_run_allowance(book, 10, book.share_below(600.0)) == pytest.approx(10 - 8.5 / 0.95)
    assert hold_until(book, 0.0, 6000.0, 50_000.0, 10, busy=[]) is None
    one_long = [(5000.0, 6000.0)]
    assert hold_until(book, 0.0, 6000.0, 50_000.0, 10, busy=one_long) is not None
    assert hold_until(book, 60_000.0, 6000.0, 50_000.0, 10, busy=one_long) is not None


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
    """Seven long jobs of a fifth of a slot need 1.4 slots: more than the 1.58
    the short jobs leave (10 - 8 / 0.95) rounded down. The demand (9.4) fits,
    so two long runs at a time are allowed, else they would all wait for
    their should_start_by and then run at once."""
    book = DemandBook()
    for i in range(32):
        book.note(f"short{i}", 150.0, 600.0)
    for i in range(7):
        book.note(f"long{i}", 4800.0, 24_000.0)
    assert long_run_allowance(book, 10, book.share_below(480.0)) == 2.0
    one_long = [(3000.0, 4800.0)]
    assert hold_until(book, 0.0, 4800.0, 50_000.0, 10, busy=one_long) is None
    two_long = [*one_long, (3500.0, 4800.0)]
    assert hold_until(book, 0.0, 4800.0, 50_000.0, 10, busy=two_long) is not None


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


def test_the_cap_gives_a_freed_long_slot_to_the_one_due_first() -> None:
    """Two long jobs on the seed example's three slots, one long run allowed:
    ``a`` runs, ``b`` is held by the cap. When ``a`` ends it is eligible again
    at once (no cooldown) and is looked at before ``b`` wakes: it waits, since
    ``b`` is due first, and the slot goes to ``b`` at its next look."""
    book = DemandBook()
    book.note("a", LONG, 86_400.0)
    book.note("b", LONG, 86_400.0)
    book.note("hourly", 600.0, HOUR)  # 10 minutes an hour: 3 - 1/6 / 0.95 = 2.8 slots
    queue = CapQueue()
    a_running = [(LONG, LONG)]
    b_should = 1000.0
    first = AdmissionRound(book, 0.0, 2, lambda: a_running, queue)
    wake = first.hold_until(LONG, b_should, "b")
    assert wake == LONG * RECHECK_FRACTION
    assert len(queue) == 1
    # a ended; b looks again at `wake`, a (due much later) comes up first.
    ended = AdmissionRound(book, wake - 1, 2, list, queue)
    assert ended.hold_until(LONG, 80_000.0, "a") is not None, "b is due first"
    assert ended.hold_until(LONG, b_should, "b") is None
    assert len(queue) == 1  # a waits now
    # Once b runs, a is held by the cap itself, and goes when b ends.
    after = AdmissionRound(book, wake + 1, 2, lambda: [(wake + LONG, LONG)], queue)
    assert after.hold_until(LONG, 80_000.0, "a") is not None
    assert AdmissionRound(book, wake + LONG, 2, list, queue).hold_until(LONG, 80_000.0, "a") is None
    assert len(queue) == 0


def test_a_held_place_lapses_when_its_schedule_is_not_looked_at_again() -> None:
    queue = CapQueue()
    queue.hold("b", LONG, 1000.0, wake=2000.0)
    assert queue.ahead("a", LONG, 5000.0, now=2000.0) == 1
    assert queue.ahead("a", LONG, 500.0, now=2000.0) == 0  # a is due first
    queue.hold("quick", 60.0, 900.0, wake=2000.0)
    assert queue.ahead("a", LONG, 5000.0, now=2000.0) == 1, "a run 720 times shorter is no peer"
    queue.discard("quick")
    # A short candidate is never held back behind a held long one: the cap holds
    # long runs for the short schedules.
    assert queue.ahead("short", 60.0, 5000.0, now=2000.0) == 0
    # b was removed or run by an operator: no look renews it after its wake.
    assert queue.ahead("a", LONG, 5000.0, now=2000.0 + LONG * RECHECK_FRACTION + 1) == 0
    assert len(queue) == 0


def test_no_cap_for_a_run_shorter_than_the_short_schedules_periods() -> None:
    """Run times that spread widely, without long jobs: 20 schedules of 10 s
    every 2 h and 5 of 5 minutes every 2 h on two slots. The 5-minute runs
    are long beside the 10 s ones, but end long before those miss their
    2-hour period: two of them may run at once, due or not."""
    book = DemandBook()
    for i in range(20):
        book.note(f"quick{i}", 10.0, 2 * HOUR)
    for i in range(5):
        book.note(f"mid{i}", 300.0, 2 * HOUR)
    assert book.period_below(30.0) == pytest.approx(2 * HOUR)
    one_mid = [(200.0, 300.0)]
    assert hold_until(book, 0.0, 300.0, 0.0, 2, busy=one_mid) is None
    # With the quick ones every 2 minutes, a 5-minute run outlasts their period:
    # the cap keeps the second slot for them once one mid run is in progress.
    for i in range(20):
        book.note(f"quick{i}", 10.0, 120.0)
    assert book.period_below(30.0) == pytest.approx(120.0)
    assert hold_until(book, 0.0, 300.0, 0.0, 2, busy=one_mid) is not None


def test_no_fluid_hold_for_a_run_shorter_than_the_short_schedules_periods() -> None:
    """Not yet due, the same widely spread fleet: a 5-minute run beside one
    that has 5 minutes left would leave the 10 s schedules 0.03 slot less
    than their share for 5 minutes, but they can wait that long within their
    2-hour period: it starts. With a 2-minute period they cannot: held."""
    book = DemandBook()
    for i in range(20):
        book.note(f"quick{i}", 10.0, 2 * HOUR)
    for i in range(5):
        book.note(f"mid{i}", 300.0, 2 * HOUR)
    one_mid = [(300.0, 300.0)]
    assert hold_until(book, 0.0, 300.0, HOUR, 2, busy=one_mid) is None
    for i in range(20):
        book.note(f"quick{i}", 10.0, 120.0)
    assert hold_until(book, 0.0, 300.0, HOUR, 2, busy=one_mid) is not None


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
    # From a spec: a periodic schedule's period; a deferred check is no share.
    hourly = PeriodicSpec(task="t.h", scheduling_period=timedelta(hours=1))
    book.note_schedule(hourly.name, hourly, ScheduleStats(), 360.0)
    assert book.total() == pytest.approx(0.3)
    check = CheckSpec(task="t.c", key="k1")
    book.note(check.name, 60.0, 600.0)
    book.note_schedule(check.name, check, ScheduleStats(), 60.0)
    assert book.total() == pytest.approx(0.3)


def test_demand_period_of_each_kind() -> None:
    stats = ScheduleStats()
    periodic = PeriodicSpec(task="t", scheduling_period=timedelta(hours=2))
    assert demand_period_s(periodic, stats) == 7200.0
    cron = CronSpec(
        task="t", cron_schedule="0 * * * *", cron_max_schedule_duration=timedelta(minutes=10)
    )
    assert demand_period_s(cron, stats) == 4200.0
    adaptive = AdaptiveSpec(task="t", interval_unit=timedelta(hours=1))
    assert demand_period_s(adaptive, stats) > 0
