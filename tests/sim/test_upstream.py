"""The synthetic upstream: change streams, eventfulness, lag, hints (pure, no simulation)."""

from __future__ import annotations

import random
from typing import Any

import pytest

from celery_dgs.sim.state import CALL
from celery_dgs.sim.upstream import Source, Upstream, draw_changes


def test_change_streams_are_poisson_within_the_horizon_and_seeded() -> None:
    a = draw_changes(1 / 3600, 1000 * 3600.0, random.Random(5))
    b = draw_changes(1 / 3600, 1000 * 3600.0, random.Random(5))
    assert list(a) == list(b)
    assert all(0 < t <= 1000 * 3600.0 for t in a)
    assert list(a) == sorted(a)
    assert 900 < len(a) < 1100  # mean 1000, sd ~32
    assert len(draw_changes(0.0, 1e9, random.Random(5))) == 0  # dead
    with pytest.raises(ValueError, match="change rate"):
        Source(-1.0)


def _upstream(
    changes: list[float], *, window: float = 0.0, hinted: bool = False, delay: float = 0.0
) -> Upstream:
    up = Upstream(
        {"s": Source(0.0, hinted, "g")}, horizon_s=1000.0, window_start=window, hint_delay_s=delay
    )
    up.changes("s").extend(changes)
    return up


def test_a_visit_is_eventful_iff_the_source_changed_since_the_previous_visit_start() -> None:
    up = _upstream([10.0, 20.0, 55.0])
    assert up.visited("s", 5.0, 6.0) is False  # nothing before 5
    assert up.visited("s", 30.0, 40.0) is True  # captures 10 and 20
    assert up.visited("s", 50.0, 60.0) is False  # 55 came after this visit started
    assert up.visited("s", 70.0, 75.0) is True  # ... the next one captures it
    assert up.visited("s", 80.0, 81.0) is False
    figures = up.figures()
    total = figures.total
    assert (total.visits, total.useless, total.changes, total.censored) == (5, 3, 3, 0)
    assert total.mean_lag_s == pytest.approx(((40 - 10) + (40 - 20) + (75 - 55)) / 3)
    assert figures.groups["g"] == total
    assert figures.dead_visits == 5  # a source of rate 0 counts as dead


def test_only_the_window_counts_and_uncaptured_changes_are_censored_at_the_horizon() -> None:
    up = _upstream([10.0, 200.0, 900.0], window=100.0)
    up.visited("s", 50.0, 60.0)  # before the window: not counted, captures 10 (not counted)
    up.visited("s", 300.0, 310.0)  # captures 200: lag 110
    total = up.figures().total
    assert (total.visits, total.changes, total.censored) == (1, 2, 1)
    assert total.mean_lag_s == pytest.approx((110 + (1000 - 900)) / 2)
    assert total.p95_lag_s == 110.0


def test_a_hinted_change_measures_the_wait_from_its_hint() -> None:
    up = _upstream([100.0, 500.0], hinted=True, delay=30.0)
    up.visited("s", 110.0, 150.0)  # started before the hint (130): no hint figure
    up.visited("s", 545.0, 600.0)  # hint at 530: waited 15, captured 70 after it
    hints = up.figures().hints
    assert hints.changes == 1
    assert hints.max_wait_s == pytest.approx(15.0)
    assert hints.max_lag_s == pytest.approx(70.0)


class _Host:
    """Records what the upstream asks of the simulator."""

    def __init__(self) -> None:
        self.events: list[tuple[float, int, Any, Any]] = []
        self.modified: list[tuple[str, float, float]] = []

    def schedule_event(self, t: float, kind: int, payload: Any, extra: Any = None) -> None:
        self.events.append((t, kind, payload, extra))

    def upstream_modified(self, name: str, modified: float, now: float) -> None:
        self.modified.append((name, modified, now))


def test_hints_arrive_one_after_another_delay_after_each_change() -> None:
    up = _upstream([100.0, 500.0], hinted=True, delay=30.0)
    host = _Host()
    up.attach(host)  # type: ignore[arg-type]
    while host.events:
        t, kind, payload, extra = host.events.pop(0)
        assert kind == CALL
        payload(t, extra)
    assert host.modified == [("s", 100.0, 130.0), ("s", 500.0, 530.0)]
