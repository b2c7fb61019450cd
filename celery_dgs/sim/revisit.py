"""Adaptive revisit against fixed periods, on a synthetic upstream.

:func:`sources` draws a fleet of sources in rate classes (by default the
1,000-fold spread of ``docs/simulator.md``, "Adaptive revisit": 10 % change
hourly, 30 % daily, 40 % monthly, 20 % never), each a fraction of them hinted
by its lister. :func:`simulate_revisit` runs them as adaptive schedules
(:class:`~celery_dgs.core.spec.AdaptiveSpec`) or as periodic ones of one
fixed period, under beat's own decision (policy ``dgs``), with the
:class:`~celery_dgs.sim.upstream.Upstream` saying whether each visit was
eventful. :func:`matched_fixed` finds the fixed period that spends the same
number of visits as an adaptive run, on the same slots: the fair baseline.
``new_sources`` more are listed during the window (evenly spread over its
first 90 %), as a lister adds them: never visited, eligible from then on;
:func:`rounds_waited` counts the dispatch rounds each one waited for its
first visit.

A fixed-period schedule's cooldown is ``1 - EARLY_FRACTION`` of its period,
so it becomes eligible as early, relative to its period, as an adaptive one
does relative to its interval (:data:`~celery_dgs.core.adaptive.EARLY_FRACTION`).
"""

from __future__ import annotations

import math
import random
from bisect import bisect_left
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from datetime import timedelta

from ..core.adaptive import EARLY_FRACTION
from ..core.ranking import OrderPolicy
from ..core.spec import AdaptiveSpec, PeriodicSpec, ScheduleSpec
from ..core.stats import ScheduleStats
from .deadline_policy import DEFAULT_ORDER
from .loop import Simulator
from .metrics import SimResult
from .upstream import Source, Upstream, UpstreamFigures
from .workload import DEFAULT_SLOTS_PER_WORKER, SimSchedule, Workload, WorkloadError, make_workers

HOUR = 3600.0
DAY = 86400.0
TASK = "sim.visit"


@dataclass(frozen=True)
class RateClass:
    """``share`` of the sources change on average every ``mean_change_s``
    seconds (``None``: never, a dead source)."""

    label: str
    share: float
    mean_change_s: float | None


#: Update rates spanning 720x between the live classes, and dead sources.
DEFAULT_CLASSES = (
    RateClass("hourly", 0.10, HOUR),
    RateClass("daily", 0.30, DAY),
    RateClass("monthly", 0.40, 30 * DAY),
    RateClass("dead", 0.20, None),
)


@dataclass(frozen=True)
class RevisitOptions:
    """A revisit workload: ``sources`` in ``classes`` on ``slots``; each visit
    lasts ``duration_s`` on average (lognormal, ``duration_sigma``);
    ``hint_fraction`` of every class is hinted, each hint ``hint_delay_s``
    after its change; adaptive schedules use ``interval_unit_s`` and start at
    ``initial_interval_index``; ``new_sources`` are listed during the window
    (classes drawn by their shares)."""

    sources: int = 10_000
    slots: int = 40
    classes: Sequence[RateClass] = DEFAULT_CLASSES
    duration_s: float = 60.0
    duration_sigma: float = 0.3
    failure_rate: float = 0.0
    horizon_s: float = 60 * DAY
    warmup_s: float = 14 * DAY
    interval_unit_s: float = 1.5 * DAY  # AdaptiveSpec's default
    initial_interval_index: int = 4
    hint_fraction: float = 0.0
    hint_delay_s: float = 600.0
    slots_per_worker: int = DEFAULT_SLOTS_PER_WORKER
    new_sources: int = 0
    seed: int = 0

    def check(self) -> None:
        if self.new_sources < 0:
            raise WorkloadError(f"new sources must be >= 0, got {self.new_sources}")
        if self.sources < 1 or self.slots < 1:
            raise WorkloadError(f"sources ({self.sources}) and slots ({self.slots}) must be >= 1")
        if not self.classes or any(c.share < 0 for c in self.classes):
            raise WorkloadError("classes: need at least one, with shares >= 0")
        if not math.isclose(sum(c.share for c in self.classes), 1.0, abs_tol=1e-6):
            raise WorkloadError("classes: the shares must add up to 1")
        if any(c.mean_change_s is not None and not c.mean_change_s > 0 for c in self.classes):
            raise WorkloadError("classes: a mean change interval must be > 0 (None: dead)")
        if not 0 <= self.hint_fraction <= 1:
            raise WorkloadError(f"hint fraction must be in [0, 1], got {self.hint_fraction}")
        if not 0 <= self.warmup_s < self.horizon_s:
            raise WorkloadError("need 0 <= warmup < horizon")
        if not self.duration_s > 0:
            raise WorkloadError(f"duration must be > 0, got {self.duration_s}")

    @property
    def window_s(self) -> float:
        return self.horizon_s - self.warmup_s


