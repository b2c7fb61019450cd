"""Look-ahead admission on long+short fleets: ``python -m benchmarks.lookahead``.

Generated fleets (``GeneratorOptions.long_fraction``): ``--schedules`` short
jobs on ``--slots`` slots (periods 10-60 min, run times sigma 0.3, cooldown half
the period) and long jobs carrying 15 % of the demand, 100-1000 times the
short ones' mean run time, each a tenth of a slot (default cooldown rule).
For each load and seed: ``dgs-nolookahead`` (beat's order with
``dgs_lookahead = False``) and ``dgs`` (beat's default, the look-ahead
admission on), ERROR-seconds after the
warm-up (40 % of the horizon) of the short and the long jobs, the ratio to
the long-run bound (``celery_dgs/sim/bound.py``) and to the bound with
run-time variance priced (``celery_dgs/sim/variance_bound.py``), the worst
staleness in periods. ``--long-pool-slots K`` puts the long jobs in a pool that only a
worker of K slots takes (it also runs the short jobs): at most K long runs at
once. ``--json`` writes the rows.
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from dataclasses import replace
from typing import Any

from celery_dgs.sim.bound import error_bound_s
from celery_dgs.sim.generate import GeneratorOptions, generate
from celery_dgs.sim.variance_bound import variance_error_bound_s
from celery_dgs.sim.workload import SimWorker, Workload

from .variants import simulator

DAY = 86400.0
POLICIES = ("dgs-nolookahead", "dgs")
LONG_POOL = "long"


def capped_long_pool(workload: Workload, long_slots: int) -> Workload:
    """The long jobs in their own pool, ``long``, taken by a worker
    of ``long_slots`` slots that also runs the other jobs; the rest of the
    slots take the default queue only. At most ``long_slots`` long runs at once."""
    if not 0 < long_slots < workload.slots:
        raise ValueError(f"--long-pool-slots must be in 1..{workload.slots - 1}, got {long_slots}")
    schedules = [
        replace(s, spec=replace(s.spec, pool=LONG_POOL)) if s.spec.task == "sim.long" else s
        for s in workload.schedules
    ]
    default = next(iter(workload.workers[0].queues))
    workers = [
        SimWorker("celery@long", "long", long_slots, frozenset({default, LONG_POOL})),
        SimWorker("celery@short", "short", workload.slots - long_slots, frozenset({default})),
    ]
    return replace(workload, schedules=schedules, workers=workers)


def run_one(
    policy: str,
    load: float,
    seed: int,
    schedules: int,
    slots: int,
    days: float,
    long_pool_slots: int = 0,
) -> dict[str, Any]:
    opts = GeneratorOptions(
        schedules=schedules,
        slots=slots,
        load=load,
        period_min_s=600,
        period_max_s=3600,
        horizon_s=days * DAY,
        warmup_s=0.4 * days * DAY,
        duration_sigma=0.3,
        cooldown_fraction=0.5,
        seed=seed,
        long_fraction=0.15,
        long_share=0.1,
    )
    workload = generate(opts)
    if long_pool_slots:
        workload = capped_long_pool(workload, long_pool_slots)
    start = time.perf_counter()
    sim = simulator(workload, policy)
    # Classes only label the accounting here (every schedule has one priority).
    sim.tally.class_of = {s.name: int(s.spec.task == "sim.long") for s in workload.schedules}
    result = sim.run()
    bound = error_bound_s(workload)
    priced = variance_error_bound_s(workload)
    by_class = sim.tally.error_by_class
    stale = sim.tally.stale_by_class
    return {
        "policy": policy,
        "load": load,
        "seed": seed,
        "schedules": schedules,
        "slots": slots,
        "days": days,
        "long_pool_slots": long_pool_slots,
        "error_s": result.error_s,
        "short_error_s": by_class.get(0, 0.0),
        "long_error_s": by_class.get(1, 0.0),
        "bound_s": bound,
        "ratio": result.error_s / bound if bound > 0 else None,
        "variance_bound_s": priced,
        "variance_ratio": result.error_s / priced if priced > 0 else None,
        "short_max_stale": stale.get(0, 0.0),
        "long_max_stale": stale.get(1, 0.0),
        "in_error": result.schedules_in_error,
        "wall_s": round(time.perf_counter() - start, 1),
    }


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--loads", default="0.7,0.9,1.0,1.2,1.5")
    parser.add_argument("--seeds", default="1,2")
    parser.add_argument("--policies", default=",".join(POLICIES))
    parser.add_argument("--schedules", type=int, default=500)
    parser.add_argument("--slots", type=int, default=10)
    parser.add_argument("--days", type=float, default=6.0)
    parser.add_argument(
        "--long-pool-slots",
        type=int,
        default=0,
        help="the long jobs in a pool of this many slots (0: no pool)",
    )
    parser.add_argument("--json", default=None)
    args = parser.parse_args(argv)
    rows = []
    for load in (float(x) for x in args.loads.split(",")):
        for seed in (int(x) for x in args.seeds.split(",")):
            for policy in args.policies.split(","):
                row = run_one(
                    policy, load, seed, args.schedules, args.slots, args.days, args.long_pool_slots
                )
                rows.append(row)
                ratio = "-" if row["ratio"] is None else f"{row['ratio']:.2f}"
                priced = "-" if row["variance_ratio"] is None else f"{row['variance_ratio']:.2f}"
                print(
                    f"{policy:14} load {load:4} seed {seed}: ERROR {row['error_s']:12,.0f} s "
                    f"(short {row['short_error_s']:,.0f}, long {row['long_error_s']:,.0f}) "
                    f"bound {row['bound_s']:,.0f} ratio {ratio} (variance-aware "
                    f"{row['variance_bound_s']:,.0f}, {priced}) max stale "
                    f"{row['short_max_stale']:.2f}/{row['long_max_stale']:.2f} "
                    f"({row['wall_s']} s)",
                    flush=True,
                )
                if args.json:
                    with open(args.json, "w") as f:
                        json.dump(rows, f, indent=1)


if __name__ == "__main__":
    main(sys.argv[1:])
