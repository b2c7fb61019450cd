"""The simulator: the real scheduling code on a virtual clock.

:func:`~celery_dgs.sim.loop.simulate` runs a :class:`~celery_dgs.sim.workload.Workload`
under a policy (:data:`~celery_dgs.sim.policies.POLICIES`) and returns a
:class:`~celery_dgs.sim.metrics.SimResult`. See ``docs/simulator.md``.
"""

from __future__ import annotations

from .loop import simulate
from .metrics import SimResult
from .policies import POLICIES
from .workload import Outage, SimSchedule, SimWorker, Workload, load_workload

__all__ = [
    "POLICIES",
    "Outage",
    "SimResult",
    "SimSchedule",
    "SimWorker",
    "Workload",
    "load_workload",
    "simulate",
]
