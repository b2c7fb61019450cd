"""Adaptive revisit against fixed periods: ``python -m benchmarks.revisit [--quick]``.

Sources change as Poisson processes of their own rate (10 % hourly, 30 %
daily, 40 % monthly, 20 % never: ``celery_dgs/sim/revisit.py``); each is
visited by an adaptive schedule (beat's ``dgs`` policy, the store's run-end
rule moving the ladder) and, for the baseline, by a periodic schedule of the
one fixed period that spends the same number of visits on the same slots
(:func:`~celery_dgs.sim.revisit.matched_fixed`). For each interval unit
(``--unit``, hours; default 36, the spec's default, and 24 and 48 beside it)
it prints visits, useless visits (found no change), visits to dead sources,
and the lag from a change to the end of the visit that captured it (mean,
p95, over the changes after warm-up), then the figures per rate class and a
run with ``--hint-fraction`` of the sources hinted ``--hint-delay`` seconds
after each change. Checks the goals: adaptive cuts the mean lag >= 2x and
the useless visits >= 50 % against its fixed baseline; a hinted change is
visited without waiting for the ladder (hint to visit start: p95 within one
dispatch round of beat, its 2 s store poll), so its lag from the hint is one
round plus the run time.

Then seed 001's revisit groups against today's order (``dgs_adaptive_group_shares
= None``) under a backlog: a fleet of its own on too few slots (more eligible
adaptive schedules than slots at every moment), half of it hinted, with a
tenth more sources listed during the window. It prints, for both orders, the
visits, useless visits and lag of the listed-before sources, and for the new
ones the lag from listing to their first visit's end and the dispatch rounds
they waited. Goals: every new source visited in the first round after its
listing; the others' useless visits and mean lag not worse than today's
(within :data:`NOISE`).

``--quick``: 600 sources, 20 days (7 warm-up), unit 36 h only, and a backlog
fleet of 300: seconds. Deterministic for a seed.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time
from dataclasses import asdict, replace
from pathlib import Path

from celery_dgs.core.ranking import OrderPolicy
from celery_dgs.core.revisit_groups import DEFAULT_GROUP_SHARES
from celery_dgs.settings import DEFAULT_STORE_POLL_INTERVAL_S
from celery_dgs.sim.revisit import (
    DAY,
    HOUR,
    RevisitOptions,
    RevisitResult,
    format_s,
    matched_fixed,
    simulate_revisit,
    sources,
)
from celery_dgs.sim.upstream import GroupFigures

#: The hint to visit start wait allowed for a hinted change: one dispatch
#: round of beat, which sees a hint within its store poll (``dgs_store_poll_interval``,
#: 2 s by default). The simulator's own rounds take no simulated time.
DISPATCH_ROUND_S = DEFAULT_STORE_POLL_INTERVAL_S
LAG_GOAL = 2.0
USELESS_GOAL = 0.5
#: The groups against today's order: "not worse" allows this relative margin
#: (the spread between seeds of one order's figures is about 1 %).
NOISE = 0.02


def full_options(seed: int) -> RevisitOptions:
    return RevisitOptions(
        sources=10_000, slots=20, horizon_s=60 * DAY, warmup_s=14 * DAY, seed=seed
    )


def quick_options(seed: int) -> RevisitOptions:
    return RevisitOptions(sources=600, slots=4, horizon_s=20 * DAY, warmup_s=7 * DAY, seed=seed)


def backlog_options(seed: int, quick: bool) -> RevisitOptions:
    """The groups' fleet: visits of 300 s on too few slots, half of the
    sources hinted 600 s after each change, a tenth more listed in the window."""
    if quick:
        return RevisitOptions(
            sources=300,
            slots=1,
            duration_s=300.0,
            horizon_s=15 * DAY,
            warmup_s=5 * DAY,
            hint_fraction=0.5,
            new_sources=30,
            seed=seed,
        )
    return RevisitOptions(
        sources=3000,
        slots=4,
        duration_s=300.0,
        horizon_s=30 * DAY,
        warmup_s=7 * DAY,
        hint_fraction=0.5,
        new_sources=300,
        seed=seed,
    )


def _h(seconds: float) -> str:
    return f"{seconds / HOUR:.2f}"


def row(unit: str, r: RevisitResult) -> str:
    t = r.upstream.total
    return (
        f"| {unit} | {r.label} | {r.visits:,} | {100 * t.useless_fraction:.1f} % | "
        f"{r.upstream.dead_visits:,} | {_h(t.mean_lag_s)} | {_h(t.p95_lag_s)} | "
        f"{t.censored:,} | {100 * r.sim.utilization:.1f} % | {r.sim.wall_s:.1f} |"
    )


HEADER = (
    "| unit | schedule | visits | useless | dead visits | mean lag h | p95 lag h | "
    "censored | util | wall s |\n|---|---|---|---|---|---|---|---|---|---|"
)


def class_rows(adaptive: RevisitResult, fixed: RevisitResult) -> list[str]:
    lines = [
        "| class | sources | visits (adaptive / fixed) | useless | mean lag h | p95 lag h |",
        "|---|---|---|---|---|---|",
    ]
    for group, a in adaptive.upstream.groups.items():
        f = fixed.upstream.groups[group]
        lag = f"{_h(a.mean_lag_s)} / {_h(f.mean_lag_s)}" if a.changes else "-"
        p95 = f"{_h(a.p95_lag_s)} / {_h(f.p95_lag_s)}" if a.changes else "-"
        lines.append(
            f"| {group} | {a.sources:,} | {a.visits:,} / {f.visits:,} | "
            f"{100 * a.useless_fraction:.0f} % / {100 * f.useless_fraction:.0f} % | "
            f"{lag} | {p95} |"
        )
    return lines


def goals(unit: str, adaptive: RevisitResult, fixed: RevisitResult) -> list[str]:
    a, f = adaptive.upstream.total, fixed.upstream.total
    ratio = f.mean_lag_s / a.mean_lag_s if a.mean_lag_s else float("inf")
    cut = 1 - a.useless_fraction / f.useless_fraction if f.useless_fraction else 0.0
    return [
        f"unit {unit}: mean lag {_h(a.mean_lag_s)} h vs fixed {_h(f.mean_lag_s)} h: "
        f"{ratio:.2f}x (goal >= {LAG_GOAL:g}x): {'met' if ratio >= LAG_GOAL else 'NOT met'}",
        f"unit {unit}: useless visits {100 * a.useless_fraction:.1f} % vs fixed "
        f"{100 * f.useless_fraction:.1f} % at {adaptive.visits:,} / {fixed.visits:,} visits: "
        f"cut {100 * cut:.1f} % (goal >= {100 * USELESS_GOAL:g} %): "
        f"{'met' if cut >= USELESS_GOAL else 'NOT met'}",
    ]


def hint_lines(opts: RevisitOptions, r: RevisitResult) -> list[str]:
    h = r.upstream.hints
    ok = h.changes > 0 and h.p95_wait_s <= DISPATCH_ROUND_S
    return [
        f"hints ({100 * opts.hint_fraction:g} % of sources, {opts.hint_delay_s:g} s after each "
        f"change): {h.changes:,} hinted changes captured after their hint; hint to visit start "
        f"mean {h.mean_wait_s:.2f} s, p95 {h.p95_wait_s:.1f} s, max {h.max_wait_s:.1f} s; hint "
        f"to capture (the run's end) mean {h.mean_lag_s:.0f} s, p95 {h.p95_lag_s:.0f} s, max "
        f"{h.max_lag_s:.0f} s (runs: mean {opts.duration_s:g} s, lognormal sigma "
        f"{opts.duration_sigma:g})",
        f"hinted lag <= one dispatch round + run time (p95 wait <= {DISPATCH_ROUND_S:g} s): "
        f"{'met' if ok else 'NOT met'}",
    ]


def _others(r: RevisitResult) -> GroupFigures:
    return r.upstream.total


BACKLOG_HEADER = (
    "| order | visits | useless | mean lag h | p95 lag h | new: rounds waited 0 | "
    "new: max rounds | new: mean lag h | new: p95 lag h | hint wait p95 s | util |\n"
    "|---|---|---|---|---|---|---|---|---|---|---|"
)


def backlog_row(label: str, r: RevisitResult) -> str:
    t, new, waited = r.upstream.total, r.upstream.new, r.new_rounds
    on_time = sum(w == 0 for w in waited)
    return (
        f"| {label} | {r.visits:,} | {100 * t.useless_fraction:.1f} % | {_h(t.mean_lag_s)} | "
        f"{_h(t.p95_lag_s)} | {on_time} / {new.sources} | {max(waited, default=0)} | "
        f"{_h(new.mean_lag_s)} | {_h(new.p95_lag_s)} | {r.upstream.hints.p95_wait_s:.0f} | "
        f"{100 * r.sim.utilization:.1f} % |"
    )


def backlog_goals(groups: RevisitResult, today: RevisitResult) -> list[str]:
    g, t = groups.upstream.total, today.upstream.total
    waited, new = groups.new_rounds, groups.upstream.new
    first = bool(waited) and max(waited) == 0 and new.censored == 0
    useless = g.useless_fraction <= t.useless_fraction * (1 + NOISE)
    lag = g.mean_lag_s <= t.mean_lag_s * (1 + NOISE)
    return [
        f"backlog: every new source visited in the first round after its listing "
        f"({sum(w == 0 for w in waited)} of {new.sources}; today's order: "
        f"{sum(w == 0 for w in today.new_rounds)}): {'met' if first else 'NOT met'}",
        f"backlog: useless visits {100 * g.useless_fraction:.1f} % vs today's "
        f"{100 * t.useless_fraction:.1f} % (not worse, {100 * NOISE:g} % noise): "
        f"{'met' if useless else 'NOT met'}",
        f"backlog: mean lag {_h(g.mean_lag_s)} h vs today's {_h(t.mean_lag_s)} h (not worse, "
        f"{100 * NOISE:g} % noise): {'met' if lag else 'NOT met'}",
    ]


def run_backlog(opts: RevisitOptions) -> tuple[list[str], list[str], dict[str, object]]:
    """The groups against today's order on the backlog fleet: table lines,
    goal lines and the figures."""
    srcs = sources(opts)
    groups = simulate_revisit(opts, srcs=srcs)
    today = simulate_revisit(opts, srcs=srcs, order=OrderPolicy(group_shares=None))
    lines = [
        f"\nrevisit groups under a backlog: {opts.sources:,} sources + {opts.new_sources:,} "
        f"listed in the window, {100 * opts.hint_fraction:g} % hinted, {opts.slots} slots, "
        f"visits {opts.duration_s:g} s, {opts.horizon_s / DAY:g} days ({opts.warmup_s / DAY:g} "
        f"warm-up), unit {format_s(opts.interval_unit_s)}:",
        BACKLOG_HEADER,
        backlog_row(f"groups {DEFAULT_GROUP_SHARES.describe()}", groups),
        backlog_row("today's order", today),
    ]
    figures: dict[str, object] = {"groups": asdict(groups), "today": asdict(today)}
    return lines, backlog_goals(groups, today), figures


def parse_args(argv: list[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(
        prog="python -m benchmarks.revisit",
        description=__doc__,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    parser.add_argument("--quick", action="store_true", help="600 sources, 20 days, unit 36 h")
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument("--sources", type=int, help="default 10,000 (quick: 600)")
    parser.add_argument("--slots", type=int, help="default 20 (quick: 4)")
    parser.add_argument("--days", type=float, help="simulated days (default 60; quick: 20)")
    parser.add_argument("--warmup-days", type=float, help="not measured (default 14; quick: 7)")
    parser.add_argument(
        "--unit",
        type=float,
        action="append",
        help="interval unit in hours, repeatable (default 36 24 48; quick: 36)",
    )
    parser.add_argument("--hint-fraction", type=float, default=0.5)
    parser.add_argument("--hint-delay", type=float, default=600.0, help="seconds")
    parser.add_argument(
        "--no-backlog", action="store_true", help="skip the groups against today's order"
    )
    parser.add_argument("--json", type=Path, help="also write the figures here")
    return parser.parse_args(argv)


def options(args: argparse.Namespace) -> RevisitOptions:
    """The main fleet's options: the full or quick ones, with the arguments' changes."""
    opts = quick_options(args.seed) if args.quick else full_options(args.seed)
    changes: dict[str, object] = {}
    if args.sources is not None:
        changes["sources"] = args.sources
    if args.slots is not None:
        changes["slots"] = args.slots
    if args.days is not None:
        changes["horizon_s"] = args.days * DAY
    if args.warmup_days is not None:
        changes["warmup_s"] = args.warmup_days * DAY
    return replace(opts, **changes)  # type: ignore[arg-type]


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    opts = options(args)
    units = args.unit or ([36.0] if args.quick else [36.0, 24.0, 48.0])
    started = time.perf_counter()
    print(
        f"celery-dgs adaptive revisit: {opts.sources:,} sources "
        f"({', '.join(f'{100 * c.share:g} % {c.label}' for c in opts.classes)}), "
        f"{opts.slots} slots, visits {opts.duration_s:g} s (lognormal sigma "
        f"{opts.duration_sigma:g}), {opts.horizon_s / DAY:g} simulated days of which the first "
        f"{opts.warmup_s / DAY:g} are warm-up, seed {opts.seed}; policy dgs; {os.cpu_count()} "
        f"CPUs",
        flush=True,
    )
    rows, goal_lines = [HEADER], []
    classes: list[str] = []
    out: list[dict[str, object]] = []
    for hours in units:
        unit = format_s(hours * HOUR)
        o = replace(opts, interval_unit_s=hours * HOUR)
        srcs = sources(o)
        adaptive = simulate_revisit(o, srcs=srcs)
        print(
            f"  unit {unit}: adaptive done ({adaptive.sim.wall_s:.1f} s)",
            file=sys.stderr,
            flush=True,
        )
        fixed = matched_fixed(o, adaptive.visits, srcs=srcs)
        print(f"  unit {unit}: {fixed.label} done", file=sys.stderr, flush=True)
        rows += [row(unit, adaptive), row(unit, fixed)]
        goal_lines += goals(unit, adaptive, fixed)
        if not classes:
            classes = [
                f"\nper class, unit {unit} (adaptive / {fixed.label}):",
                *class_rows(adaptive, fixed),
            ]
        out += [{"unit_s": hours * HOUR, "adaptive": asdict(adaptive), "fixed": asdict(fixed)}]
    o = replace(
        opts,
        interval_unit_s=units[0] * HOUR,
        hint_fraction=args.hint_fraction,
        hint_delay_s=args.hint_delay,
    )
    hinted = simulate_revisit(o)
    rows.append(
        row(
            f"{format_s(units[0] * HOUR)}",
            replace(hinted, label=f"adaptive, {100 * o.hint_fraction:g} % hinted"),
        )
    )
    goal_lines += hint_lines(o, hinted)
    backlog_lines: list[str] = []
    backlog: dict[str, object] = {}
    if not args.no_backlog:
        backlog_lines, more_goals, backlog = run_backlog(backlog_options(args.seed, args.quick))
        goal_lines += more_goals
    print("\n".join(["", *rows, *classes, *backlog_lines, "", *goal_lines]))
    print(f"\nelapsed {time.perf_counter() - started:.0f} s")
    if args.json:
        args.json.write_text(
            json.dumps(
                {"runs": out, "hinted": asdict(hinted), "backlog": backlog, "goals": goal_lines},
                indent=2,
                default=str,
            )
        )
        print(f"written: {args.json}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
