"""When a blackout makes indexed start times stale, and the watch of those moments."""

from __future__ import annotations

from datetime import datetime, timedelta

from hypothesis import given, settings
from hypothesis import strategies as st

from celery_dgs.core.blackout_watch import (
    BlackoutWatch,
    kept_start_past_blackout,
    stale_from,
    takes_new_times,
)
from celery_dgs.core.index import DeadlineIndex
from celery_dgs.core.spec import PeriodicSpec
from celery_dgs.core.stats import ScheduleStats
from celery_dgs.core.timing import start_times

from .helpers import utc

MON = utc(2026, 6, 1)  # a Monday, 00:00 UTC
US = timedelta(microseconds=1)


def periodic(blackouts: list[tuple[str, str]], *, overlap: bool = False) -> PeriodicSpec:
    return PeriodicSpec(
        task="t",
        scheduling_period=timedelta(hours=6),
        blackout_periods=blackouts,
        avoid_blackout_overlap=overlap,
    )


def ran(start: datetime, run_s: float = 600.0) -> ScheduleStats:
    """One good run from ``start`` lasting ``run_s``."""
    return ScheduleStats(
        registered_at=start - timedelta(days=1),
        last_good_start_at=start,
        last_good_end_at=start + timedelta(seconds=run_s),
        average_good_duration=timedelta(seconds=run_s),
    )


def can_at(spec: PeriodicSpec, stats: ScheduleStats, now: datetime) -> datetime:
    return start_times(spec, stats, now).can_start_by


def test_no_blackout_no_moment() -> None:
    spec = PeriodicSpec(task="t", scheduling_period=timedelta(hours=6))
    assert stale_from(spec, ran(MON), MON, MON + timedelta(hours=1)) is None


def test_an_eligible_entry_is_stale_when_its_next_window_begins() -> None:
    spec, stats = periodic([("10:00", "11:00")]), ran(MON)  # can = 00:10
    now = MON + timedelta(hours=2)
    can = can_at(spec, stats, now)
    assert can == MON + timedelta(minutes=10)
    assert stale_from(spec, stats, can, now) == MON + timedelta(hours=10)
    assert can_at(spec, stats, MON + timedelta(hours=10)) == MON + timedelta(hours=11)


def test_an_entry_moved_to_its_windows_end_is_stale_at_that_end() -> None:
    spec, stats = periodic([("10:00", "11:00")]), ran(MON)
    inside = MON + timedelta(hours=10, minutes=30)
    can = can_at(spec, stats, inside)
    assert can == MON + timedelta(hours=11)
    assert stale_from(spec, stats, can, inside) == can
    # from the end on, the schedule's own (earlier) time again
    assert can_at(spec, stats, can) == MON + timedelta(minutes=10)


def test_a_future_start_is_stale_at_the_first_window_after_it() -> None:
    spec, stats = periodic([("01:00", "02:00"), ("10:00", "11:00")]), ran(MON + timedelta(hours=3))
    now = MON + timedelta(hours=1, minutes=30)  # in the first window, before the can of 03:10
    can = can_at(spec, stats, now)
    assert can == MON + timedelta(hours=3, minutes=10)
    assert stale_from(spec, stats, can, now) == MON + timedelta(hours=10)


def test_with_overlap_avoided_stale_just_after_the_last_start_that_fits() -> None:
    spec, stats = periodic([("10:00", "11:00")], overlap=True), ran(MON, run_s=1800)
    now = MON + timedelta(hours=2)
    can = can_at(spec, stats, now)
    assert can == MON + timedelta(minutes=30)
    moment = stale_from(spec, stats, can, now)
    assert moment is not None
    # the expected run is the average plus deviations (none here): 1,800 s
    assert moment == MON + timedelta(hours=9, minutes=30) + US
    assert can_at(spec, stats, moment - US) == can
    assert can_at(spec, stats, moment) == MON + timedelta(hours=11)


