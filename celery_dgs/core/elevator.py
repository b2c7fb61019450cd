"""The elevator's arithmetic (pure): how many steps a due schedule has waited,
and the class it is served in.

Every ``interval_s`` (at the multiples of it since the Unix epoch, shifted by
``clock_offset_s``) each due schedule moves up one *level*: to the next class
with due work (:class:`~celery_dgs.core.priority.PriorityIndex`, and
``celery dgs status``, which shows where each schedule stands).
"""

from __future__ import annotations

import bisect
import math
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

__all__ = ["ElevatorState", "effective_priority", "elevator_steps", "level_classes"]


@dataclass(frozen=True)
class ElevatorState:
    """Where beat's priority classes stand at a moment, as its index sees the
    whole fleet: the classes the elevator's levels count (``levels``: those
    with due work, and the top class), whether capacity counts as short (the
    classes order due work only then), and its elevator settings. With it,
    ``status`` shows the class beat serves each listed schedule in, whatever
    rows it lists."""

    levels: tuple[int, ...]
    short: bool
    interval_s: float | None
    clock_offset_s: float = 0.0

    def class_of(self, priority: int, due_at: float | None, now: float) -> int:
        """The class a schedule of ``priority`` due since ``due_at`` is served in at ``now``."""
        if not self.short:
            return priority
        return effective_priority(
            priority, due_at, now, self.levels, self.interval_s, self.clock_offset_s
        )

    def to_dict(self) -> dict[str, Any]:
        return {
            "levels": list(self.levels),
            "short": self.short,
            "interval_s": self.interval_s,
            "clock_offset_s": self.clock_offset_s,
        }

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> ElevatorState:
        interval = data["interval_s"]
        return cls(
            levels=tuple(int(level) for level in data["levels"]),
            short=bool(data["short"]),
            interval_s=None if interval is None else float(interval),
            clock_offset_s=float(data["clock_offset_s"]),
        )


def elevator_steps(
    due_at: float, now: float, interval_s: float | None, clock_offset_s: float = 0.0
) -> int:
    """How many elevator steps a schedule due since ``due_at`` has waited at ``now``
    (steps happen at the multiples of ``interval_s`` since ``-clock_offset_s``)."""
    if not interval_s or due_at >= now:
        return 0
    if not math.isfinite(due_at):
        return 1 << 20
    return max(
        0,
        math.floor((now + clock_offset_s) / interval_s)
        - math.floor((due_at + clock_offset_s) / interval_s),
    )


def effective_priority(
    priority: int,
    due_at: float | None,
    now: float,
    due_classes: Sequence[int],
    interval_s: float | None,
    clock_offset_s: float = 0.0,
) -> int:
    """The class a schedule of ``priority`` is served in at ``now``: its own when it
    is not due (``due_at`` None or ahead), else the class ``elevator_steps`` levels
    up among ``due_classes`` (the sorted classes with due work)."""
    if due_at is None or due_at > now or not due_classes:
        return priority
    level = bisect.bisect_left(due_classes, priority)
    level = max(0, level - elevator_steps(due_at, now, interval_s, clock_offset_s))
    return min(priority, due_classes[level])


def level_classes(due_classes: Iterable[int], top_class: int | None) -> list[int]:
    """The classes the elevator's levels count, highest (lowest number) first:
    ``due_classes`` (those with due work) and ``top_class`` (the highest class in
    use, which keeps level 0 even with no due work; None: none kept)."""
    levels = set(due_classes)
    if top_class is not None:
        levels.add(top_class)
    return sorted(levels)
