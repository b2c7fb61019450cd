"""The margin buckets' slices of a full window (``core/window_buckets.py``,
``ScheduleBounds``' bucket reads) and what the certainty rule makes of them."""

from __future__ import annotations

import math
from datetime import datetime, timedelta, timezone

from celery_dgs.core.index import IndexedTimes
from celery_dgs.core.laxity import NO_MARGIN_BUCKET, margin_bucket, margin_bucket_edges
from celery_dgs.core.window import KeptStart, ScheduleBounds, buckets_in_use, keys_of
from celery_dgs.core.window_buckets import BucketEnds, WindowEnds
from celery_dgs.core.window_certainty import PickBound, Refusal, read_on_helps
from celery_dgs.core.window_part import SliceRead

T0 = datetime(2026, 1, 1, tzinfo=timezone.utc)
M = timedelta(minutes=1)
HOUR = timedelta(hours=1)


def full_bounds() -> ScheduleBounds:
    """A window of two, full after its first read, buckets 3 and 7 in use."""
    bounds = ScheduleBounds(2, HOUR, None)
    read = bounds.next_read(T0, 0)
    assert read is not None
    bounds.after_read(read, [(T0, T0, "a"), (T0 + M, T0, "b")], buckets=[3, 7])
    assert bounds.full
    return bounds


def test_a_margin_bucket_is_its_margin_alone() -> None:
    assert margin_bucket(0.0) == margin_bucket(-1.0) == margin_bucket(math.nan) == NO_MARGIN_BUCKET
    for margin in (0.05, 1.0, 59.0, 3600.0, 86_400.0):
        lo, hi = margin_bucket_edges(margin_bucket(margin))
        assert lo <= margin < hi
    assert margin_bucket_edges(NO_MARGIN_BUCKET) == (0.0, 0.0)


def test_a_bucket_is_read_only_while_full_and_until_complete() -> None:
    bounds = full_bounds()
    read = bounds.next_read(T0, 2, more=True, bucket=3)
    assert read == SliceRead(None, T0 + HOUR, None, 1, restart=False, bucket=3)
    rows = [KeptStart(T0, T0 + 9 * M, T0 + 20 * M, 3)]
    bounds.after_read(read, keys_of(read, rows, ["c"]))
    assert bounds.buckets.ends == {3: (T0 + 20 * M, T0, "c")}
    on = bounds.next_read(T0, 3, more=True, bucket=3)
    assert on is not None
    assert on.key_after == (T0 + 20 * M, T0, "c")
    bounds.after_read(on, [])
    assert bounds.buckets.ends == {3: None}, "fewer than the limit: complete"
    assert not bounds.buckets.readable(3)
    should_read = bounds.next_read(T0, 3, more=True, bucket=3)
    assert should_read is not None
    assert should_read.bucket is None, "a complete bucket: the should-order slice reads on"


def test_a_bucket_slice_holds_what_it_read_and_a_start_over_lets_it_go() -> None:
    bounds = full_bounds()
    read = bounds.next_read(T0, 2, more=True, bucket=3)
    assert read is not None
    bounds.after_read(read, [(T0 + 20 * M, T0, "c")])
    late_should = T0 + 50 * M
    held = bounds.holds(T0, late_should, "c", requested=False, error_at=T0 + 20 * M, bucket=3)
    assert held, "past the should-order end, within its bucket's slice"
    assert not bounds.holds(T0, late_should, "d", requested=False, error_at=T0 + 21 * M, bucket=3)
    assert not bounds.holds(T0, late_should, "c", requested=False, error_at=T0 + 20 * M, bucket=7)
    assert not bounds.holds(T0, late_should, "c", requested=False), "no error_at: not in a slice"
    restart = bounds.next_read(T0 + 31 * M, 3)
    assert restart is not None
    assert restart.restart
    bounds.after_read(restart, [(T0, T0, "a"), (T0 + M, T0, "b")], buckets=[7])
    assert bounds.buckets.ends == {}
    assert bounds.buckets.in_use == {7}
    assert not bounds.holds(T0, late_should, "c", requested=False, error_at=T0 + 20 * M, bucket=3)


def test_a_window_not_full_forgets_its_bucket_slices() -> None:
    bounds = full_bounds()
    read = bounds.next_read(T0, 2, more=True, bucket=7)
    assert read is not None
    bounds.after_read(read, [(T0 + 5 * M, T0, "c")])
    on = bounds.next_read(T0, 3, more=True)
    assert on is not None
    bounds.after_read(on, [])
    assert not bounds.full
    assert bounds.buckets.ends == {}