def test_with_overlap_past_the_last_fit_the_window_start() -> None:
    spec, stats = periodic([("00:00", "00:05")], overlap=True), ran(MON - timedelta(hours=1), 7200)
    now = MON + timedelta(hours=23, minutes=30)  # 30 min before the next window: no fit now
    can = can_at(spec, stats, now)
    moment = stale_from(spec, stats, can, now)
    assert moment is not None
    assert moment > now


@settings(max_examples=300, deadline=None)
@given(
    start_h=st.integers(0, 23),
    length_h=st.integers(1, 6),
    last_start_min=st.integers(-600, 600),
    run_min=st.integers(1, 240),
    now_min=st.integers(0, 24 * 60),
    overlap=st.booleans(),
    probe=st.floats(0.0, 1.0),
)
def test_the_times_do_not_change_before_the_moment(
    start_h: int,
    length_h: int,
    last_start_min: int,
    run_min: int,
    now_min: int,
    overlap: bool,
    probe: float,
) -> None:
    """Any moment from ``now`` up to the one :func:`stale_from` gives computes
    the same ``can_start_by`` as ``now`` did."""
    window = [(f"{start_h:02d}:00", f"{(start_h + length_h) % 24:02d}:00")]
    spec = periodic(window, overlap=overlap)
    stats = ran(MON + timedelta(minutes=last_start_min), run_min * 60.0)
    now = MON + timedelta(minutes=now_min)
    can = can_at(spec, stats, now)
    moment = stale_from(spec, stats, can, now)
    assert moment is not None
    assert moment > now
    between = now + (moment - now - US) * probe
    assert can_at(spec, stats, between) == can


def test_the_watch_gives_each_due_name_once_in_time_order() -> None:
    watch = BlackoutWatch()
    watch.note("b", 20.0)
    watch.note("a", 10.0)
    watch.note("c", 30.0)
    assert len(watch) == 3
    assert watch.next_at() == 10.0
    assert watch.due(5.0) == []
    assert watch.due(20.0) == [("a", 10.0), ("b", 20.0)]
    assert watch.due(20.0) == []
    assert len(watch) == 1
    assert watch.next_at() == 30.0


def test_a_replaced_or_forgotten_moment_is_skipped() -> None:
    watch = BlackoutWatch()
    watch.note("a", 10.0)
    watch.note("a", 25.0)  # replaced
    watch.note("b", 12.0)
    watch.forget("b")
    watch.note("c", 15.0)
    watch.note("c", None)  # none any more
    assert watch.due(20.0) == []
    assert watch.due(25.0) == [("a", 25.0)]
    assert len(watch) == 0
    assert watch.next_at() is None


def test_the_heap_stays_bounded_under_many_replacements() -> None:
    watch = BlackoutWatch()
    for i in range(10_000):
        watch.note("a", float(i))
    assert len(watch._heap) <= 2 * len(watch) + 64 + 1
    assert watch.due(1e9) == [("a", 9999.0)]


def test_which_entries_take_their_new_times() -> None:
    assert takes_new_times(100.0, 150.0, 200.0)  # its window began: later
    assert takes_new_times(150.0, 150.0, 100.0)  # it held the window's end: its own again
    assert not takes_new_times(170.0, 150.0, 100.0)  # a hold-back until 170 keeps its time
    assert not takes_new_times(100.0, 150.0, 100.0)  # unchanged


def test_a_run_that_fits_no_gap_is_looked_at_again_at_local_midnight() -> None:
    """New York, a window 02:00-23:00 and a 3 h 30 min run: it fits in no
    3-hour gap, so it is left due; the fall-back night's 4-hour gap comes into
    the days that verdict looks at when the local day changes, and the start
    moves to it then."""
    spec = PeriodicSpec(
        task="t",
        tz="America/New_York",
        scheduling_period=timedelta(days=7),
        blackout_periods=[("02:00", "23:00")],
        avoid_blackout_overlap=True,
        duration_override=timedelta(hours=3, minutes=30),
    )
    stats = ran(utc(2026, 10, 20), 3 * 3600.0)
    now = utc(2026, 10, 29, 3, 30)  # 23:30 EDT on the 28th
    can = can_at(spec, stats, now)
    assert can == utc(2026, 10, 20, 3)
    moment = stale_from(spec, stats, can, now)
    assert moment == utc(2026, 10, 29, 4)  # local midnight
    assert can_at(spec, stats, moment - US) == can
    assert can_at(spec, stats, moment) == utc(2026, 11, 1, 3)  # 23:00 EDT, the long night


