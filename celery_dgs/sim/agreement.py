"""Whether a simulation and a real run of the same fleet agree.

:func:`fleet_figures` reads the figures the comparison is about from a
simulator that has run (a simulation, or a :func:`~.replay.replay` of real
runs): ERROR-seconds after the warm-up, runs per schedule, and the lateness
of the starts (start minus ``should_start_by``; negative: early) at the median
and the 95th percentile. :func:`agreement` compares two sets of them.
"""

from __future__ import annotations

import math
import statistics
from dataclasses import asdict, dataclass

from .loop import Simulator
from .metrics import percentile

#: Two figures agree when they differ by at most this fraction of the larger.
TOLERANCE = 0.10


@dataclass(frozen=True)
class FleetFigures:
    error_s: float
    runs_per_schedule: float
    lateness_median_s: float
    lateness_p95_s: float

    def to_dict(self) -> dict[str, float]:
        return asdict(self)


def fleet_figures(sim: Simulator) -> FleetFigures:
    """The figures of ``sim``, which has run to its horizon."""
    tally = sim.tally
    late = sorted(tally.lateness)
    return FleetFigures(
        error_s=tally.error_s,
        runs_per_schedule=tally.runs / max(len(sim.states), 1),
        lateness_median_s=statistics.median(late) if late else 0.0,
        lateness_p95_s=percentile(late, 95),
    )


@dataclass(frozen=True)
class Agreement:
    """One figure of both runs; ``slack`` is the absolute difference allowed
    beside :data:`TOLERANCE` (what the measurement cannot resolve)."""

    figure: str
    simulated: float
    real: float
    slack: float

    @property
    def difference(self) -> float:
        return abs(self.real - self.simulated)

    @property
    def agrees(self) -> bool:
        scale = max(abs(self.real), abs(self.simulated))
        return self.difference <= max(TOLERANCE * scale, self.slack)

    def line(self) -> str:
        verdict = "agree" if self.agrees else "DIFFER"
        return (
            f"{self.figure:20} simulated {self.simulated:12,.2f}  real {self.real:12,.2f}  "
            f"difference {self.difference:10,.2f}  {verdict}"
        )


def agreement(
    simulated: FleetFigures, real: FleetFigures, slack: FleetFigures | None = None
) -> list[Agreement]:
    """Each figure of the two; ``slack`` holds, per figure, the absolute
    difference the caller's measurement cannot resolve (its clocks, beat's
    rounds, a window so short that one run more or less moves a figure)."""
    slack = slack or FleetFigures(0.0, 0.0, 0.0, 0.0)
    return [
        Agreement("ERROR-seconds", simulated.error_s, real.error_s, slack.error_s),
        Agreement(
            "runs per schedule",
            simulated.runs_per_schedule,
            real.runs_per_schedule,
            slack.runs_per_schedule,
        ),
        Agreement(
            "lateness median (s)",
            simulated.lateness_median_s,
            real.lateness_median_s,
            slack.lateness_median_s,
        ),
        Agreement(
            "lateness p95 (s)",
            simulated.lateness_p95_s,
            real.lateness_p95_s,
            slack.lateness_p95_s,
        ),
    ]


def spread(figures: list[FleetFigures]) -> FleetFigures:
    """Per figure, how far apart ``figures`` are (e.g. simulations of the same
    fleet under slightly different latencies: how much a perturbation the
    measurement cannot see moves each figure)."""

    def width(values: list[float]) -> float:
        return max(values) - min(values)

    return FleetFigures(
        width([f.error_s for f in figures]),
        width([f.runs_per_schedule for f in figures]),
        width([f.lateness_median_s for f in figures]),
        width([f.lateness_p95_s for f in figures]),
    )


def percentile_resolution(sorted_values: list[float], q: float) -> float:
    """How finely ``sorted_values`` (a sample, sorted) resolve their ``q``-th
    percentile: half the distance between the values one standard error of
    its rank below and above it (the rank of a sample's quantile varies by
    ``sqrt(n q (1 - q))``). A p95 of a hundred starts is the fifth largest;
    the next draw of the same fleet may give the third or the seventh."""
    n = len(sorted_values)
    if n < 2:
        return 0.0
    share = q / 100.0
    spread = math.sqrt(n * share * (1 - share))
    rank = share * n
    low = max(0, math.floor(rank - spread) - 1)
    high = min(n - 1, math.ceil(rank + spread) - 1)
    return (sorted_values[high] - sorted_values[low]) / 2