def test_the_ends_say_what_bounds_the_schedules_not_held() -> None:
    ends = BucketEnds()
    ends.started_over([1, 2, 3])
    ends.after_read(2, [(T0 + M, T0, "x")], 1)
    ends.after_read(3, [], 1)
    ends.seen(4)
    ends.seen(None)
    seconds = lambda moment: (moment - T0).total_seconds()  # noqa: E731
    assert ends.window_ends(10.0, seconds) == WindowEnds(
        10.0, {1: -math.inf, 2: 60.0, 3: math.inf, 4: -math.inf}, {2: (0.0, "x")}
    ), "a cut bucket's end key after its error_at breaks ties"
    rows = [KeptStart(T0, T0, T0, 5), KeptStart(None, None, None, 6), KeptStart(T0, T0, T0, None)]
    assert buckets_in_use(rows) == {5}


def bound(margin: float, expected: float = 1.0, floor: float | None = 60.0) -> PickBound:
    return PickBound(lambda _n: expected, lambda _n: margin, 10.0, floor)


def test_the_bucket_slices_vouch_past_the_should_order_end() -> None:
    """A backlog past its ``should_start_by`` but not in ERROR: the
    should-order end, 200 s behind now, bounds nothing; its bucket's slice
    bounds the schedules not held."""
    now = 100_000.0
    times = IndexedTimes(now - 100, now - 50)  # should passed, error_at = now + 250
    rule = bound(300.0)
    assert rule.refusal("c", times, now, WindowEnds(now - 200, {})) is not None
    bucket = margin_bucket(300.0)
    complete = WindowEnds(now - 200, {bucket: math.inf})
    assert rule.refusal("c", times, now, complete) is None
    cut = rule.refusal("c", times, now, WindowEnds(now - 200, {bucket: now + 200}))
    assert cut is not None, "one not held may have a laxity of 200 / 391, below 250 / 360"
    assert cut.bucket == bucket, "the refusal asks for that bucket's slice"
    far = WindowEnds(now - 200, {bucket: now + 5000})
    assert rule.refusal("c", times, now, far) is None
    other = rule.refusal("c", times, now, WindowEnds(now - 200, {bucket: math.inf, 5: -math.inf}))
    assert other == Refusal("c", 5), "an unread bucket of 3 s margins bounds little: it is read"


def test_a_late_candidate_is_bounded_by_the_buckets_too() -> None:
    """In ERROR, a schedule not held of a bucket whose slice ends at ``E``
    has a ``should_start_by`` of at least ``E`` less the bucket's greatest
    margin, and so a late key at least that."""
    now = 100_000.0
    rule = bound(10.0, expected=1.0)
    times = IndexedTimes(now - 600, now - 500)  # in ERROR, late key now - 490
    bucket = margin_bucket(10.0)
    assert rule.refusal("c", times, now, WindowEnds(now - 600, {})) == Refusal("c", None)
    assert rule.refusal("c", times, now, WindowEnds(now - 600, {bucket: now - 300})) is None
    refused = rule.refusal("c", times, now, WindowEnds(now - 600, {bucket: now - 480}))
    assert refused == Refusal("c", bucket), "its end less 11.6 s is the higher bound: it reads on"
    unread = rule.refusal("c", times, now, WindowEnds(now - 600, {bucket: -math.inf}))
    assert unread == Refusal("c", None), "the should-order end is the higher bound"


def test_reading_on_helps_a_laxity_pick_with_buckets_not_a_hopeless_late_one() -> None:
    """Refused on a bucket's bound, a candidate not in ERROR may be vouched
    for once that bucket's slice is read: the window reads on. A candidate in
    ERROR whose late key is past what the should-order slice can reach, with
    the buckets as they are, cannot: the picks go unchecked until the end
    moves."""
    now = 100_000.0
    at = datetime.fromtimestamp(now, tz=timezone.utc)
    bounds = ScheduleBounds(2, HOUR, 1.0)
    read = bounds.next_read(at, 0)
    assert read is not None
    bounds.after_read(read, [(at, at, "a"), (at, at, "b")], buckets=[5])
    relaxed = IndexedTimes(now - 100, now - 50)  # margin 300: not in ERROR
    reach = WindowEnds(now - 200, {5: -math.inf})
    assert read_on_helps(bounds, bound(300.0), "c", relaxed, now, reach)
    assert bounds.reads_on(2)
    late = IndexedTimes(now - 600, now - 500)  # margin 10, expected 100: late key now + 500
    assert not read_on_helps(bounds, bound(10.0, expected=100.0), "c", late, now, reach)
    assert bounds.unchecked_end == bounds.end
