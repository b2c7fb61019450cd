"""Blackout windows in the schedule's zone: midnight crossing, DST days, touching."""

from __future__ import annotations

from datetime import time

from celery_dgs.core import (
    Blackout,
    blackout_containing,
    first_fit,
    longest_free_gap,
    move_out_of_blackout,
    next_blackout_start,
    parse_blackouts,
)

from .helpers import H, M, utc

NY = "America/New_York"
LONDON = "Europe/London"
NOON = (Blackout(time(12), time(14)),)
NIGHT = (Blackout(time(22), time(2)),)


def test_window_in_local_time_and_half_open() -> None:
    window = (utc(2026, 6, 1, 16), utc(2026, 6, 1, 18))  # 12:00-14:00 EDT
    assert blackout_containing(NOON, NY, utc(2026, 6, 1, 16)) == window
    assert blackout_containing(NOON, NY, utc(2026, 6, 1, 17, 59)) == window
    assert blackout_containing(NOON, NY, utc(2026, 6, 1, 18)) is None
    assert blackout_containing(NOON, NY, utc(2026, 6, 1, 15, 59)) is None
    assert blackout_containing((), NY, utc(2026, 6, 1, 17)) is None


def test_window_crossing_midnight_both_sides() -> None:
    window = (utc(2026, 6, 2, 2), utc(2026, 6, 2, 6))  # 22:00 Jun 1 - 02:00 Jun 2 EDT
    assert blackout_containing(NIGHT, NY, utc(2026, 6, 2, 3)) == window  # 23:00 local
    assert blackout_containing(NIGHT, NY, utc(2026, 6, 2, 5)) == window  # 01:00 local next day
    assert blackout_containing(NIGHT, NY, utc(2026, 6, 2, 6)) is None


def test_ny_spring_window_ending_in_the_gap() -> None:
    # 22:00 EST Mar 7 -> "02:30" Mar 8, which does not exist: ends at 03:00 EDT (07:00Z)
    blackouts = (Blackout(time(22), time(2, 30)),)
    window = (utc(2026, 3, 8, 3), utc(2026, 3, 8, 7))
    assert blackout_containing(blackouts, NY, utc(2026, 3, 8, 6, 59)) == window
    assert blackout_containing(blackouts, NY, utc(2026, 3, 8, 7)) is None


def test_ny_spring_window_starting_in_the_gap() -> None:
    blackouts = (Blackout(time(2, 30), time(4)),)  # starts when the gap ends, 03:00 EDT
    assert blackout_containing(blackouts, NY, utc(2026, 3, 8, 7)) == (
        utc(2026, 3, 8, 7),
        utc(2026, 3, 8, 8),
    )
    assert blackout_containing(blackouts, NY, utc(2026, 3, 8, 6, 59)) is None


def test_ny_fall_window_covers_both_passes_of_the_repeated_hour() -> None:
    blackouts = (Blackout(time(1), time(2)),)
    window = (utc(2026, 11, 1, 5), utc(2026, 11, 1, 7))  # 01:00 EDT .. 02:00 EST
    assert blackout_containing(blackouts, NY, utc(2026, 11, 1, 5, 30)) == window
    assert blackout_containing(blackouts, NY, utc(2026, 11, 1, 6, 30)) == window
    assert blackout_containing(blackouts, NY, utc(2026, 11, 1, 7)) is None


def test_london_spring_and_fall() -> None:
    blackouts = (Blackout(time(0, 30), time(1, 30)),)
    # spring: 01:30 GMT does not exist -> window ends at 02:00 BST = 01:00Z
    assert blackout_containing(blackouts, LONDON, utc(2026, 3, 29, 0, 45)) == (
        utc(2026, 3, 29, 0, 30),
        utc(2026, 3, 29, 1),
    )
    # fall: 01:30 repeats -> window ends at its second occurrence (01:30 GMT)
    assert blackout_containing(blackouts, LONDON, utc(2026, 10, 25, 1, 15)) == (
        utc(2026, 10, 24, 23, 30),
        utc(2026, 10, 25, 1, 30),
    )


def test_move_out_of_blackout() -> None:
    assert move_out_of_blackout(NOON, NY, utc(2026, 6, 1, 17)) == utc(2026, 6, 1, 18)
    assert move_out_of_blackout(NOON, NY, utc(2026, 6, 1, 15)) == utc(2026, 6, 1, 15)
    assert move_out_of_blackout((), NY, utc(2026, 6, 1, 17)) == utc(2026, 6, 1, 17)