def test_retime_due_moves_the_due_entries_the_rule_lets_move() -> None:
    index = DeadlineIndex()
    index.upsert("began", 100.0, 500.0)  # its window began at 150: later now
    index.upsert("held", 170.0, 500.0)  # a hold-back until 170: kept
    index.upsert("gone", 100.0, 500.0)
    index.remove("gone")  # left the index: skipped
    watch = BlackoutWatch()
    for name in ("began", "held", "gone"):
        watch.note(name, 150.0)
    fresh = {"began": (210.0, 500.0), "held": (100.0, 500.0), "gone": (210.0, 500.0)}
    asked: list[str] = []

    def times_now(name: str) -> tuple[float, float]:
        asked.append(name)
        return fresh[name]

    assert watch.retime_due(160.0, index, times_now) == 1
    assert sorted(asked) == ["began", "held"]
    began, held = index.times("began"), index.times("held")
    assert began is not None
    assert began.can_start_by == 210.0
    assert held is not None
    assert held.can_start_by == 170.0


def test_kept_times_past_a_blackout_begun_since_they_were_written() -> None:
    spec = periodic([("06:00", "09:00")])
    stats = ran(MON - timedelta(hours=3))  # may start again before midnight
    kept = start_times(spec, stats, MON)
    assert kept.can_start_by <= MON
    at_seven = MON + timedelta(hours=7)
    moved = kept_start_past_blackout(spec, stats, kept.can_start_by, kept.should_start_by, at_seven)
    assert moved == (MON + timedelta(hours=9), start_times(spec, stats, at_seven).should_start_by)
    assert (
        kept_start_past_blackout(
            spec, stats, kept.can_start_by, kept.should_start_by, MON + timedelta(hours=4)
        )
        is None
    ), "before the window: the kept times stand"
    plain = PeriodicSpec(task="t", scheduling_period=timedelta(hours=6))
    assert (
        kept_start_past_blackout(plain, stats, kept.can_start_by, kept.should_start_by, at_seven)
        is None
    ), "no blackout"


@settings(max_examples=300, deadline=None)
@given(
    start_h=st.integers(0, 23),
    length_h=st.integers(1, 6),
    last_start_min=st.integers(-600, 600),
    run_min=st.integers(1, 240),
    written_min=st.integers(0, 24 * 60),
    later_min=st.integers(0, 24 * 60),
    overlap=st.booleans(),
)
def test_kept_times_move_only_later_and_only_to_times_that_may_not_start_yet(
    start_h: int,
    length_h: int,
    last_start_min: int,
    run_min: int,
    written_min: int,
    later_min: int,
    overlap: bool,
) -> None:
    """Times kept at ``written`` and looked at ``later``: moved, they are the
    times at ``later``, which may not start yet, with the key (should, can)
    no earlier than the kept one (beat's window reads rely on it); not moved,
    the kept ones still let the schedule start by ``later`` or were not due."""
    window = [(f"{start_h:02d}:00", f"{(start_h + length_h) % 24:02d}:00")]
    spec = periodic(window, overlap=overlap)
    stats = ran(MON + timedelta(minutes=last_start_min), run_min * 60.0)
    written = MON + timedelta(minutes=written_min)
    later = written + timedelta(minutes=later_min)
    kept = start_times(spec, stats, written)
    moved = kept_start_past_blackout(spec, stats, kept.can_start_by, kept.should_start_by, later)
    fresh = start_times(spec, stats, later)
    if moved is None:
        assert kept.can_start_by > later or fresh.can_start_by <= later
        return
    can, should = moved
    assert (can, should) == (fresh.can_start_by, fresh.should_start_by)
    assert kept.can_start_by <= later < can
    assert (should, can) >= (kept.should_start_by, kept.can_start_by)
