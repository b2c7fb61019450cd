"""Partial failures (seed 000, future direction 2): a run that processed items
reports how many succeeded and how many failed. When the failed share is above
the schedule's threshold the run counts as failed (outcome
:data:`PARTIAL_FAILURE`) for its condition and its retry backoff; at or below
it the run is good. Either way its run record keeps the counts.

The threshold is a share in ``(0, 1]``: with ``0.2``, 3 failed of 10 (0.3) is a
partial failure and 2 of 10 is not; ``1`` never fails a run on its items. A run
that reported no items (``ok + failed == 0``) is judged by its outcome alone.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

#: The outcome of a run that returned but whose failed share of items is above
#: its threshold (one of :data:`~celery_dgs.core.run_end.FAILURE_OUTCOMES`).
PARTIAL_FAILURE = "partial_failure"
#: ``dgs_partial_failure_threshold``: a run whose failed items are more than
#: half of its items has failed.
DEFAULT_PARTIAL_FAILURE_THRESHOLD = 0.5


@dataclass(frozen=True, slots=True)
class ItemCounts:
    """How many of a run's items succeeded (``ok``) and failed (``failed``)."""

    ok: int
    failed: int

    @property
    def total(self) -> int:
        return self.ok + self.failed

    @property
    def failed_share(self) -> float:
        """``failed / total``; 0 for a run without items."""
        return self.failed / self.total if self.total else 0.0

    def __str__(self) -> str:
        return f"{self.failed} of {self.total} items failed"


def item_count(field_name: str, value: Any) -> int:
    """``value`` as an item count: a whole number (an ``int``, not a bool) >= 0;
    ``ValueError`` naming ``field_name`` otherwise."""
    if isinstance(value, bool) or not isinstance(value, int):
        raise ValueError(f"{field_name} must be a whole number of items, got {value!r}")
    if value < 0:
        raise ValueError(f"{field_name} must be zero or more, got {value!r}")
    return int(value)


def item_counts(ok: Any, failed: Any) -> ItemCounts:
    """:class:`ItemCounts` of ``ok`` and ``failed`` (:func:`item_count` each)."""
    return ItemCounts(item_count("ok", ok), item_count("failed", failed))


def check_threshold(value: Any) -> float:
    """``value`` as a partial-failure threshold: a number in ``(0, 1]``;
    ``ValueError`` otherwise."""
    if (
        isinstance(value, bool)
        or not isinstance(value, (int, float))
        or not math.isfinite(value)
        or not 0.0 < value <= 1.0
    ):
        raise ValueError(f"must be a share of the items in (0, 1], got {value!r}")
    return float(value)


def is_partial_failure(items: ItemCounts | None, threshold: float) -> bool:
    """Whether ``items``' failed share is above ``threshold``."""
    return items is not None and items.total > 0 and items.failed_share > threshold


def partial_failure_reason(items: ItemCounts, threshold: float) -> str:
    """The error a partial failure is recorded with, naming the counts and the threshold."""
    return (
        f"{items} ({items.failed_share:.0%}), above the partial-failure threshold "
        f"{threshold:g} ({threshold:.0%})"
    )


def outcome_with_items(
    outcome: str, error: str | None, items: ItemCounts | None, threshold: float
) -> tuple[str, str | None]:
    """A run's ``(outcome, error)`` once its items are counted: a ``success``
    whose failed share is above ``threshold`` becomes :data:`PARTIAL_FAILURE`
    with :func:`partial_failure_reason`; any other end is left as it is."""
    if outcome == "success" and items is not None and is_partial_failure(items, threshold):
        return PARTIAL_FAILURE, partial_failure_reason(items, threshold)
    return outcome, error