def source_name(i: int) -> str:
    return f"{TASK}@src{i}"


def sources(opts: RevisitOptions) -> dict[str, Source]:
    """The sources, by schedule name: class sizes are the shares rounded (the
    last class takes the rest); the hinted ones are drawn with the seed."""
    opts.check()
    rng = random.Random(opts.seed)
    out: dict[str, Source] = {}
    i = 0
    for k, klass in enumerate(opts.classes):
        size = opts.sources - i if k == len(opts.classes) - 1 else round(klass.share * opts.sources)
        rate = 0.0 if klass.mean_change_s is None else 1.0 / klass.mean_change_s
        for _ in range(size):
            out[source_name(i)] = Source(rate, rng.random() < opts.hint_fraction, klass.label)
            i += 1
    spread = 0.9 * opts.window_s / max(opts.new_sources, 1)
    for k in range(opts.new_sources):
        klass = rng.choices(opts.classes, weights=[c.share for c in opts.classes])[0]
        rate = 0.0 if klass.mean_change_s is None else 1.0 / klass.mean_change_s
        hinted = rng.random() < opts.hint_fraction
        listed = opts.warmup_s + (k + 0.5) * spread
        out[source_name(i)] = Source(rate, hinted, klass.label, listed_at=listed)
        i += 1
    return out


def rounds_waited(
    trace: Sequence[tuple[float, str, str]], listed: Mapping[str, float]
) -> list[int]:
    """For each source of ``listed`` (name: listing time) that ran: how many
    dispatch rounds (distinct start times in ``trace``) after its listing
    started others before its first visit (0: the first round after its
    listing started it)."""
    times = [t for t, _, _ in trace]
    rounds, count, last = [], -1, None
    for t in times:
        if t != last:
            count, last = count + 1, t
        rounds.append(count)
    first: dict[str, int] = {}
    for i, (_, name, _) in enumerate(trace):
        if name in listed and name not in first:
            first[name] = i
    out = []
    for name, i in first.items():
        lo = bisect_left(times, listed[name])
        out.append(rounds[i] - rounds[lo] if lo <= i else 0)
    return out


def _workload(opts: RevisitOptions, specs: Sequence[ScheduleSpec]) -> Workload:
    return Workload(
        [SimSchedule(s, opts.duration_s, opts.duration_sigma, opts.failure_rate) for s in specs],
        make_workers(opts.slots, opts.slots_per_worker),
        horizon_s=opts.horizon_s,
        warmup_s=opts.warmup_s,
        seed=opts.seed,
    )


def adaptive_workload(opts: RevisitOptions, names: Sequence[str]) -> Workload:
    unit = timedelta(seconds=opts.interval_unit_s)
    return _workload(
        opts,
        [
            AdaptiveSpec(
                task=TASK,
                configuration=n.split("@", 1)[1],
                interval_unit=unit,
                initial_interval_index=opts.initial_interval_index,
            )
            for n in names
        ],
    )


def fixed_workload(opts: RevisitOptions, names: Sequence[str], period_s: float) -> Workload:
    period = timedelta(seconds=period_s)
    cooldown = timedelta(seconds=period_s * (1 - EARLY_FRACTION))
    return _workload(
        opts,
        [
            PeriodicSpec(
                task=TASK,
                configuration=n.split("@", 1)[1],
                scheduling_period=period,
                cooldown_duration=cooldown,
            )
            for n in names
        ],
    )


