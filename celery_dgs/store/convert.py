"""Conversions between store rows and the values the store returns."""

from __future__ import annotations

import json
from datetime import datetime, timedelta
from typing import Any

from ..core.spec import SPEC_FORMAT_VERSION, ScheduleSpec, spec_from_dict
from ..core.stats import ScheduleStats
from ..core.tz import ensure_utc
from .base import RunRecord, StoredSchedule
from .models import RunRow, ScheduleRow


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


def stats_of(row: ScheduleRow) -> ScheduleStats:
    avg, dev = row.average_good_duration_s, row.duration_deviation_s
    return ScheduleStats(
        registered_at=row.registered_at,
        last_good_start_at=row.last_good_start_at,
        last_good_end_at=row.last_good_end_at,
        last_start_at=row.last_start_at,
        last_end_at=row.last_end_at,
        failure_count=row.failure_count,
        average_good_duration=None if avg is None else timedelta(seconds=avg),
        duration_deviation=None if dev is None else timedelta(seconds=dev),
    )


def apply_stats(row: ScheduleRow, stats: ScheduleStats) -> None:
    avg, dev = stats.average_good_duration, stats.duration_deviation
    row.registered_at = stats.registered_at
    row.last_good_start_at = stats.last_good_start_at
    row.last_good_end_at = stats.last_good_end_at
    row.last_start_at = stats.last_start_at
    row.last_end_at = stats.last_end_at
    row.failure_count = stats.failure_count
    row.average_good_duration_s = None if avg is None else avg.total_seconds()
    row.duration_deviation_s = None if dev is None else dev.total_seconds()


def stored_schedule(row: ScheduleRow) -> StoredSchedule:
    spec, error = parse_spec(row.spec)
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
    )


def utc(moment: datetime, what: str) -> datetime:
    """``moment`` in UTC; naive datetimes raise ``ValueError`` naming ``what``."""
    return ensure_utc(moment, what=what)
