"""Generated workloads: ``--schedules N --slots K --load L`` (seeded, reproducible).

Periods are log-uniform in ``[period_min, period_max]``; every schedule gets the
same share of capacity, so its mean duration is ``load * slots / N * period``
and the total demand (sum of duration / period) is ``load * slots``. With
``share_spread`` S > 1 the shares are instead log-uniform over a factor S
either way (duration / period from share / S to share * S), scaled so that
the total demand is still ``load * slots``: fleets mix quick checks and
heavy jobs of the same period. The
cooldown is ``cooldown_fraction`` of the period (a schedule is not re-run
sooner), ``failure_rate`` applies to every schedule.

With ``long_fraction`` F > 0 the fleet mixes long jobs into the short ones
(seed 000's weekly 12-hour job among hourly checks): the ``schedules`` short
ones carry ``1 - F`` of the demand, and long jobs carry F of it, each a
share ``long_share`` of a slot (duration / period), their run times
``long_ratio_min``..``long_ratio_max`` times the short ones' mean
(log-uniform), so their periods are run time / ``long_share``; they have the default
cooldown's rule (a fixed half-period cooldown would hold a run that takes a
quarter of its period past its ``should_start_by``). The long
jobs are drawn with their own generator: the short ones are the same
schedules, with their durations scaled by ``1 - F``.
"""

from __future__ import annotations

import math
import random
from dataclasses import dataclass
from datetime import timedelta

from ..core.spec import PeriodicSpec
from ..core.spec_values import DEFAULT_PRIORITY
from .workload import (
    DEFAULT_DURATION_SIGMA,
    DEFAULT_HORIZON_S,
    DEFAULT_SLOTS_PER_WORKER,
    Outage,
    SimSchedule,
    Workload,
    WorkloadError,
    make_workers,
)


@dataclass(frozen=True)
class GeneratorOptions:
    schedules: int = 1000
    slots: int = 20
    load: float = 0.9
    period_min_s: float = 3600.0
    period_max_s: float = 6 * 3600.0
    cooldown_fraction: float = 0.5
    duration_sigma: float = DEFAULT_DURATION_SIGMA
    failure_rate: float = 0.0
    slots_per_worker: int = DEFAULT_SLOTS_PER_WORKER
    horizon_s: float = DEFAULT_HORIZON_S
    warmup_s: float | None = None
    outage_s: float = 0.0  # workers down for this long ...
    outage_at_s: float | None = None  # ... starting here (default: mid-horizon) ...
    outage_workers: float = 1.0  # ... this share of them (the first ones; 1: all)
    seed: int = 0
    share_spread: float = 1.0  # shares log-uniform within this factor either way (1: equal)
    #: (priority, fraction of the schedules) per class; empty: every schedule
    #: has the default priority. Drawn with their own generator, so the rest of
    #: the workload is the same with or without classes.
    priority_classes: tuple[tuple[int, float], ...] = ()
    #: Fraction of the demand in long jobs (0: none; module docstring).
    long_fraction: float = 0.0
    long_ratio_min: float = 100.0
    long_ratio_max: float = 1000.0
    long_share: float = 0.25


