"""Seed 001's revisit groups in the simulator: sources a lister adds during
the run, measured from their listing; under a backlog the groups visit each
within one dispatch round, where today's order makes it wait its deadline."""

from __future__ import annotations

from celery_dgs.core.ranking import OrderPolicy
from celery_dgs.sim.revisit import (
    DAY,
    RevisitOptions,
    rounds_waited,
    simulate_revisit,
    source_name,
    sources,
)
from celery_dgs.sim.upstream import Source, Upstream

#: 200 sources on one slot with visits of 400 s: more eligible than the slot serves.
BACKLOG = RevisitOptions(
    sources=200,
    slots=1,
    duration_s=400.0,
    horizon_s=8 * DAY,
    warmup_s=3 * DAY,
    hint_fraction=0.5,
    new_sources=20,
    seed=4,
)


def test_new_sources_are_listed_during_the_window_and_never_visited() -> None:
    srcs = sources(BACKLOG)
    assert len(srcs) == 220
    listed = [s.listed_at for s in srcs.values() if s.listed_at is not None]
    assert len(listed) == 20
    assert all(BACKLOG.warmup_s <= t < BACKLOG.horizon_s for t in listed)
    assert listed == sorted(listed)


def test_rounds_waited_counts_distinct_start_times_between_listing_and_first_start() -> None:
    trace = [(1.0, "a", "w"), (2.0, "b", "w"), (2.0, "c", "w"), (3.0, "new", "w"), (4.0, "x", "w")]
    assert rounds_waited(trace, {"new": 1.5}) == [1]  # the round at 2.0 passed it by
    assert rounds_waited(trace, {"new": 2.5}) == [0]
    assert rounds_waited(trace, {"c": 2.0, "never": 0.0}) == [0]


def test_under_a_backlog_the_groups_visit_a_new_source_in_the_next_round() -> None:
    srcs = sources(BACKLOG)
    groups = simulate_revisit(BACKLOG, srcs=srcs)
    today = simulate_revisit(BACKLOG, srcs=srcs, order=OrderPolicy(group_shares=None))
    assert groups.sim.utilization > 0.99
    assert today.sim.utilization > 0.99
    assert len(groups.new_rounds) == 20
    assert max(groups.new_rounds) == 0
    assert groups.upstream.new.censored == 0
    assert groups.upstream.new.max_lag_s < 3 * BACKLOG.duration_s
    # Today's order: a new source waits for its should_start_by, a unit after listing.
    assert min(today.new_rounds) > 0
    assert max(today.new_rounds) > 10
    assert today.upstream.new.mean_lag_s > 10 * groups.upstream.new.mean_lag_s


def test_a_source_listed_and_never_visited_is_censored_at_the_horizon() -> None:
    name = source_name(0)
    upstream = Upstream(
        {name: Source(1 / DAY, listed_at=50.0)}, horizon_s=100.0, window_start=10.0, seed=1
    )
    assert all(t > 50.0 for t in upstream.changes(name))
    figures = upstream.figures()
    assert figures.new.sources == 1
    assert figures.new.censored == 1
    assert figures.new.mean_lag_s == 50.0
    visited = Upstream(
        {name: Source(1 / DAY, listed_at=50.0)}, horizon_s=100.0, window_start=10.0, seed=1
    )
    visited.visited(name, 60.0, 70.0)
    visited.visited(name, 80.0, 90.0)  # only the first visit counts
    assert visited.figures().new.mean_lag_s == 20.0
