"""The priority class beat serves each row in now (the elevator applied to
the status rows)."""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import replace
from datetime import datetime

from ..core.elevator import ElevatorState
from ..core.priority import level_classes, short_after_s
from ..core.spec_values import AD_HOC_PRIORITY
from .row import StatusRow


def apply_priorities(
    rows: Sequence[StatusRow],
    now: datetime,
    elevator_interval: float | None,
    *,
    overloaded: bool = False,
    elevator: ElevatorState | None = None,
    every_row: bool = True,
) -> list[StatusRow]:
    """Rows with ``effective_priority`` set as beat's index computes it
    (:func:`celery_dgs.core.priority.effective_priority`): while capacity is
    short (a due schedule has waited half an elevator interval, or
    ``overloaded``: some pool's demand exceeds the live slots that serve it), a
    schedule beat may dispatch that is due (its ``can_start_by`` and
    ``should_start_by`` passed; a run request since it was asked, in class 0)
    moves up one class with due work per elevator step, up to the top class in
    use; the others are served in their own class.

    ``elevator``: where the leading beat's classes stand (its pace): each
    row's class from it, whatever rows are listed. Without it, from ``rows``
    themselves when they are ``every_row`` (the projection's replay; a due
    run request makes capacity count as short too, as in beat's index; beat
    also keeps the classes' order for an elevator interval after capacity was
    last short, which a snapshot cannot see); else (a page of rows, no beat
    leader) each row in its own class, a run request in its asked one."""
    due: dict[str, tuple[int, float]] = {}
    top: int | None = None  # the top class in use keeps level 0
    requested = False  # a due run request: capacity counts as short
    for row in rows:
        if row.priority is None or row.running is not None or row.paused or not row.active:
            continue
        cls = row.priority
        if row.run_requested_at is not None:
            asked = row.run_requested_priority
            cls = AD_HOC_PRIORITY if asked is None else asked
            due[row.name] = (cls, row.run_requested_at.timestamp())
            requested = True
        elif row.may_run_at is not None and row.should_start_by is not None:
            at = max(row.may_run_at, row.should_start_by)
            if at <= now:
                due[row.name] = (cls, at.timestamp())
        top = cls if top is None else min(top, cls)
    moment = now.timestamp()
    if elevator is None:
        classes = level_classes((cls for cls, _ in due.values()), top if due else None)
        oldest = min((at for _, at in due.values()), default=math.inf)
        short = every_row and (
            overloaded or requested or oldest <= moment - short_after_s(elevator_interval)
        )
        elevator = ElevatorState(tuple(classes), short, elevator_interval)
    out = []
    for row in rows:
        effective = row.priority
        if row.name in due:
            cls, due_at = due[row.name]
            effective = elevator.class_of(cls, due_at, moment)
        out.append(replace(row, effective_priority=effective))
    return out
