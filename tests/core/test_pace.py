"""The leading beat's dispatch pace over the last minute (core/pace.py)."""

from __future__ import annotations

import pytest

from celery_dgs.core.pace import PaceFigures, RoundPace, WindowFigures


def test_no_round_yet_is_no_pace_and_no_limit() -> None:
    figures = RoundPace().figures(100.0)
    assert (figures.rounds, figures.dispatches, figures.busy_share) == (0, 0, 0.0)
    assert figures.dispatches_per_s == 0.0
    assert not figures.beat_limited


def test_short_rounds_between_long_waits_leave_the_slots_as_the_limit() -> None:
    pace = RoundPace(window_s=60)
    for i in range(60):  # one 10 ms round a second, 4 runs each
        pace.note(float(i), i + 0.01, dispatched=4, capped=False)
    figures = pace.figures(60.0)
    assert figures.rounds == 60
    assert figures.dispatches_per_s == pytest.approx(4.0)
    assert figures.busy_share == pytest.approx(0.01)
    assert not figures.beat_limited


def test_rounds_that_fill_beats_time_make_beat_the_limit() -> None:
    pace = RoundPace(window_s=10)
    for i in range(10):  # 0.8 s rounds every second
        pace.note(float(i), i + 0.8, dispatched=1, capped=False)
    figures = pace.figures(10.0)
    assert figures.busy_share == pytest.approx(0.8)
    assert figures.beat_limited


def test_rounds_that_keep_hitting_the_cap_make_beat_the_limit() -> None:
    pace = RoundPace(window_s=10)
    for i in range(10):
        pace.note(float(i), i + 0.01, dispatched=100, capped=i % 2 == 0)
    figures = pace.figures(10.0)
    assert (figures.capped_rounds, figures.rounds) == (5, 10)
    assert figures.beat_limited


def test_rounds_older_than_the_window_leave_it() -> None:
    pace = RoundPace(window_s=10)
    pace.note(0.0, 5.0, dispatched=50, capped=True)
    pace.note(20.0, 20.1, dispatched=2, capped=False)
    figures = pace.figures(25.0)
    assert (figures.rounds, figures.dispatches, figures.capped_rounds) == (1, 2, 0)
    assert figures.busy_share == pytest.approx(0.01)


def test_the_figures_round_trip_as_a_dict() -> None:
    figures = PaceFigures(window_s=60, rounds=3, dispatches=30, busy_share=0.6, capped_rounds=0)
    assert figures.to_dict() == {
        "window_s": 60,
        "rounds": 3,
        "dispatches": 30,
        "dispatches_per_s": 0.5,
        "busy_share": 0.6,
        "capped_rounds": 0,
        "beat_limited": True,
        "window": None,
        "elevator": None,
    }


def test_a_window_at_its_room_is_said_so() -> None:
    reading = WindowFigures(held=300, size=100, full=True, room=1100)
    assert not reading.at_room
    assert WindowFigures(held=1100, size=100, full=True, room=1100).at_room
    assert not WindowFigures(held=1100, size=100, full=True, room=None).at_room, "no room"
    assert not WindowFigures(held=1100, size=100, full=False, room=1100).at_room, "not full"
    assert reading.to_dict() == {"held": 300, "size": 100, "full": True, "room": 1100}


def test_a_beat_that_just_started_is_not_judged() -> None:
    pace = RoundPace(window_s=60)
    pace.note(0.0, 0.9, dispatched=4, capped=True)
    figures = pace.figures(1.0)
    assert figures.busy_share == pytest.approx(0.9)
    assert not figures.beat_limited


def test_a_window_must_be_positive() -> None:
    with pytest.raises(ValueError, match="pace window"):
        RoundPace(window_s=0)
