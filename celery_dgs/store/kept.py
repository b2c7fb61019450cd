"""The kept columns of a schedule row: its start times and its condition as
moments (:mod:`celery_dgs.core.kept_condition`), as column values.

Both stores write them in the transaction that changes what they depend on
(the SQL store: :mod:`.sql_kept`; the memory store: on every row it stores)."""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Hashable, Sequence
from datetime import datetime, timedelta
from operator import attrgetter
from typing import Any

from ..core.blackout_watch import kept_start_past_blackout
from ..core.kept_condition import KeptCondition, KeptTimes, kept_times
from ..core.laxity import margin_bucket_of as margin_bucket_of  # the migrations read it here
from ..core.spec import ScheduleSpec
from ..core.stats import ScheduleStats
from ..core.timing import DEFAULT_RETRY_LADDER
from .records import StoredSchedule

#: The kept columns of ``dgs_schedules``, in the order :func:`kept_row` gives them.
KEPT_COLUMNS: tuple[str, ...] = (
    "next_can_start_at",
    "should_start_by",
    "kept_level",
    "kept_reason",
    "warning_at",
    "warning_reason",
    "error_at",
    "error_reason",
    "pool",
    "margin_bucket",
)

#: Distinct spec shapes :class:`NewRowTimes` remembers before it starts over.
NEW_ROW_SHAPES_MAX = 10_000
#: The spec fields a row has of its own: not part of its shape.
_OWN_FIELDS = frozenset({"task", "configuration", "args", "kwargs"})
#: Per spec class, the getter of its shape's field values (all but its own).
_SHAPE_GETTERS: dict[type[ScheduleSpec], Callable[[ScheduleSpec], tuple[Any, ...]]] = {}


def times_of(
    stored: StoredSchedule, now: datetime, retry_ladder: Sequence[timedelta] = DEFAULT_RETRY_LADDER
) -> KeptTimes:
    """What is kept for ``stored`` written at ``now``."""
    return kept_times(
        stored.spec,
        stored.stats,
        now,
        declaration_error=stored.declaration_error,
        retry_ladder=retry_ladder,
    )


#: The kept columns :func:`kept_past_blackout` moves.
START_COLUMNS: tuple[str, ...] = ("next_can_start_at", "should_start_by", "margin_bucket")


def kept_past_blackout(
    stored: StoredSchedule, now: datetime, retry_ladder: Sequence[timedelta] = DEFAULT_RETRY_LADDER
) -> StoredSchedule | None:
    """``stored`` with its kept start times (:data:`START_COLUMNS`) as of
    ``now``, when a blackout begun since its last write keeps it from
    starting though they say it may
    (:func:`~celery_dgs.core.blackout_watch.kept_start_past_blackout`);
    ``None``: they stand (as for a row with a run request, which beat holds
    whatever its times)."""
    spec = stored.spec
    if spec is None or stored.run_requested_at is not None:
        return None
    moved = kept_start_past_blackout(
        spec,
        stored.stats,
        stored.kept_can_start_at,
        stored.kept_should_start_by,
        now,
        retry_ladder=retry_ladder,
    )
    if moved is None:
        return None
    can, should = moved
    return dataclasses.replace(
        stored,
        kept_can_start_at=can,
        kept_should_start_by=should,
        kept_margin_bucket=margin_bucket_of(should, stored.kept_error_at),
    )


def start_values(stored: StoredSchedule) -> dict[str, Any]:
    """The values of :data:`START_COLUMNS` of ``stored``'s kept times."""
    return {
        "next_can_start_at": stored.kept_can_start_at,
        "should_start_by": stored.kept_should_start_by,
        "margin_bucket": stored.kept_margin_bucket,
    }


def kept_row(times: KeptTimes, pool: str | None) -> tuple[Any, ...]:
    """The values of :data:`KEPT_COLUMNS`."""
    kept = times.condition
    return (
        times.next_can_start_at,
        times.should_start_by,
        int(kept.level),
        kept.reason,
        kept.warning_at,
        kept.warning_reason,
        kept.error_at,
        kept.error_reason,
        pool,
        margin_bucket_of(times.should_start_by, kept.error_at),
    )


def kept_values(times: KeptTimes, pool: str | None) -> dict[str, Any]:
    """:func:`kept_row` by column name."""
    return dict(zip(KEPT_COLUMNS, kept_row(times, pool), strict=True))


def condition_of(values: Sequence[Any]) -> KeptCondition:
    """The kept condition of a row's ``kept_level, kept_reason, warning_at,
    warning_reason, error_at, error_reason`` (datetimes already aware)."""
    from ..core.condition import Level

    level, reason, warning_at, warning_reason, error_at, error_reason = values
    return KeptCondition(
        Level(level if level is not None else Level.ERROR),
        reason or "unknown",
        warning_at,
        warning_reason,
        error_at,
        error_reason,
    )


def _shape_getter(cls: type[ScheduleSpec]) -> Callable[[ScheduleSpec], tuple[Any, ...]]:
    """The getter of the values of ``cls``'s fields but a row's own, as a tuple."""
    getter = _SHAPE_GETTERS.get(cls)
    if getter is None:
        names = [f.name for f in dataclasses.fields(cls) if f.name not in _OWN_FIELDS]
        # Every spec class has several such fields: attrgetter gives a tuple.
        getter = _SHAPE_GETTERS[cls] = attrgetter(*names)
    return getter


def shape_key(spec: ScheduleSpec) -> Hashable:
    """The spec's shape: its class, and the values and types of its fields but
    its name fields, ``args`` and ``kwargs`` (a tuple, which may hold an
    unhashable value). Two specs of one shape have the same kept values as
    new rows."""
    values = _shape_getter(type(spec))(spec)
    return (type(spec), values, tuple(map(type, values)))


class NewRowTimes:
    """Kept values of new rows (registered ``now``, never run), remembered by
    spec shape (:func:`shape_key`: the spec without its name and arguments):
    a bulk insert of a million schedules of a few shapes computes a few
    times, not a million."""

    def __init__(self, now: datetime, retry_ladder: Sequence[timedelta]) -> None:
        self.now = now
        self.retry_ladder = retry_ladder
        self._stats = ScheduleStats(registered_at=now)
        self._by_shape: dict[Hashable, tuple[Any, ...]] = {}

    def row(self, spec: ScheduleSpec) -> tuple[Any, ...]:
        """:func:`kept_row` of a new row of ``spec``."""
        shape = shape_key(spec)
        try:
            found = self._by_shape.get(shape)
        except TypeError:  # a field value that does not hash: computed for this row alone
            return self._computed(spec)
        if found is None:
            if len(self._by_shape) >= NEW_ROW_SHAPES_MAX:
                self._by_shape.clear()
            found = self._by_shape[shape] = self._computed(spec)
        return found

    def _computed(self, spec: ScheduleSpec) -> tuple[Any, ...]:
        times = kept_times(spec, self._stats, self.now, retry_ladder=self.retry_ladder)
        return kept_row(times, spec.pool)
