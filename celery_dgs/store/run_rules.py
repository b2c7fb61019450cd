"""The rules every store applies to a run's start and end: the arguments it
accepts, the fencing of a stale token, the duration it stores. The statistics
a run's end writes are :func:`~celery_dgs.core.run_end.stats_after` and
:func:`~celery_dgs.core.run_end.disabled_after`.
"""

from __future__ import annotations

import math
from datetime import datetime

from ..core.items import ItemCounts, item_counts
from ..core.run_end import END_OUTCOMES


def check_eventful(eventful: object) -> bool | None:
    """``record_run_end``'s ``eventful``: True, False or None (``ValueError`` otherwise)."""
    if eventful is not None and not isinstance(eventful, bool):
        raise ValueError(f"eventful must be True, False or None, got {eventful!r}")
    return eventful


def check_items(items: object) -> ItemCounts | None:
    """``record_run_end``'s ``items``: ``None`` or :class:`ItemCounts` of whole
    numbers >= 0 (``ValueError`` naming the field otherwise)."""
    if items is None:
        return None
    if not isinstance(items, ItemCounts):
        raise ValueError(f"items must be ItemCounts or None, got {items!r}")
    return item_counts(items.ok, items.failed)


def check_finite(field_name: str, value: float | None) -> None:
    """``ValueError`` unless ``value`` is ``None`` or a finite number (not a bool):
    the run-end arguments ``progress`` and ``duration_s`` of every backend."""
    if value is not None and (isinstance(value, bool) or not math.isfinite(value)):
        raise ValueError(f"{field_name} must be a finite number, got {value!r}")


def stale_start(schedule: str, token: int, floor: int | None) -> str | None:
    """Why a run start with ``token`` is refused (every store's
    ``record_run_start``): a token not above the schedule's ``current_token``
    (the durable floor); ``None`` when it may start."""
    if floor is not None and token <= floor:
        return (
            f"stale token {token}: schedule {schedule!r} already recorded token "
            f"{floor}; the run was not started"
        )
    return None


def check_run_end(outcome: str, progress: float | None, duration_s: float | None) -> None:
    """Every store's ``record_run_end`` arguments: an end outcome, finite
    ``progress`` and ``duration_s`` (``ValueError`` otherwise)."""
    if outcome not in END_OUTCOMES:
        raise ValueError(f"outcome must be one of {sorted(END_OUTCOMES)}, got {outcome!r}")
    check_finite("progress", progress)
    check_finite("duration_s", duration_s)


def run_duration_s(started_at: datetime, ended_at: datetime, duration_s: float | None) -> float:
    """The stored duration of a run: the worker's monotonic measure when given,
    else ``ended_at - started_at``; never negative."""
    if duration_s is None:
        duration_s = (ended_at - started_at).total_seconds()
    return max(duration_s, 0.0)


def end_fenced(token: int | None, current: int | None) -> bool:
    """Whether a run's end must not touch the schedule's statistics: its token
    is not the schedule's ``current_token`` (a newer run started since)."""
    return token is None or token != current


def fenced_end_error(run_id: str, schedule: str, token: int | None, current: int | None) -> str:
    """The :class:`~celery_dgs.errors.StaleTokenError` message of a fenced end."""
    return (
        f"run {run_id!r} of schedule {schedule!r} holds token {token}, but the "
        f"schedule's current token is {current}: its end was recorded, "
        "its statistics were not"
    )
