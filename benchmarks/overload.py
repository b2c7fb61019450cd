"""What to give up under overload: ``python -m benchmarks.overload [--seeds 1,2,3]``.

Runs beat's default order (``dgs``: ``dgs_overload = "fair"``) and
``dgs_overload = "fewest_errors"`` (``dgs-fewest``, at each ``--floors``
periods; ``celery_dgs/core/fewest_errors.py``) on the quality benchmark's
fleets (``benchmarks/quality.py``, ``--quick`` sizes: 300 schedules on 6
slots, 4 days of which 2 warm-up) at loads 0.9-2.0, with equal and with
mixed shares (a schedule's run time / period varies 16-fold). Prints, per
seed, the ERROR-seconds, the ratio to the long-run bound (the least ERROR any
scheduler can reach, ``celery_dgs/sim/bound.py``) and the worst staleness in
periods (runs that failed left out), and checks the goals per seed:
``fewest_errors`` at load 1.1-2.0 with mixed shares within 1.2 x the bound,
no schedule staler than its floor (plus one period: the run that ends it and
the wait for a slot among the others at the floor), and at load 0.9 (not
overloaded) the same figures as ``fair``.
"""

from __future__ import annotations

import argparse
import sys
from dataclasses import replace

from celery_dgs.core.ranking import OrderPolicy
from celery_dgs.sim.bound import error_bound_s
from celery_dgs.sim.generate import generate
from celery_dgs.sim.loop import Simulator

from .quality import scenarios

LABELS = (
    *("load 0.9", "mixed 0.9", "load 1.1", "load 1.5", "load 2.0"),
    *("mixed 1.1", "mixed 1.5", "mixed 2.0"),
)
#: The goal's loads: mixed shares under overload.
GOAL_LABELS = ("mixed 1.1", "mixed 1.5", "mixed 2.0")
GOAL_RATIO = 1.2


def run(label: str, seed: int, floors: list[float]) -> list[str]:
    """The rows of one scenario and seed, and the goals it misses."""
    scenario = next(s for s in scenarios(True, seed) if s.label == label)
    workload = generate(scenario.options)
    bound = error_bound_s(workload)
    fair = Simulator(workload, "dgs").run()
    misses: list[str] = []
    print(
        f"{label:10} seed {seed}  fair           ERROR {fair.error_s / 1e6:7.2f} M  "
        f"/ bound {fair.error_s / bound if bound else 0:5.2f}  "
        f"worst stale {fair.max_staleness_without_failures:5.2f}",
        flush=True,
    )
    for floor in floors:
        order = replace(OrderPolicy(), goal="fewest_errors", floor_periods=floor)
        result = Simulator(workload, "dgs", order=order).run()
        ratio = result.error_s / bound if bound else 0.0
        stale = result.max_staleness_without_failures
        print(
            f"{label:10} seed {seed}  fewest floor {floor:<3g} "
            f"ERROR {result.error_s / 1e6:7.2f} M  "
            f"/ bound {ratio:5.2f}  worst stale {stale:5.2f}",
            flush=True,
        )
        if stale > floor + 1:
            misses.append(f"{label} seed {seed} floor {floor:g}: staleness {stale:.2f}")
        if label in GOAL_LABELS and ratio > GOAL_RATIO:
            misses.append(f"{label} seed {seed} floor {floor:g}: {ratio:.2f} x the bound")
        if label.endswith(" 0.9") and result.error_s != fair.error_s:
            misses.append(f"{label} seed {seed} floor {floor:g}: not overloaded, yet changed")
    return misses


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--seeds", default="1,2,3")
    parser.add_argument("--floors", default="5", help="floors of service, periods")
    parser.add_argument("--labels", default=",".join(LABELS))
    args = parser.parse_args(argv)
    floors = [float(x) for x in args.floors.split(",")]
    misses: list[str] = []
    for label in args.labels.split(","):
        for seed in (int(x) for x in args.seeds.split(",")):
            misses += run(label, seed, floors)
    print("goals: " + ("met" if not misses else "NOT MET:\n  " + "\n  ".join(misses)))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
