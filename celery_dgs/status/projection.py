"""Beat's greedy order replayed over the live state, applied to the status
rows: ``projected_late`` warnings and the look-ahead's holds."""

from __future__ import annotations

import dataclasses
from collections.abc import Iterable, Mapping, Sequence
from datetime import datetime, timezone

from ..core.condition import Level, Reason
from ..core.lookahead import DemandBook
from ..core.projection import Waiting, project_starts
from ..core.timing import expected_duration, start_margin
from ..leases.types import LeaseInfo
from ..settings import DgsSettings
from ..store.records import StoredSchedule
from .holds import HOLD_LOOKAHEAD, HOLD_NO_WORKER, Hold
from .row import StatusRow


def apply_projection(
    rows: Sequence[StatusRow],
    schedules: Iterable[StoredSchedule],
    leases: Mapping[str, LeaseInfo],
    now: datetime,
    *,
    slots: int,
    settings: DgsSettings | None = None,
    book: DemandBook | None = None,
    pool_slots: Mapping[str, int] | None = None,
    default_pool: str = "celery",
) -> list[StatusRow]:
    """Replay beat's order over the live state (:func:`~celery_dgs.core.projection.project_starts`)
    and turn OK rows projected to start after ``should_start_by`` into WARNING
    ``projected_late``. Paused, inactive, invalid and running schedules take no
    new slot, nor those no live worker can run (a :data:`HOLD_NO_WORKER` hold);
    each running one holds its slot until its expected end. With
    ``dgs_lookahead`` the replay applies beat's admission (a long run it
    would hold leaves its slot to the others meanwhile), and a schedule it
    holds now while a slot is free gets a :data:`HOLD_LOOKAHEAD` hold.

    ``book`` (a new one, filled here) receives the schedules' shares of a slot
    as beat keeps them: those it may schedule (deferred checks are none);
    the look-ahead replay uses it, or a book of its own without one.

    ``pool_slots`` (the live workers' slots by queue, :mod:`.queues`): with
    more than one pool, each pool's schedules are replayed apart on its own
    slots (a worker that consumes several counts in each); otherwise the
    whole fleet on ``slots``."""
    by_name = {s.name: s for s in schedules}
    conf = settings or DgsSettings()
    per_pool = pool_slots is not None and len(pool_slots) > 1
    queues: dict[str, _Queue] = {}
    if book is None and conf.lookahead:
        book = DemandBook()
    for row in rows:
        stored = by_name.get(row.name)
        if stored is None or stored.spec is None or not row.active or row.paused:
            continue
        disabled = row.disabled_reason is not None  # held by beat until an upsert enables it
        if disabled and row.running is None:
            continue
        expected = expected_duration(stored.spec, stored.stats).total_seconds()
        if book is not None and not disabled:
            book.note_schedule(row.name, stored.spec, stored.stats, expected)
        pool = (stored.spec.pool or default_pool) if per_pool else ""
        queue = queues.setdefault(pool, _Queue())
        if row.running is not None:
            queue.busy_until.append(row.running.started_at.timestamp() + expected)
            queue.busy_run_s.append(expected)
        elif (
            row.can_start_by is not None
            and row.should_start_by is not None
            and not any(h.reason == HOLD_NO_WORKER for h in row.holds)
        ):
            margin = start_margin(stored.spec, stored.stats).total_seconds()
            queue.waiting.append(
                Waiting(
                    row.name,
                    row.can_start_by.timestamp(),
                    row.should_start_by.timestamp(),
                    expected,
                    margin,
                )
            )
    held_now: set[str] = set()
    projected: dict[str, float] = {}
    on: dict[str, str] = {}  # each replayed schedule's slots, as its message says them
    for pool, queue in queues.items():
        pool_total = slots if not per_pool else (pool_slots or {}).get(pool, 0)
        starts = project_starts(
            queue.waiting,
            queue.busy_until,
            max(pool_total - len(queue.busy_until), 0),
            now.timestamp(),
            order=conf.order_policy,
            lookahead=book if conf.lookahead else None,
            busy_run_s=queue.busy_run_s,
            held_now=held_now,
        )
        projected.update(starts)
        label = f"{pool_total} slot{'' if pool_total == 1 else 's'}"
        label += f" of pool {pool!r}" if per_pool else ""
        on.update(dict.fromkeys(starts, label))
    return [
        _projected_row(row, projected.get(row.name), row.name in held_now, on.get(row.name, ""))
        for row in rows
    ]


@dataclasses.dataclass
class _Queue:
    """One replay's schedules: waiting ones, and the running ones' expected
    ends and run times."""

    waiting: list[Waiting] = dataclasses.field(default_factory=list)
    busy_until: list[float] = dataclasses.field(default_factory=list)
    busy_run_s: list[float] = dataclasses.field(default_factory=list)


def _projected_row(row: StatusRow, start: float | None, held: bool, on: str) -> StatusRow:
    """``row`` with the look-ahead's hold when ``held``, and WARNING
    ``projected_late`` when it is OK and projected to ``start`` after its
    ``should_start_by``."""
    if held:
        hold = Hold(
            reason=HOLD_LOOKAHEAD,
            message=(
                f"{row.name}: the look-ahead holds it while the long runs in progress "
                f"take the slots the shorter schedules need (dgs_lookahead)"
            ),
        )
        row = dataclasses.replace(row, holds=(*row.holds, hold), may_run_at=None)
    if (
        row.level is Level.OK
        and start is not None
        and row.should_start_by is not None
        and start > row.should_start_by.timestamp()
    ):
        at = datetime.fromtimestamp(start, timezone.utc).isoformat(timespec="seconds")
        row = dataclasses.replace(
            row,
            level=Level.WARNING,
            reason=Reason.PROJECTED_LATE.value,
            message=f"{row.name}: the queue ahead of it on {on} is projected "
            f"to start it at {at}, after its should_start_by "
            f"{row.should_start_by.isoformat(timespec='seconds')}",
        )
    return row
