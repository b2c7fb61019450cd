"""Shedding in the long-run bound's order: a simulator policy (pure).

The bound (:mod:`celery_dgs.sim.bound`) spends capacity on the schedules that
buy the most OK time per slot-second, ``(P - d) / d`` for a period ``P`` and
a run of ``d`` seconds, and starves the rest. :class:`KnapsackIndex` orders
the late schedules (``should_start_by`` passed) that way, most OK time per
slot-second first and without aging, and serves an on-time schedule only
when none is late, in deadline order. Under overload the costliest schedules
are never served: the price of approaching the bound. Compared with
``shed`` and ``restore`` in ``docs/simulator.md`` ("Scheduling quality");
not a beat setting.
"""

from __future__ import annotations

from collections.abc import Callable

from ..core.late_order import SheddingIndex


class KnapsackIndex(SheddingIndex):
    """Late schedules by ``efficiency(name)``, highest first; on-time ones after
    them, lowest ``should_start_by`` first. ``efficiency`` is read when a
    schedule is found late."""

    def __init__(self, efficiency: Callable[[str], float]) -> None:
        super().__init__(horizon_s=0.0)
        self.efficiency = efficiency

    def _late_entry(
        self, name: str, should: float, can: float, version: int
    ) -> tuple[float, float, str, int]:
        return (-self.efficiency(name), can, name, version)


def ok_seconds_per_slot_second(period_s: float, expected_s: float) -> float:
    """What a run buys: ``(P - d) / d``, its OK time per slot-second (0 when a
    run takes the whole period)."""
    expected_s = max(expected_s, 1e-3)
    return max(period_s - expected_s, 0.0) / expected_s