def generate(opts: GeneratorOptions) -> Workload:
    if opts.schedules < 1:
        raise WorkloadError(f"--schedules must be >= 1, got {opts.schedules}")
    if not opts.load > 0:
        raise WorkloadError(f"--load must be > 0, got {opts.load}")
    if not 0 < opts.period_min_s <= opts.period_max_s:
        raise WorkloadError("periods: need 0 < period_min <= period_max")
    if not 0 <= opts.cooldown_fraction < 1:
        raise WorkloadError(f"cooldown fraction must be in [0, 1), got {opts.cooldown_fraction}")
    if not opts.share_spread >= 1:
        raise WorkloadError(f"share spread must be >= 1, got {opts.share_spread}")
    if not 0 <= opts.long_fraction < 1:
        raise WorkloadError(f"long fraction must be in [0, 1), got {opts.long_fraction}")
    if not 0 < opts.outage_workers <= 1:
        raise WorkloadError(f"outage workers must be in (0, 1], got {opts.outage_workers}")
    if opts.long_fraction and not (
        0 < opts.long_ratio_min <= opts.long_ratio_max and 0 < opts.long_share < 1
    ):
        raise WorkloadError(
            "long jobs: need 0 < long_ratio_min <= long_ratio_max and 0 < long_share < 1"
        )
    rng = random.Random(opts.seed)
    share = opts.load * opts.slots / opts.schedules * (1.0 - opts.long_fraction)
    lo, hi = math.log(opts.period_min_s), math.log(opts.period_max_s)
    periods = [round(math.exp(rng.uniform(lo, hi))) for _ in range(opts.schedules)]
    factors = [1.0] * opts.schedules
    if opts.share_spread > 1:
        spread = math.log(opts.share_spread)
        factors = [math.exp(rng.uniform(-spread, spread)) for _ in periods]
        norm = opts.schedules / sum(factors)
        factors = [f * norm for f in factors]
    priorities = _priorities(opts)
    schedules = []
    for i, (period, factor) in enumerate(zip(periods, factors, strict=True)):
        spec = PeriodicSpec(
            task="sim.job",
            configuration=f"s{i}",
            scheduling_period=timedelta(seconds=period),
            cooldown_duration=timedelta(seconds=round(period * opts.cooldown_fraction)),
            priority=priorities[i],
        )
        schedules.append(
            SimSchedule(spec, share * factor * period, opts.duration_sigma, opts.failure_rate)
        )
    if opts.long_fraction:
        schedules += _long_jobs(opts, [s.duration_s for s in schedules])
    workers = make_workers(opts.slots, opts.slots_per_worker)
    outages: list[Outage] = []
    if opts.outage_s > 0:
        at = opts.outage_at_s if opts.outage_at_s is not None else opts.horizon_s / 2
        down: frozenset[str] = frozenset()
        if opts.outage_workers < 1:
            count = max(1, round(opts.outage_workers * len(workers)))
            down = frozenset(w.name for w in workers[:count])
        outages.append(Outage(at, at + opts.outage_s, down))
    return Workload(
        schedules,
        workers,
        horizon_s=opts.horizon_s,
        warmup_s=opts.warmup_s,
        outages=outages,
        seed=opts.seed,
    )


def _long_jobs(opts: GeneratorOptions, short_durations: list[float]) -> list[SimSchedule]:
    """The long jobs of a mixed fleet (module docstring), named ``long<i>``."""
    rng = random.Random(opts.seed + 7)
    demand = opts.load * opts.slots * opts.long_fraction
    count = max(1, round(demand / opts.long_share))
    share = demand / count
    mean_short = sum(short_durations) / len(short_durations)
    lo, hi = math.log(opts.long_ratio_min), math.log(opts.long_ratio_max)
    out = []
    for i in range(count):
        duration = mean_short * math.exp(rng.uniform(lo, hi))
        period = round(duration / share)
        spec = PeriodicSpec(
            task="sim.long",
            configuration=f"long{i}",
            scheduling_period=timedelta(seconds=period),
            cooldown_duration=timedelta(seconds=round(period * opts.cooldown_fraction)),
            default_cooldown=True,
        )
        out.append(SimSchedule(spec, share * period, opts.duration_sigma, opts.failure_rate))
    return out


def _priorities(opts: GeneratorOptions) -> list[int]:
    """Each schedule's priority: the classes' fractions of the schedules, in a
    seeded random order (every schedule ``DEFAULT_PRIORITY`` without classes)."""
    if not opts.priority_classes:
        return [DEFAULT_PRIORITY] * opts.schedules
    total = sum(fraction for _, fraction in opts.priority_classes)
    if not total > 0:
        raise WorkloadError("priority classes: the fractions must add up to more than 0")
    out: list[int] = []
    for priority, fraction in opts.priority_classes:
        out += [priority] * round(opts.schedules * fraction / total)
    last = opts.priority_classes[-1][0]
    out = (out + [last] * opts.schedules)[: opts.schedules]
    random.Random(opts.seed + 4).shuffle(out)
    return out
