"""Real runs measured as the simulator measures its own: a replay.

:func:`replay` feeds the runs a real beat and real workers made (when each
started and ended, and whether it failed) through the simulator's event loop,
with a policy that starts exactly those runs at their recorded times and a
draw that gives each its recorded duration. The figures (ERROR-seconds,
lateness, runs) then come from the same accounting as a simulation's, so the
two can be compared on the same fleet.
"""

from __future__ import annotations

import bisect
import math
from collections import defaultdict
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, replace

from ..core.stats import ScheduleStats
from .draws import RecordedDraw
from .loop import Simulator
from .policy import Policy
from .state import CALL, PolicyHost
from .workload import Workload


@dataclass(frozen=True)
class RecordedRun:
    """One real run: seconds after the workload's ``start``; ``end_s`` None
    while it was still running."""

    name: str
    start_s: float
    end_s: float | None
    failed: bool = False
    #: the worker that ran it (for :func:`refill_gaps`)
    worker: str = ""


class ReplayPolicy(Policy):
    """Starts the recorded runs at their recorded times, each on the worker
    with the most free slots."""

    name = "replay"

    def __init__(self, sim: PolicyHost, runs: Iterable[RecordedRun]) -> None:
        super().__init__(sim)
        self.overlapping = 0
        for run in runs:
            sim.schedule_event(run.start_s, CALL, self._start, run.name)

    def _start(self, now: float, name: object) -> None:
        assert isinstance(name, str)
        if self.sim.states[name].running_since is not None:
            self.overlapping += 1  # a record overlapping its predecessor: not replayed
            return
        worker = max(self.sim.worker_slots, key=lambda w: w.free)
        worker.free -= 1
        self.sim.start_run(name, worker.name, now, slot_taken=True)


def in_order(runs: Iterable[RecordedRun]) -> dict[str, list[RecordedRun]]:
    """Each schedule's runs by start; a run recorded as ending after the next
    one started (clocks a few milliseconds apart) ends when the next starts."""
    by_name: dict[str, list[RecordedRun]] = defaultdict(list)
    for run in sorted(runs, key=lambda r: r.start_s):
        by_name[run.name].append(run)
    for seq in by_name.values():
        for i, run in enumerate(seq[:-1]):
            following = seq[i + 1].start_s
            if run.end_s is None or run.end_s > following:
                seq[i] = replace(run, end_s=following)
    return by_name


def refill_gaps(runs: Iterable[RecordedRun], *, busy_within_s: float = 1.0) -> list[float]:
    """Seconds from each run's end to the next start on its worker, where that
    start came within ``busy_within_s`` (work was waiting for the slot: the
    real dispatch latency the simulator's ``dispatch_latency_s`` stands for)."""
    starts: dict[str, list[float]] = defaultdict(list)
    ends: dict[str, list[float]] = defaultdict(list)
    for run in runs:
        starts[run.worker].append(run.start_s)
        if run.end_s is not None:
            ends[run.worker].append(run.end_s)
    gaps: list[float] = []
    for worker, worker_ends in ends.items():
        ordered = sorted(starts[worker])
        for end in worker_ends:
            i = bisect.bisect_left(ordered, end)
            if i < len(ordered) and ordered[i] - end <= busy_within_s:
                gaps.append(ordered[i] - end)
    return gaps


def replay(
    workload: Workload,
    runs: Sequence[RecordedRun],
    *,
    initial_stats: Mapping[str, ScheduleStats] | None = None,
) -> Simulator:
    """The simulator of ``workload`` replaying ``runs``, run to its horizon
    (its figures: :func:`~.agreement.fleet_figures`; ``initial_stats`` as
    for :class:`Simulator`)."""
    by_name = in_order(runs)
    durations = {
        name: [
            (math.inf if r.end_s is None else max(r.end_s - r.start_s, 0.0), r.failed) for r in seq
        ]
        for name, seq in by_name.items()
    }
    ordered = [run for seq in by_name.values() for run in seq]
    sim = Simulator(
        replace(workload, dispatch_latency_s=0.0),  # the records hold the real starts
        lambda host: ReplayPolicy(host, ordered),
        draw=RecordedDraw(durations),
        initial_stats=initial_stats,
    )
    sim.run()
    return sim
