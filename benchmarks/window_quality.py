"""Beat's window of schedules in the simulator: ``python -m benchmarks.window_quality``.

On :mod:`benchmarks.quality`'s fleets (each load, the outage, the mixed
shares, seed 000's example; synthetic and realistic mixes), ``dgs`` runs
twice with the same order: holding the whole fleet (the baseline, in the
same run) and with a window of ``--share`` of the fleet (``dgs_schedule_window_size``;
``--horizon`` ahead), through the window code beat runs
(:mod:`celery_dgs.core.window`, :mod:`celery_dgs.sim.window`). Four orders:
beat's default (the certainty rule reading on up to 10 window sizes,
``dgs_schedule_window_read_on``'s default), the same with the window's picks
not checked (read-on 0) and with the rule reading on as far as it needs
(``None``), and the deadline order (``greedy``, no laxity floor, no
look-ahead), the order the window cuts the store by.

Goal: ERROR-seconds within 1 % of the whole fleet's on every fleet.
"""

from __future__ import annotations

import argparse
import sys
from dataclasses import replace

from celery_dgs.core.ranking import OrderPolicy
from celery_dgs.sim.loop import Simulator

from .common import log
from .quality import scenarios, workload_of

GOAL_RATIO = 0.01
ORDERS = {
    "default": OrderPolicy(),
    "default, no check": OrderPolicy(window_read_on=0.0),
    "default, read on as needed": OrderPolicy(window_read_on=None),
    "deadline": OrderPolicy(overload="greedy", laxity_floor_s=None, lookahead=False),
}


def row(
    label: str, order_name: str, whole: float, windowed: float, most_held: int
) -> tuple[str, bool]:
    ratio = windowed / whole if whole else (1.0 if windowed == whole else float("inf"))
    met = abs(ratio - 1) <= GOAL_RATIO
    text = (
        f"| {label} | {order_name} | {whole:,.0f} | {windowed:,.0f} | {ratio:.4f} | "
        f"{'met' if met else 'not met'} | {most_held} |"
    )
    return text, met


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m benchmarks.window_quality", description=__doc__
    )
    parser.add_argument("--quick", action="store_true", help="300 schedules, 6 slots")
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument("--share", type=float, default=0.05, help="the window, of the fleet")
    parser.add_argument("--horizon", type=float, default=3600.0, help="seconds ahead")
    parser.add_argument("--mixes", nargs="+", default=["synthetic", "realistic"])
    parser.add_argument("--labels", nargs="*", help="only these fleets")
    parser.add_argument(
        "--read-on",
        type=float,
        nargs="*",
        default=[3.0],
        help="beat's default order also with the rule reading on this far (window sizes)",
    )
    parser.add_argument("--orders", nargs="*", help="only these orders (names as printed)")
    args = parser.parse_args(sys.argv[1:] if argv is None else argv)
    orders = dict(ORDERS)
    for read_on in args.read_on:
        orders[f"default, read on {read_on:g}"] = OrderPolicy(window_read_on=read_on)
    if args.orders:
        orders = {name: order for name, order in orders.items() if name in args.orders}
    lines, met_all = [], True
    for mix in args.mixes:
        for scenario in scenarios(args.quick, args.seed):
            if args.labels and scenario.label not in args.labels:
                continue
            workload = workload_of(scenario, mix)
            size = max(1, round(len(workload.schedules) * args.share))
            wholes: dict[OrderPolicy, float] = {}  # the read-on changes nothing without a window
            for order_name, order in orders.items():
                plain = replace(order, window_read_on=None)
                if plain not in wholes:
                    wholes[plain] = Simulator(workload, "dgs", order=order).run().error_s
                whole = wholes[plain]
                window = replace(order, window_size=size, window_s=args.horizon)
                sim = Simulator(workload, "dgs", order=window)
                windowed = sim.run()
                label = f"{mix} {scenario.label}, window {size}"
                most_held = sim.policy.window.most_held  # type: ignore[attr-defined]
                text, met = row(label, order_name, whole, windowed.error_s, most_held)
                met_all = met_all and met
                log(text)
                lines.append(text)
    print(
        "| fleet | order | ERROR s, whole fleet (baseline) | with the window | ratio | ±1 % "
        "| most held |"
    )
    print("|---|---|---|---|---|---|---|")
    print("\n".join(lines))
    print(f"goal, ERROR-seconds within 1 % on every fleet: {'met' if met_all else 'not met'}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
