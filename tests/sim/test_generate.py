"""The generator's capacity shares: equal by default, mixed with ``share_spread``."""

from __future__ import annotations

import pytest

from celery_dgs.sim.generate import GeneratorOptions, generate
from celery_dgs.sim.workload import WorkloadError


def shares(spread: float) -> list[float]:
    workload = generate(
        GeneratorOptions(schedules=400, slots=10, load=1.5, seed=3, share_spread=spread)
    )
    return [s.duration_s / s.spec.scheduling_period.total_seconds() for s in workload.schedules]


def test_equal_shares_by_default_mixed_with_a_spread_same_total_demand() -> None:
    equal, mixed = shares(1.0), shares(4.0)
    assert max(equal) == pytest.approx(min(equal)) == pytest.approx(1.5 * 10 / 400)
    assert sum(mixed) == pytest.approx(sum(equal)) == pytest.approx(15.0)
    assert max(mixed) / min(mixed) > 10  # up to 16-fold
    assert max(mixed) / min(mixed) <= 16 + 1e-9
    periods = [s.spec.scheduling_period for s in generate(GeneratorOptions(seed=3)).schedules]
    assert periods == [
        s.spec.scheduling_period
        for s in generate(GeneratorOptions(seed=3, share_spread=4.0)).schedules
    ]


def test_a_spread_below_one_is_refused() -> None:
    with pytest.raises(WorkloadError, match="share spread"):
        generate(GeneratorOptions(share_spread=0.5))
