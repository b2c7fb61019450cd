"""The fewest_errors overload order (celery_dgs/core/fewest_errors.py)."""

from __future__ import annotations

import math
import random

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from celery_dgs.core.fewest_errors import FewestErrorsIndex, run_value
from celery_dgs.core.late_order import RUN_REQUEST_PRIORITY_S
from celery_dgs.core.laxity import LaxityIndex
from celery_dgs.core.ranking import OrderPolicy, RankingSources, build_index, overload_index

AGING = 10.0


class Fleet:
    """Expected run times, margins and periods by name, and the overload signal."""

    def __init__(self) -> None:
        self.expected: dict[str, float] = {}
        self.margin: dict[str, float] = {}
        self.period: dict[str, float] = {}
        self.short = True

    def add(self, name: str, expected: float, period: float, margin: float = 10.0) -> None:
        self.expected[name], self.period[name], self.margin[name] = expected, period, margin

    def index(self, floor_periods: float = 5.0) -> FewestErrorsIndex:
        return FewestErrorsIndex(
            self.expected.__getitem__,
            self.margin.__getitem__,
            self.period.__getitem__,
            lambda: self.short,
            AGING,
            floor_periods=floor_periods,
        )


def drain(index, now: float) -> list[str]:
    out = []
    while (name := index.pop(now)) is not None:
        out.append(name)
    return out


def test_a_run_buys_its_period_less_its_run_per_second_of_run() -> None:
    assert run_value(3600, 60) == pytest.approx(59.0)
    assert run_value(100, 100) == 0.0
    assert run_value(math.inf, 5) == math.inf
    assert run_value(10, 0) == 9.0  # no measured run time: one second


def test_overloaded_the_schedules_in_error_go_by_value() -> None:
    fleet = Fleet()
    fleet.add("cheap", expected=10, period=1000)  # value 99
    fleet.add("dear", expected=500, period=1000)  # value 1
    fleet.add("middle", expected=100, period=1000)  # value 9
    index = fleet.index()
    for name in ("dear", "middle", "cheap"):
        index.upsert(name, 0.0, 100.0)  # error_at 110: all in ERROR at 200
    assert drain(index, 200.0) == ["cheap", "middle", "dear"]


def test_not_overloaded_it_is_the_fair_order() -> None:
    fleet = Fleet()
    fleet.short = False
    rng = random.Random(4)
    fair = LaxityIndex(fleet.expected.__getitem__, fleet.margin.__getitem__, AGING)
    index = fleet.index()
    for i in range(300):
        name = f"s{i}"
        fleet.add(name, rng.uniform(1, 500), rng.uniform(600, 5000), rng.uniform(1, 100))
        can = rng.uniform(0, 1000)
        should = can + rng.uniform(0, 2000)
        fair.upsert(name, can, should)
        index.upsert(name, can, should)
    for now in (500.0, 1500.0, 4000.0):
        for _ in range(40):
            assert index.pop(now) == fair.pop(now)


def test_a_schedule_at_the_floor_of_service_goes_first() -> None:
    fleet = Fleet()
    fleet.add("cheap", expected=10, period=1000)
    fleet.add("starved", expected=500, period=1000, margin=0.0)
    index = fleet.index(floor_periods=3)
    index.upsert("starved", 0.0, 100.0)  # error_at 100; at the floor from 2,100
    index.upsert("cheap", 0.0, 1900.0)  # in ERROR from 1,910
    assert index.peek(2000.0) == "cheap"
    assert index.peek(2100.0) == "starved"


def test_a_run_request_keeps_its_place_at_the_front() -> None:
    fleet = Fleet()
    fleet.add("cheap", expected=10, period=1000)
    fleet.add("requested", expected=900, period=1000)
    index = fleet.index()
    index.upsert("cheap", 0.0, 100.0)
    index.upsert("requested", 150.0, 150.0 - RUN_REQUEST_PRIORITY_S)
    assert drain(index, 500.0) == ["requested", "cheap"]


def test_a_refused_placement_keeps_the_schedule() -> None:
    fleet = Fleet()
    fleet.add("cheap", expected=10, period=1000)
    fleet.add("dear", expected=500, period=1000)
    index = fleet.index()
    index.upsert("cheap", 0.0, 100.0)
    index.upsert("dear", 0.0, 100.0)
    assert index.pop_placeable(500.0, lambda name: name == "dear") == "dear"
    assert index.pop(500.0) == "cheap"
    assert index.pop(500.0) is None


@settings(max_examples=60, deadline=None)
@given(
    entries=st.lists(
        st.tuples(st.floats(1, 500), st.floats(600, 5000), st.floats(0, 3000), st.floats(0, 3000)),
        min_size=1,
        max_size=40,
    ),
    short=st.booleans(),
    now=st.floats(0, 20000),
)
def test_every_eligible_schedule_is_served_once(entries, short, now) -> None:
    fleet = Fleet()
    fleet.short = short
    index = fleet.index(floor_periods=2)
    for i, (expected, period, can, lead) in enumerate(entries):
        fleet.add(f"s{i}", expected, period)
        index.upsert(f"s{i}", can, can + lead)
    served = drain(index, now)
    eligible = {f"s{i}" for i, e in enumerate(entries) if e[2] <= now}
    assert sorted(served) == sorted(eligible)
    assert len(index) == len(entries) - len(eligible)


def test_the_ranking_builds_it_for_the_goal() -> None:
    fleet = Fleet()
    order = OrderPolicy(goal="fewest_errors", floor_periods=4)
    index = overload_index(
        order,
        expected_s=fleet.expected.__getitem__,
        margin_s=fleet.margin.__getitem__,
        period_s=fleet.period.__getitem__,
        overloaded=lambda: True,
    )
    assert isinstance(index, FewestErrorsIndex)
    assert index.floor_periods == 4
    sources = RankingSources(fleet.expected.__getitem__, fleet.margin.__getitem__, lambda n: 50)
    with pytest.raises(ValueError, match="periods"):
        build_index(order, sources)
    with pytest.raises(ValueError, match="restore"):
        overload_index(
            OrderPolicy(goal="fewest_errors", overload="shed"),
            expected_s=fleet.expected.__getitem__,
            margin_s=fleet.margin.__getitem__,
            period_s=fleet.period.__getitem__,
        )
    with pytest.raises(ValueError, match="floor"):
        fleet.index(floor_periods=0.5)


def test_it_says_which_schedules_in_error_it_makes_wait() -> None:
    fleet = Fleet()
    fleet.add("cheap", expected=10, period=1000)  # value 99: chosen next
    fleet.add("dear", expected=500, period=1000)  # value 1
    fleet.add("middle", expected=100, period=1000)  # value 9
    index = fleet.index(floor_periods=3)
    for name in ("dear", "middle", "cheap"):
        index.upsert(name, 0.0, 100.0)  # error_at 110, floor at 2,110
    count, waiting = index.waiting_in_error(200.0)
    assert count == 2
    assert [(w.name, w.value, w.floor_at) for w in waiting] == [
        ("dear", 1.0, 2110.0),
        ("middle", 9.0, 2110.0),
    ]
    assert index.waiting_in_error(200.0, limit=1)[1][0].name == "dear"
    fleet.short = False
    assert index.waiting_in_error(200.0) == (0, [])
