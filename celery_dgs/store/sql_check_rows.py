"""Deferred checks' rows in the SQL store: their history records, the
``COPY`` text of a new row, and what a run's end does to a pending check
(:func:`apply_check_end`)."""

from __future__ import annotations

from datetime import datetime
from typing import Any, cast

from sqlalchemy import Connection, Table, insert

from ..core.checks import CheckAgain, CheckEnded, CheckState, check_end
from ..core.spec import CheckSpec
from ..core.stats import ScheduleStats
from .check_types import CheckHistoryRecord, history_record
from .convert import parse_spec
from .models import CheckHistoryRow, ScheduleFields

_H = cast(Table, CheckHistoryRow.__table__)


def copy_text(value: str) -> str:
    """``value`` as a field of ``COPY``'s text format (backslash, tab and line ends escaped)."""
    if "\\" in value or "\t" in value or "\n" in value or "\r" in value:
        value = (
            value.replace("\\", "\\\\")
            .replace("\t", "\\t")
            .replace("\n", "\\n")
            .replace("\r", "\\r")
        )
    return value


def history_values(record: CheckHistoryRecord) -> dict[str, Any]:
    return {
        "name": record.name,
        "task": record.task,
        "key": record.key,
        "outcome": record.outcome,
        "reason": record.reason,
        "check_count": record.check_count,
        "failure_count": record.failure_count,
        "added_at": record.added_at,
        "first_check_at": record.first_check_at,
        "last_check_at": record.last_check_at,
        "ended_at": record.ended_at,
    }


def history_row_record(row: CheckHistoryRow) -> CheckHistoryRecord:
    return CheckHistoryRecord(
        name=row.name,
        task=row.task,
        key=row.key,
        outcome=row.outcome,
        reason=row.reason,
        check_count=row.check_count,
        failure_count=row.failure_count,
        added_at=row.added_at,
        first_check_at=row.first_check_at,
        last_check_at=row.last_check_at,
        ended_at=row.ended_at,
    )


def apply_check_end(
    conn: Connection,
    row: ScheduleFields,
    new_stats: ScheduleStats,
    outcome: str,
    verdict: object,
    ended_at: datetime,
    error: str | None,
    last_check_at: datetime | None,
) -> None:
    """Move or end the pending check ``row`` after a run (its stats already
    applied): :func:`~celery_dgs.core.checks.check_end`. An inactive row (a
    cancelled check) or an unreadable spec is left as it is."""
    spec = parse_spec(row.spec)[0]
    if not row.active or not isinstance(spec, CheckSpec):
        return
    state = CheckState(row.first_check_at or ended_at, row.check_count or 0)
    step = check_end(spec, state, new_stats, outcome, verdict, ended_at, error)
    if isinstance(step, CheckAgain):
        row.next_target_at = step.next_check_at
        row.check_count = step.check_count
        earliest = row.earliest_check_at
        row.earliest_check_at = (
            step.next_check_at if earliest is None else min(earliest, step.next_check_at)
        )
    elif isinstance(step, CheckEnded):
        row.active = False
        row.check_count = step.check_count
        record = history_record(
            spec,
            step,
            failure_count=new_stats.failure_count,
            added_at=row.registered_at,
            first_check_at=row.first_check_at,
            last_check_at=last_check_at,
            ended_at=ended_at,
        )
        conn.execute(insert(_H), [history_values(record)])
