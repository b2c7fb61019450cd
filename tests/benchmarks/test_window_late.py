"""The late-slice experiment (``benchmarks/window_late.py``): its slice reads,
and its exactness claim checked against the whole fleet's index on a small
simulated fleet."""

from __future__ import annotations

from dataclasses import replace

import pytest

from benchmarks.quality import scenarios, workload_of
from benchmarks.window_late import (
    LateBounds,
    LateEntry,
    LateSettings,
    late_slice_of,
    run_window,
)
from celery_dgs.core.ranking import OrderPolicy
from celery_dgs.sim.loop import Simulator

ENTRIES: list[tuple[str, LateEntry | None]] = [
    ("a", LateEntry(can=0.0, error_at=10.0, late=50.0)),
    ("b", LateEntry(can=0.0, error_at=20.0, late=30.0)),
    ("c", LateEntry(can=0.0, error_at=500.0, late=5.0)),  # past E
    ("d", LateEntry(can=900.0, error_at=15.0, late=1.0)),  # past until
    ("e", LateEntry(can=5.0, error_at=30.0, late=40.0)),
    ("f", None),  # no kept times
]


def test_a_start_over_reads_the_lowest_late_keys_in_its_domain_and_then_the_next_part() -> None:
    bounds = LateBounds(size=2, error_horizon_s=60.0)
    read = bounds.start(now=0.0, can_until=600.0)
    names = late_slice_of(read, ENTRIES)
    assert names == ["b", "e"]
    bounds.after_read(0.0, read, [entry.key(name) for name, entry in ENTRIES if name in names])
    assert bounds.cut
    assert bounds.holds("e", ENTRIES[4][1])
    assert not bounds.holds("a", ENTRIES[0][1])
    assert not bounds.holds("c", ENTRIES[2][1])
    further = bounds.further()
    assert further is not None
    assert further.limit == 1
    assert late_slice_of(further, ENTRIES) == ["a"]
    bounds.after_read(0.0, further, [(50.0, 0.0, "a")])
    assert bounds.cut  # a full part: there may be more
    last = bounds.further()
    assert last is not None
    assert late_slice_of(last, ENTRIES) == []
    bounds.after_read(0.0, last, [])
    assert not bounds.cut
    assert bounds.restarts_at() == 30.0


def test_the_late_slice_needs_a_size_and_a_horizon() -> None:
    with pytest.raises(ValueError, match="size"):
        LateBounds(size=1, error_horizon_s=60.0)
    with pytest.raises(ValueError, match="E must be positive"):
        LateBounds(size=4, error_horizon_s=0.0)


def test_the_certainty_rule_holds_and_the_oracle_run_is_the_whole_fleets() -> None:
    scenario = next(s for s in scenarios(True, 1, size=(60, 2)) if s.label == "load 0.9")
    workload = workload_of(scenario, "synthetic")
    order = OrderPolicy()
    whole = Simulator(workload, "dgs", order=order).run().error_s
    windowed = replace(order, window_size=3, window_s=3600.0)
    late = run_window(workload, windowed, LateSettings(3, 3600.0), audit=True)
    assert late.picks > 0
    assert late.broken == 0  # no pick the window claimed exact differs from the fleet's
    assert late.differ_error == 0  # the fleet's pick in ERROR is always the window's
    assert late.by_key > 0
    oracle = run_window(workload, windowed, LateSettings(3, 3600.0), audit=True, oracle=True)
    assert oracle.same == oracle.picks
    assert oracle.error_s == whole
