"""benchmarks/lookahead.py: the long jobs in a capped pool, on a small fleet."""

from __future__ import annotations

import pytest

from benchmarks import lookahead


def test_a_pool_of_k_slots_caps_the_long_runs_and_lowers_the_short_jobs_error() -> None:
    # Without the look-ahead admission: the pool alone caps the long runs.
    plain = lookahead.run_one("dgs-nolookahead", 0.9, 1, schedules=150, slots=6, days=1.0)
    capped = lookahead.run_one(
        "dgs-nolookahead", 0.9, 1, schedules=150, slots=6, days=1.0, long_pool_slots=1
    )
    assert capped["long_pool_slots"] == 1
    assert capped["short_error_s"] < plain["short_error_s"], (plain, capped)
    # both bounds are printed; run-time variance only raises the bound
    assert plain["variance_bound_s"] >= plain["bound_s"]


def test_the_pool_keeps_every_slot_and_runs_long_jobs_only_on_its_worker() -> None:
    from celery_dgs.sim.generate import GeneratorOptions, generate

    workload = generate(
        GeneratorOptions(
            schedules=50, slots=4, load=0.9, long_fraction=0.15, long_share=0.1, seed=1
        )
    )
    capped = lookahead.capped_long_pool(workload, 1)
    assert capped.slots == workload.slots
    longs = [s for s in capped.schedules if s.spec.task == "sim.long"]
    assert longs
    assert all(s.spec.pool == lookahead.LONG_POOL for s in longs)
    assert [w.slots for w in capped.workers if lookahead.LONG_POOL in w.queues] == [1]
    with pytest.raises(ValueError, match="--long-pool-slots"):
        lookahead.capped_long_pool(workload, 4)
