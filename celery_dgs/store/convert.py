"""Conversions between store rows and the values the store returns."""

from __future__ import annotations

import json
import logging
import math
from collections.abc import Callable
from datetime import datetime, timedelta
from typing import Any

from ..core.spec import MAX_INTERVAL_INDEX, SPEC_FORMAT_VERSION, ScheduleSpec
from ..core.spec_build import spec_from_dict
from ..core.stats import ScheduleStats
from ..core.tz import ensure_utc
from .models import RunRow, ScheduleFields
from .records import RunRecord, StoredSchedule

log = logging.getLogger(__name__)

#: The stored duration columns of ``ScheduleStats`` (seconds).
DURATION_FIELDS = ("average_good_duration_s", "duration_deviation_s")


def stored_duration(seconds: Any) -> timedelta | None:
    """A stored duration as a ``timedelta``; ``ValueError`` for a value that is not
    a finite, non-negative number of seconds (a hand-edited row)."""
    if seconds is None:
        return None
    if not isinstance(seconds, (int, float)) or not math.isfinite(seconds) or seconds < 0:
        raise ValueError(f"expected a finite number of seconds >= 0, got {seconds!r}")
    return timedelta(seconds=seconds)


def checked_durations(
    values: tuple[Any, ...], convert: Callable[[Any], timedelta | None] = stored_duration
) -> tuple[list[timedelta | None], str | None]:
    """``values`` (in :data:`DURATION_FIELDS` order) converted; an invalid one
    becomes ``None`` and the error names its field (the last one wins)."""
    out: list[timedelta | None] = []
    error = None
    for field, raw in zip(DURATION_FIELDS, values, strict=True):
        try:
            out.append(convert(raw))
        except ValueError as exc:
            out.append(None)
            error = f"{field}: {exc}"
    return out, error


def _row_durations(row: ScheduleFields) -> tuple[list[timedelta | None], str | None]:
    durations, error = checked_durations((row.average_good_duration_s, row.duration_deviation_s))
    return durations, error or checked_index(row.interval_index)[1]


def checked_index(raw: Any) -> tuple[int | None, str | None]:
    """The stored ``interval_index``, or ``None`` and an error naming the field
    when it is not a whole number on the ladder (a hand-edited row)."""
    if raw is None:
        return None, None
    if isinstance(raw, bool) or not isinstance(raw, int) or not 0 <= raw <= MAX_INTERVAL_INDEX:
        return None, (
            f"interval_index: expected a whole number from 0 to {MAX_INTERVAL_INDEX}, got {raw!r}"
        )
    return raw, None


def spec_json(spec: ScheduleSpec) -> str:
    """The canonical JSON text of a spec (sorted keys, so equal specs compare equal)."""
    return json.dumps(spec.to_dict(), sort_keys=True, separators=(",", ":"))


def parse_spec(text: str) -> tuple[ScheduleSpec | None, str | None]:
    """``(spec, None)`` or, for JSON that no longer validates, ``(None, why)``."""
    try:
        data: Any = json.loads(text)
        if not isinstance(data, dict):
            raise ValueError(f"expected a JSON object, got {type(data).__name__}")
        data.setdefault("format", SPEC_FORMAT_VERSION)
        return spec_from_dict(data), None
    except (ValueError, TypeError, KeyError, AttributeError) as exc:
        return None, f"{type(exc).__name__}: {exc}"


def stats_of(row: ScheduleFields) -> ScheduleStats:
    """The row's statistics. An invalid stored duration is logged (schedule and
    field) and read as unknown, so recording a run over it repairs the row
    instead of failing the worker."""
    (average, deviation), error = _row_durations(row)
    if error is not None:
        log.error("celery-dgs: schedule %r: %s; read as unknown", row.name, error)
    return ScheduleStats(
        registered_at=row.registered_at,
        last_good_start_at=row.last_good_start_at,
        last_good_end_at=row.last_good_end_at,
        last_start_at=row.last_start_at,
        last_end_at=row.last_end_at,
        failure_count=row.failure_count,
        average_good_duration=average,
        duration_deviation=deviation,
        interval_index=checked_index(row.interval_index)[0],
        next_target_at=row.next_target_at,
        upstream_modified_at=row.upstream_modified_at,
        last_items_ok=row.last_items_ok,
        last_items_failed=row.last_items_failed,
    )


def apply_stats(row: ScheduleFields, stats: ScheduleStats) -> None:
    avg, dev = stats.average_good_duration, stats.duration_deviation
    row.registered_at = stats.registered_at
    row.last_good_start_at = stats.last_good_start_at
    row.last_good_end_at = stats.last_good_end_at
    row.last_start_at = stats.last_start_at
    row.last_end_at = stats.last_end_at
    row.failure_count = stats.failure_count
    row.average_good_duration_s = None if avg is None else avg.total_seconds()
    row.duration_deviation_s = None if dev is None else dev.total_seconds()
    row.interval_index = stats.interval_index
    row.next_target_at = stats.next_target_at
    row.upstream_modified_at = stats.upstream_modified_at
    row.last_items_ok = stats.last_items_ok
    row.last_items_failed = stats.last_items_failed


def stored_schedule(row: ScheduleFields) -> StoredSchedule:
    """The row as the store returns it; invalid statistics make it unschedulable
    (``spec`` None, ``spec_error`` naming the field), like an invalid spec."""
    spec, error = parse_spec(row.spec)
    bad_stats = _row_durations(row)[1]
    if bad_stats is not None:
        spec, error = None, bad_stats
    return StoredSchedule(
        name=row.name,
        task=row.task,
        configuration=row.configuration,
        kind=row.kind,
        spec=spec,
        spec_error=error,
        stats=stats_of(row),
        active=bool(row.active),
        paused=bool(row.paused),
        current_token=row.current_token,
        run_requested_at=row.run_requested_at,
        change_seq=row.change_seq,
        updated_at=row.updated_at,
        declaration_error=row.declaration_error,
        owner=row.owner,
        disabled_reason=row.disabled_reason,
        run_requested_priority=row.run_requested_priority,
        first_check_at=row.first_check_at,
        check_count=row.check_count,
        kept_can_start_at=row.next_can_start_at,
        kept_should_start_by=row.should_start_by,
        kept_error_at=row.error_at,
        kept_margin_bucket=row.margin_bucket,
    )


def run_record(row: RunRow) -> RunRecord:
    return RunRecord(
        id=row.id,
        run_id=row.run_id,
        schedule=row.schedule,
        dispatch_id=row.dispatch_id,
        owner_node=row.owner_node,
        owner_name=row.owner_name,
        owner_tag=row.owner_tag,
        token=row.token,
        started_at=row.started_at,
        ended_at=row.ended_at,
        outcome=row.outcome,
        error=row.error,
        duration_s=row.duration_s,
        progress=row.progress,
        fenced=bool(row.fenced),
        items_ok=row.items_ok,
        items_failed=row.items_failed,
    )


def utc(moment: datetime, what: str) -> datetime:
    """``moment`` in UTC; naive datetimes raise ``ValueError`` naming ``what``."""
    return ensure_utc(moment, what=what)
