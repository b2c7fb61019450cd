"""The checker's allowance after a forward step of the Redis server's clock
(rule 2): a take-over the step made possible may overlap the old run for one
ping interval plus the stolen grace, no more, and only soon after the step.

Pure logic: hand-made histories, as the tasks and the scenario would write them."""

from __future__ import annotations

from tests.faults.checker import check
from tests.faults.test_checker import B, end, fault, start

# B: ping_interval 0.5, slack 0.5 -> allowed overlap 1.25 s; recovery bound 4.0 s.


def step(t: float) -> dict[str, object]:
    return fault(t, "redis_clock_step", [], ("redis",))


def test_an_overlap_within_the_bound_after_a_step_passes() -> None:
    ev = [
        start(0, 1, "a", pid=1),
        step(5.0),
        start(6.0, 2, "b", pid=2, host="n2"),
        end(7.2, "a", "RunTerminated"),
        end(9, "b"),
    ]
    assert B.after_clock_step == 1.25
    report = check(ev, B, now=10)
    assert report.ok, report


def test_an_overlap_past_the_bound_after_a_step_is_a_violation() -> None:
    ev = [
        start(0, 1, "a", pid=1),
        step(5.0),
        start(6.0, 2, "b", pid=2, host="n2"),
        end(7.5, "a", "RunTerminated"),
        end(9, "b"),
    ]
    [violation] = check(ev, B, now=10).violations
    assert "overlapped 1.50s after a step of the Redis clock (allowed 1.25s)" in violation


def test_a_step_does_not_excuse_a_take_over_long_after_it_or_before_it() -> None:
    for t_step in (1.0, 6.5):  # 5 s before b's start (> recovery 4.0 s), or after it
        ev = [
            start(0, 1, "a", pid=1),
            step(t_step),
            start(6.0, 2, "b", pid=2, host="n2"),
            end(6.5, "a", "RunTerminated"),
            end(9, "b"),
        ]
        [violation] = check(ev, B, now=10).violations
        assert "its owner was not paused" in violation, (t_step, violation)