def test_move_out_through_touching_and_overlapping_windows() -> None:
    touching = parse_blackouts("s", [("12:00", "13:00"), ("13:00", "14:00")])
    assert move_out_of_blackout(touching, NY, utc(2026, 6, 1, 16, 30)) == utc(2026, 6, 1, 18)
    overlapping = parse_blackouts("s", [("12:00", "13:30"), ("13:00", "14:00")])
    assert move_out_of_blackout(overlapping, NY, utc(2026, 6, 1, 16, 30)) == utc(2026, 6, 1, 18)
    across_midnight = parse_blackouts("s", [("22:00", "00:00"), ("00:00", "01:00")])
    assert move_out_of_blackout(across_midnight, "UTC", utc(2026, 6, 1, 23)) == utc(2026, 6, 2, 1)


def test_next_blackout_start() -> None:
    assert next_blackout_start(NOON, NY, utc(2026, 6, 1, 14)) == utc(2026, 6, 1, 16)
    assert next_blackout_start(NOON, NY, utc(2026, 6, 1, 19)) == utc(2026, 6, 2, 16)
    # strictly after: a window starting exactly at `after` is not "next"
    assert next_blackout_start(NOON, NY, utc(2026, 6, 1, 16)) == utc(2026, 6, 2, 16)
    assert next_blackout_start(NIGHT, NY, utc(2026, 6, 1, 12)) == utc(2026, 6, 2, 2)
    assert next_blackout_start((), NY, utc(2026, 6, 1)) is None


def test_longest_free_gap() -> None:
    assert longest_free_gap(NOON, "UTC", utc(2026, 6, 1)) == 22 * H
    two = parse_blackouts("s", [("00:00", "01:00"), ("12:00", "14:00")])
    assert longest_free_gap(two, "UTC", utc(2026, 6, 1)) == 11 * H
    # fall-back day is 25 hours long: one gap is 23 h
    assert longest_free_gap(NOON, NY, utc(2026, 11, 1)) == 23 * H
    assert longest_free_gap((), NY, utc(2026, 11, 1)) is None


def test_first_fit() -> None:
    ten = utc(2026, 6, 1, 14)  # 10:00 EDT, window 12:00-14:00 EDT
    assert first_fit(NOON, NY, ten, H) == ten
    assert first_fit(NOON, NY, ten, 2 * H) == ten  # ends exactly as the window starts
    assert first_fit(NOON, NY, ten, 2 * H + M) == utc(2026, 6, 1, 18)
    assert first_fit(NOON, NY, utc(2026, 6, 1, 17), H) == utc(2026, 6, 1, 18)
    assert first_fit(NOON, NY, ten, 23 * H) is None  # longer than any gap
    assert first_fit((), NY, ten, 23 * H) == ten


def test_a_window_is_read_as_a_clock_is_written_and_a_bad_one_named() -> None:
    import pytest

    from celery_dgs.core.blackout_periods import parse_blackouts
    from celery_dgs.errors import ScheduleConfigError

    (window,) = parse_blackouts("s", [("9:00", "10:30")])
    assert (window.start, window.end) == (time(9), time(10, 30))
    with pytest.raises(
        ScheduleConfigError,
        match=r"item 0 \(\('25:00', '10:00'\)\) has a bad time: '25:00' is not a time of day",
    ):
        parse_blackouts("s", [("25:00", "10:00")])
    with pytest.raises(
        ScheduleConfigError, match=r"item 0 \(\('9:00',\)\) is not a \(start, end\) pair"
    ):
        parse_blackouts("s", [("9:00",)])


def test_a_window_written_as_shown_and_an_end_at_24_00() -> None:
    import pytest

    from celery_dgs.core.blackout_periods import parse_blackouts
    from celery_dgs.errors import ScheduleConfigError

    windows = parse_blackouts("s", ["10:00-11:30", ("22:00", "24:00"), "9:00 - 9:30"])
    assert [str(w) for w in windows] == [
        "10:00:00-11:30:00",
        "22:00:00-00:00:00",
        "09:00:00-09:30:00",
    ]
    assert parse_blackouts("s", [str(w) for w in windows]) == windows  # as shown, read back
    with pytest.raises(ScheduleConfigError, match=r"item 0 \('10:00'\) is not a \(start, end\)"):
        parse_blackouts("s", ["10:00"])
    with pytest.raises(ScheduleConfigError, match=r"item 0 \('10:00-25:00'\) has a bad time"):
        parse_blackouts("s", ["10:00-25:00"])
    # a whole day, written with 24:00, is named as written and why
    with pytest.raises(
        ScheduleConfigError, match=r"item 0 \(00:00-24:00\) covers the whole day: it could never"
    ):
        parse_blackouts("s", ["00:00-24:00"])
    with pytest.raises(ScheduleConfigError, match=r"item 0 \(12:00-12:00\) is empty"):
        parse_blackouts("s", ["12:00-12:00"])
