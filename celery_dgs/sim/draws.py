"""How long each simulated run takes, and whether it fails: a :class:`RunDraw`.

The simulator asks its draw at every run start. :class:`StreamDraw` is its
default: one seeded random stream for the whole simulation, so a run's
duration depends on the order of every start before it. :class:`KeyedDraw`
draws each run from its own seed (the workload's seed, the schedule's name and
the run's number), so a real worker can draw the very same duration for the
same run (:func:`keyed_run`): the simulator and a real beat then see the same
run times whatever order they start the runs in. :class:`RecordedDraw` gives
the durations and outcomes of runs that really happened (a replay).
"""

from __future__ import annotations

import math
import random
from collections.abc import Mapping, Sequence
from typing import Protocol

from .workload import SimSchedule


class RunDraw(Protocol):
    """The duration (seconds) and failure of run number ``run`` (0 first) of
    ``sched``."""

    def __call__(self, sched: SimSchedule, run: int) -> tuple[float, bool]: ...


def lognormal_run(
    rng: random.Random, mean_s: float, sigma: float, failure_rate: float = 0.0
) -> tuple[float, bool]:
    """A duration lognormal with mean ``mean_s`` and shape ``sigma`` (0: the
    mean exactly), and a failure with probability ``failure_rate``, both drawn
    from ``rng``."""
    if sigma > 0 and mean_s > 0:
        duration = rng.lognormvariate(math.log(mean_s) - sigma * sigma / 2, sigma)
    else:
        duration = mean_s
    failed = failure_rate > 0 and rng.random() < failure_rate
    return duration, failed


class StreamDraw:
    """Every run drawn from one stream seeded with ``seed``."""

    def __init__(self, seed: int) -> None:
        self.rng = random.Random(seed)

    def __call__(self, sched: SimSchedule, run: int) -> tuple[float, bool]:
        return lognormal_run(self.rng, sched.duration_s, sched.duration_sigma, sched.failure_rate)


def keyed_run(
    seed: int, name: str, run: int, mean_s: float, sigma: float, failure_rate: float = 0.0
) -> tuple[float, bool]:
    """Run number ``run`` of schedule ``name``, drawn as :func:`lognormal_run`
    from a stream of its own: the same for the simulator and for a real task
    given the same keys."""
    return lognormal_run(random.Random(f"{seed}/{name}/{run}"), mean_s, sigma, failure_rate)


class KeyedDraw:
    """Each run drawn by :func:`keyed_run` with the workload's ``seed``."""

    def __init__(self, seed: int) -> None:
        self.seed = seed

    def __call__(self, sched: SimSchedule, run: int) -> tuple[float, bool]:
        return keyed_run(
            self.seed, sched.name, run, sched.duration_s, sched.duration_sigma, sched.failure_rate
        )


class RecordedDraw:
    """The runs of each schedule as recorded, in order: ``(duration, failed)``;
    a run past the record lasts forever (it was still running at its end)."""

    def __init__(self, runs: Mapping[str, Sequence[tuple[float, bool]]]) -> None:
        self.runs = runs

    def __call__(self, sched: SimSchedule, run: int) -> tuple[float, bool]:
        recorded = self.runs.get(sched.name, ())
        return recorded[run] if run < len(recorded) else (math.inf, False)
