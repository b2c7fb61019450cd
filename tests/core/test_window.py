"""The schedule window's bounds: which rows it holds and which slice it reads next."""

from __future__ import annotations

from datetime import datetime, timedelta, timezone

import pytest

from celery_dgs.core.window import ScheduleBounds, SliceRead

T0 = datetime(2026, 6, 1, 12, 0, tzinfo=timezone.utc)
M = timedelta(minutes=1)
HOUR = timedelta(hours=1)


def test_the_first_read_starts_over_with_the_whole_horizon() -> None:
    bounds = ScheduleBounds(10, HOUR)
    assert not bounds.holds(T0, T0, "a", requested=False), "nothing read yet"
    assert bounds.next_read(T0, 0) == SliceRead(None, T0 + HOUR, None, 10, restart=True)


def test_a_short_read_holds_everything_that_can_start_by_its_end() -> None:
    bounds = ScheduleBounds(10, HOUR)
    read = bounds.next_read(T0, 0)
    assert read is not None
    bounds.after_read(read, [(T0, T0, "a"), (T0 + M, T0, "b")])
    assert not bounds.full
    assert bounds.holds(T0 + 59 * M, T0 + 2 * HOUR, "z", requested=False)
    assert not bounds.holds(T0 + 61 * M, T0 + 2 * HOUR, "z", requested=False)
    assert bounds.next_read(T0 + 29 * M, 2) is None, "still more than half the horizon ahead"
    again = bounds.next_read(T0 + 31 * M, 2)
    assert again == SliceRead(T0 + HOUR, T0 + 31 * M + HOUR, None, 8, restart=False)


def test_a_read_that_fills_the_window_holds_only_up_to_its_last_key() -> None:
    bounds = ScheduleBounds(2, HOUR)
    read = bounds.next_read(T0, 0)
    assert read is not None
    bounds.after_read(read, [(T0, T0, "a"), (T0 + M, T0, "b")])
    assert bounds.full
    assert bounds.end == (T0 + M, T0, "b")
    assert bounds.holds(T0, T0 + M, "b", requested=False)
    assert not bounds.holds(T0, T0 + M, "c", requested=False), "same time, later name"
    assert not bounds.holds(T0, T0 + 2 * M, "a", requested=False)
    assert bounds.holds(T0, T0 + 9 * HOUR, "x", requested=True), "a run request is always held"
    assert bounds.holds(None, None, "bad", requested=False), "no kept times: held, reported"
    assert bounds.next_read(T0, 2) is None, "full, and the held are plenty"
    on = bounds.next_read(T0, 0)
    assert on == SliceRead(None, T0 + HOUR, (T0 + M, T0, "b"), 2, restart=False)
    more = bounds.next_read(T0, 2, more=True)
    assert more == SliceRead(None, T0 + HOUR, (T0 + M, T0, "b"), 1, restart=False)


def test_a_full_window_starts_over_as_time_moves_and_a_short_slice_ends_full() -> None:
    bounds = ScheduleBounds(2, HOUR)
    read = bounds.next_read(T0, 0)
    assert read is not None
    bounds.after_read(read, [(T0, T0, "a"), (T0 + M, T0, "b")])
    on = bounds.next_read(T0, 0)
    assert on is not None
    bounds.after_read(on, [(T0 + 2 * M, T0, "c")])
    assert not bounds.full, "the slice was short: everything by the horizon is held"
    bounds = ScheduleBounds(2, HOUR)
    read = bounds.next_read(T0, 0)
    assert read is not None
    bounds.after_read(read, [(T0, T0, "a"), (T0 + M, T0, "b")])
    assert bounds.next_read(T0 + 31 * M, 2) == SliceRead(
        None, T0 + 31 * M + HOUR, None, 2, restart=True
    )


def test_bad_bounds_are_refused() -> None:
    with pytest.raises(ValueError, match="size must be at least 1"):
        ScheduleBounds(0, HOUR)
    with pytest.raises(ValueError, match="positive duration"):
        ScheduleBounds(5, timedelta(0))
