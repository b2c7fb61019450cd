"""What a full window's ends bound, bucket by bucket (``core/laxity_bounds.py``):
the summary the certainty rule keeps for a second, and the ends it is kept
on, which the window builds once while nothing changes."""

from __future__ import annotations

import math
from datetime import datetime, timezone
from unittest import mock

from hypothesis import event, given
from hypothesis import settings as hsettings
from hypothesis import strategies as st

from celery_dgs.core import window_certainty
from celery_dgs.core.index import IndexedTimes
from celery_dgs.core.laxity import margin_bucket
from celery_dgs.core.laxity_bounds import SUMMARY_SPAN_S, LaxitySummary, laxity_summary
from celery_dgs.core.window_buckets import BucketEnds, WindowEnds
from celery_dgs.core.window_certainty import PickBound

NOW = 100_000.0
T0 = datetime(2026, 1, 1, tzinfo=timezone.utc)


def test_a_summary_is_kept_for_a_second_and_computed_again_after() -> None:
    ends = WindowEnds(NOW + 600, {margin_bucket(100.0): NOW + 900})
    first = laxity_summary(ends, NOW, 60.0, 25)
    assert first.until == NOW + SUMMARY_SPAN_S
    assert laxity_summary(ends, NOW + 0.5, 60.0, 25) is first, "within its second: kept"
    assert laxity_summary(ends, NOW + SUMMARY_SPAN_S, 60.0, 25) is first
    later = laxity_summary(ends, NOW + 2, 60.0, 25)
    assert later is not first
    assert later.least < first.least, "a schedule not held only comes nearer its deadline"
    assert laxity_summary(ends, NOW + 2, 60.0, 26) is not later, "one per laxity bucket"


def test_the_window_builds_its_ends_once_while_nothing_changes() -> None:
    buckets = BucketEnds()
    buckets.started_over([3, 7])

    def seconds(moment: datetime) -> float:
        return (moment - T0).total_seconds()

    ends = buckets.window_ends(10.0, seconds)
    assert buckets.window_ends(10.0, seconds) is ends
    assert buckets.window_ends(11.0, seconds) is not ends, "the should-order end moved"
    ends = buckets.window_ends(11.0, seconds)
    buckets.seen(3)
    assert buckets.window_ends(11.0, seconds) is ends, "a bucket already in use"
    buckets.seen(9)
    assert buckets.window_ends(11.0, seconds) is not ends, "a new bucket in use"
    ends = buckets.window_ends(11.0, seconds)
    buckets.after_read(3, [(T0, T0, "a")], 1)
    read = buckets.window_ends(11.0, seconds)
    assert read is not ends
    assert read.buckets[3] == 0.0
    buckets.not_full()
    assert buckets.window_ends(11.0, seconds).buckets[3] == -math.inf


ends_st = st.builds(
    lambda should, bucket_ends: WindowEnds(NOW + should, bucket_ends),
    st.floats(min_value=-3000, max_value=9000),
    st.dictionaries(
        st.integers(min_value=10, max_value=40),
        st.one_of(
            st.just(-math.inf),
            st.just(math.inf),
            st.floats(min_value=NOW - 500, max_value=NOW + 9000),
        ),
        max_size=8,
    ),
)


@hsettings(max_examples=1500, deadline=None)
@given(
    ends=ends_st,
    should=st.floats(min_value=NOW - 200, max_value=NOW + 9000),
    margin=st.floats(min_value=0.0, max_value=20_000),
    floor=st.sampled_from([60.0, 5.0, 0.0]),
    later=st.floats(min_value=0.0, max_value=SUMMARY_SPAN_S),
)
def test_a_summary_kept_from_an_earlier_moment_vouches_only_where_each_bucket_does(
    ends: WindowEnds, should: float, margin: float, floor: float, later: float
) -> None:
    """The rule asked at ``NOW`` keeps its summary; asked again up to a
    second later, it vouches only where the bucket-by-bucket check, on ends
    that keep nothing, vouches too."""
    rule = PickBound(lambda _n: 1.0, lambda _n: margin, 10.0, floor)
    times = IndexedTimes(NOW - 1, should)
    rule.refusal("c", times, NOW, ends)  # the summary, kept on ends
    at = NOW + later
    kept = rule.refusal("c", times, at, ends)
    fresh = WindowEnds(ends.should, dict(ends.buckets), dict(ends.cut_at))
    with mock.patch.object(window_certainty, "laxity_summary", never_vouches):
        exact = rule.refusal("c", times, at, fresh)
    if kept is None:
        assert exact is None
    event("vouched" if kept is None else "refused")


def never_vouches(_ends: WindowEnds, now: float, _floor: float, _top: int) -> LaxitySummary:
    """A summary that vouches for nothing: the bucket-by-bucket check decides."""
    return LaxitySummary(now, False, -math.inf, -math.inf)


def test_a_summary_kept_for_a_second_bounds_the_whole_second() -> None:
    """Schedules not held of 87 s to 108 s margins, their ``should_start_by``
    at least ``NOW + 1000``: at the floor of 60 s, the least laxity among
    them is (1000 + 108.4) / 168.4 = 6.582 at ``NOW``, 6.576 a second later.
    A candidate of margin 1000 s at laxity 6.5799 then 6.5790 goes first at
    ``NOW`` and not at ``NOW + 1``, whichever moment the rule summed up the
    buckets at first."""
    rule = PickBound(lambda _n: 1.0, lambda _n: 1000.0, 10.0, 60.0)
    times = IndexedTimes(NOW - 1, NOW + 5974.7)
    ends = WindowEnds(NOW + 1000, {margin_bucket(100.0): -math.inf})
    assert rule.refusal("c", times, NOW, ends) is None
    assert rule.refusal("c", times, NOW + 1, ends) is not None, "the summary kept from NOW"
    assert rule.refusal("c", times, NOW + 1, WindowEnds(ends.should, dict(ends.buckets)))
