"""The schedule window's bounds: which rows it holds and which slice it reads next."""

from __future__ import annotations

from datetime import datetime, timedelta, timezone

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from celery_dgs.core.window import KeptStart, ScheduleBounds, slice_of
from celery_dgs.core.window_part import SliceRead

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


kept_times = st.one_of(
    st.just((None, None)),
    st.tuples(st.integers(0, 20), st.integers(0, 20)).map(
        lambda t: (T0 + timedelta(seconds=t[0]), T0 + timedelta(seconds=t[1]))
    ),
)


@settings(max_examples=300, deadline=None)
@given(
    st.dictionaries(st.text("abc", min_size=1, max_size=3), kept_times, max_size=40),
    st.none() | st.integers(0, 20),
    st.integers(0, 20),
    st.none() | st.tuples(st.integers(0, 20), st.integers(0, 20), st.text("abc", max_size=3)),
    st.integers(1, 20),
)
def test_a_slice_is_the_sorted_selection_cut_at_its_limit(
    kept: dict[str, tuple[datetime | None, datetime | None]],
    can_after: int | None,
    can_until: int,
    key_after: tuple[int, int, str] | None,
    limit: int,
) -> None:
    """``slice_of`` (the memory store's and the simulator's read) selects as
    the store's query does: at the start, rows with no kept times first (by
    name), then the keyed rows in the window's order, ``limit`` in all."""
    at = lambda s: T0 + timedelta(seconds=s)  # noqa: E731
    after = None if key_after is None else (at(key_after[0]), at(key_after[1]), key_after[2])
    read = SliceRead(
        None if can_after is None else at(can_after), at(can_until), after, limit, restart=False
    )
    start = read.can_after is None and read.key_after is None
    unkept = sorted(n for n, (can, should) in kept.items() if can is None or should is None)
    keyed = sorted(
        (should, can, name)
        for name, (can, should) in kept.items()
        if can is not None
        and should is not None
        and can <= read.can_until
        and (read.can_after is None or can > read.can_after)
        and (after is None or (should, can, name) > after)
    )
    expected = (unkept if start else [])[:limit]
    expected += [name for _, _, name in keyed][: limit - len(expected)]
    assert slice_of(read, [(n, KeptStart(*times)) for n, times in kept.items()]) == expected


@settings(max_examples=300, deadline=None)
@given(
    st.dictionaries(
        st.text("abc", min_size=1, max_size=3),
        st.tuples(kept_times, st.none() | st.integers(0, 30), st.integers(-1, 1)),
        max_size=40,
    ),
    st.integers(-1, 1),
    st.integers(0, 20),
    st.none() | st.tuples(st.integers(0, 30), st.integers(0, 20), st.text("abc", max_size=3)),
    st.integers(1, 20),
)
def test_a_margin_buckets_slice_is_its_rows_by_error_at_cut_at_its_limit(
    kept: dict[str, tuple[tuple[datetime | None, datetime | None], int | None, int]],
    bucket: int,
    can_until: int,
    key_after: tuple[int, int, str] | None,
    limit: int,
) -> None:
    """A read of one margin bucket's slice selects that bucket's keyed rows
    that can start by ``can_until``, by (``error_at``, next start, name)."""
    at = lambda s: T0 + timedelta(seconds=s)  # noqa: E731
    after = None if key_after is None else (at(key_after[0]), at(key_after[1]), key_after[2])
    read = SliceRead(None, at(can_until), after, limit, restart=False, bucket=bucket)
    entries = {
        name: KeptStart(can, should, None if error_s is None else at(error_s), of)
        for name, ((can, should), error_s, of) in kept.items()
    }
    keyed = sorted(
        (e.error_at, e.can, name)
        for name, e in entries.items()
        if e.bucket == bucket
        and e.can is not None
        and e.should is not None
        and e.error_at is not None
        and e.can <= read.can_until
        and (after is None or (e.error_at, e.can, name) > after)
    )
    assert slice_of(read, list(entries.items())) == [name for _, _, name in keyed][:limit]
