"""The bound with run-time variance priced (celery_dgs/sim/variance_bound.py):
its closed form against sampling, the fluid bound when runs do not vary, and
simulated policies at or above it."""

from __future__ import annotations

import math
import random

import pytest

from celery_dgs.sim.bound import error_bound_s
from celery_dgs.sim.generate import GeneratorOptions, generate
from celery_dgs.sim.loop import simulate
from celery_dgs.sim.variance_bound import cycle_cost, expected_excess, variance_error_bound_s

DAY = 86400.0


def fleet(load: float, sigma: float, seed: int = 3) -> object:
    return generate(
        GeneratorOptions(
            schedules=200,
            slots=4,
            load=load,
            horizon_s=2 * DAY,
            warmup_s=DAY,
            duration_sigma=sigma,
            cooldown_fraction=0.5,
            seed=seed,
        )
    )


@pytest.mark.parametrize(
    ("mean", "sigma", "k"), [(100.0, 0.5, 150.0), (100.0, 1.0, 80.0), (10.0, 0.3, 12.0)]
)
def test_the_expected_excess_is_what_sampling_gives(mean: float, sigma: float, k: float) -> None:
    rng = random.Random(7)
    mu = math.log(mean) - sigma * sigma / 2  # as the simulator draws run times
    draws = [rng.lognormvariate(mu, sigma) for _ in range(200_000)]
    sampled = sum(max(d - k, 0.0) for d in draws) / len(draws)
    assert expected_excess(mean, sigma, k) == pytest.approx(sampled, rel=0.03)


def test_the_expected_excess_at_the_edges() -> None:
    assert expected_excess(100.0, 0.5, -20.0) == 120.0  # k <= 0: the whole run and more
    assert expected_excess(100.0, 0.0, 80.0) == 20.0
    assert expected_excess(100.0, 0.0, 120.0) == 0.0


def test_a_schedule_never_costs_more_than_being_left_in_error() -> None:
    assert cycle_cost(1000.0, 100.0, 0.5, price=1e6) == 1.0
    assert cycle_cost(1000.0, 1200.0, 0.0, price=0.0) == 1.0  # a run longer than the period
    # Cheap slots: a small cost, and more for runs that vary more.
    low, high = cycle_cost(1000.0, 100.0, 0.3, 0.01), cycle_cost(1000.0, 100.0, 1.0, 0.01)
    assert 0 < low < high < 1


@pytest.mark.parametrize("load", [1.0, 1.5])
def test_without_variance_it_is_the_fluid_bound(load: float) -> None:
    workload = fleet(load, 0.0)
    assert variance_error_bound_s(workload) == pytest.approx(error_bound_s(workload), rel=1e-3)


def test_near_capacity_variance_raises_it_above_the_fluid_bound() -> None:
    calm, wide = fleet(0.95, 0.3), fleet(0.95, 0.8)
    assert error_bound_s(wide) == 0
    assert 0 < variance_error_bound_s(calm) < variance_error_bound_s(wide)


@pytest.mark.parametrize(("load", "sigma"), [(0.95, 0.8), (1.0, 0.5)])
def test_simulated_policies_stay_at_or_above_it(load: float, sigma: float) -> None:
    workload = fleet(load, sigma)
    bound = variance_error_bound_s(workload)
    for policy in ("dgs", "beat", "fifo"):
        # a long-run bound: over a finite window a few per cent below it is chance
        assert simulate(workload, policy).error_s >= 0.95 * bound, policy