@dataclass(frozen=True)
class RevisitResult:
    """One run: ``label`` (``adaptive`` or ``fixed <period>``), the
    upstream's figures and the scheduler's (:class:`SimResult`)."""

    label: str
    period_s: float | None  # the fixed period; None: adaptive
    upstream: UpstreamFigures
    sim: SimResult
    #: per new source that ran, the rounds it waited (:func:`rounds_waited`)
    new_rounds: tuple[int, ...] = ()

    @property
    def visits(self) -> int:
        return self.upstream.total.visits


def simulate_revisit(
    opts: RevisitOptions,
    period_s: float | None = None,
    *,
    srcs: Mapping[str, Source] | None = None,
    order: OrderPolicy = DEFAULT_ORDER,
) -> RevisitResult:
    """Run the sources adaptively (``period_s`` None) or with one fixed
    period, under beat's order ``order``."""
    srcs = sources(opts) if srcs is None else srcs
    names = list(srcs)
    if period_s is None:
        workload, label = adaptive_workload(opts, names), "adaptive"
    else:
        if not period_s > 0:
            raise WorkloadError(f"fixed period must be > 0, got {period_s}")
        workload, label = fixed_workload(opts, names, period_s), f"fixed {format_s(period_s)}"
    upstream = Upstream(
        srcs,
        horizon_s=opts.horizon_s,
        window_start=opts.warmup_s,
        hint_delay_s=opts.hint_delay_s,
        seed=opts.seed + 7,
    )
    listed = {n: s.listed_at for n, s in srcs.items() if s.listed_at is not None}
    start = workload.start
    new_stats = {
        n: ScheduleStats(registered_at=start + timedelta(seconds=t)) for n, t in listed.items()
    }
    trace: list[tuple[float, str, str]] | None = [] if listed else None
    sim = Simulator(
        workload, "dgs", order=order, upstream=upstream, initial_stats=new_stats, trace=trace
    )
    upstream.attach(sim)
    result = sim.run()
    waited = tuple(rounds_waited(trace, listed)) if trace is not None else ()
    return RevisitResult(label, period_s, upstream.figures(), result, waited)


def matched_period_estimate(opts: RevisitOptions, visits: int) -> float:
    """The fixed period whose schedules, served at once when eligible, make
    ``visits`` visits in the window: each visit starts ``cooldown`` after the
    previous one's end, so ``window / (visits / sources) = cooldown + run``."""
    if visits < 1:
        raise ValueError("no visits to match")
    between = opts.window_s * opts.sources / visits
    return max(between - opts.duration_s, opts.duration_s) / (1 - EARLY_FRACTION)


def matched_fixed(
    opts: RevisitOptions,
    visits: int,
    *,
    srcs: Mapping[str, Source] | None = None,
    tolerance: float = 0.02,
    attempts: int = 3,
) -> RevisitResult:
    """The fixed-period run that spends ``visits`` visits (within
    ``tolerance``) on the same sources and slots: starts from
    :func:`matched_period_estimate`, then scales the period by the measured
    ratio (at most ``attempts`` runs; the closest is returned)."""
    srcs = sources(opts) if srcs is None else srcs
    period = matched_period_estimate(opts, visits)
    best: RevisitResult | None = None
    for _ in range(attempts):
        result = simulate_revisit(opts, period, srcs=srcs)
        if best is None or abs(result.visits - visits) < abs(best.visits - visits):
            best = result
        if result.visits and abs(result.visits / visits - 1) <= tolerance:
            break
        period *= max(result.visits, 1) / visits
    assert best is not None
    return best


def format_s(seconds: float) -> str:
    """``90`` -> ``1.5m``, ``7200`` -> ``2.0h``, ``172800`` -> ``2.0d``."""
    for unit, size in (("d", DAY), ("h", HOUR), ("m", 60.0)):
        if seconds >= size:
            return f"{seconds / size:.1f}{unit}"
    return f"{seconds:.0f}s"
