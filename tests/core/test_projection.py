"""project_starts: beat's greedy order replayed on a virtual clock (pure)."""

from __future__ import annotations

from celery_dgs.core.projection import Waiting, project_starts


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
    greedy = project_starts(waiting, [], 1, 100.0, overload_policy="greedy")
    assert greedy == {"long": 100.0, "short": 600.0}
