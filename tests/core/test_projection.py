"""project_starts: beat's greedy order replayed on a virtual clock (pure)."""

from __future__ import annotations

from celery_dgs.core.lookahead import DemandBook
from celery_dgs.core.projection import Waiting, project_starts
from celery_dgs.core.ranking import OrderPolicy


def test_one_slot_serves_in_should_order_and_waits_for_eligibility() -> None:
    waiting = [
        Waiting("late_eligible", can_start_by=50, should_start_by=60, expected_s=10),
        Waiting("b", can_start_by=0, should_start_by=30, expected_s=20),
        Waiting("a", can_start_by=0, should_start_by=20, expected_s=20),
    ]
    # The slot is busy until 5: a (should 20) 5-25, b 25-45, late_eligible at its can 50.
    got = project_starts(waiting, busy_until=[5.0], free_slots=0, now=0.0)
    assert got == {"a": 5.0, "b": 25.0, "late_eligible": 50.0}


def test_two_slots_and_the_horizon() -> None:
    waiting = [Waiting(f"s{i}", 0, 100 + i, 60) for i in range(5)]
    got = project_starts(waiting, busy_until=[], free_slots=2, now=0.0, horizon_s=100)
    assert got == {"s0": 0.0, "s1": 0.0, "s2": 60.0, "s3": 60.0}  # s4 would start at 120


def test_the_projection_follows_beats_overload_policy() -> None:
    # Both late at now = 100; one slot: restore starts the short one first.
    waiting = [Waiting("long", 0.0, 10.0, 500.0), Waiting("short", 0.0, 50.0, 20.0)]
    restore = project_starts(waiting, busy_until=[], free_slots=1, now=100.0)
    assert restore == {"short": 100.0, "long": 120.0}  # the default, as beat's
    greedy = project_starts(waiting, [], 1, 100.0, order=OrderPolicy(overload="greedy"))
    assert greedy == {"long": 100.0, "short": 600.0}


def test_with_the_look_ahead_the_held_long_run_leaves_its_slot_to_the_short_one() -> None:
    """Seed 000's example on two slots: a weekly 12-hour run in progress, the
    other weekly job due now, an hourly one-minute job due in 30 minutes.
    Beat's admission holds the second weekly run until the first ends, so the
    hourly job is not projected late behind it."""
    hour = 3600.0
    book = DemandBook()
    for name in ("weekly", "weekly2"):
        book.note(name, 12 * hour, 7 * 24 * hour)
    book.note("hourly", 60.0, hour)
    waiting = [Waiting("weekly2", 0.0, 0.0, 12 * hour), Waiting("hourly", 1500.0, 1800.0, 60.0)]
    plain = project_starts(waiting, busy_until=[6 * hour], free_slots=1, now=0.0)
    assert plain["hourly"] == 6 * hour  # behind both weekly runs: projected late
    held_now: set[str] = set()
    held = project_starts(
        waiting,
        busy_until=[6 * hour],
        free_slots=1,
        now=0.0,
        lookahead=book,
        busy_run_s=[12 * hour],
        held_now=held_now,
    )
    assert held["hourly"] == 1500.0
    assert held["weekly2"] == 6 * hour  # when the first weekly run ends
    assert held_now == {"weekly2"}  # status shows it held by the look-ahead
