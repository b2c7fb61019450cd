"""Deferred checks as tables and as JSON documents (``celery dgs checks``, the
``status`` summary line and its ``checks`` object)."""

from __future__ import annotations

from collections.abc import Sequence
from datetime import datetime, timedelta
from typing import Any

from ..core.durations import format_duration
from ..core.schedule_names import CHECK_CONFIGURATION_PREFIX
from ..core.spec import CheckSpec
from ..ops.checks import PastWithin, lateness_s, summary_json
from ..ops.timetext import NONE, iso, late_text, short_time
from ..store.check_types import CheckHistoryRecord, CheckSummary
from ..store.records import RunRecord, StoredSchedule
from .output import Cell, styled, table
from .render import run_json, runs_text

#: Colour of each way a check ended (when colour is on).
END_STYLES = {"done": "success", "cancelled": "cancelled"}


def check_key_of(row: StoredSchedule) -> str:
    """A stored check's key (from its spec, else from its configuration)."""
    if isinstance(row.spec, CheckSpec):
        return row.spec.key
    return row.configuration.removeprefix(CHECK_CONFIGURATION_PREFIX)


# -- the summary ----------------------------------------------------------------


def status_checks_json(summary: CheckSummary, now: datetime) -> dict[str, Any]:
    """``status --json``'s ``checks`` object: totals only (no per-task rows)."""
    doc = summary_json(summary, now)
    return {k: doc[k] for k in ("pending", "overdue", "oldest_due_at", "oldest_lateness_s")}


def status_checks_line(summary: CheckSummary, now: datetime, *, color: bool) -> str | None:
    """``status``'s one line about deferred checks; ``None`` when none is pending."""
    if not summary.total_pending:
        return None
    overdue = summary.total_overdue
    oldest = min(summary.oldest_due.values(), default=None)
    late = f" (oldest {late_text(oldest, now)})" if overdue else ""
    count = styled(f"{overdue:,} overdue", "WARNING", color=color and overdue > 0)
    return (
        f"deferred checks: {summary.total_pending:,} pending, {count}{late}; "
        "details: celery dgs checks"
    )


def past_within_text(past: PastWithin, *, color: bool) -> str:
    """``status``'s ERROR line for a task whose oldest overdue check is past its ``within``."""
    head = styled("ERROR", "ERROR", color=color)
    return (
        f"{head} deferred checks of {past.task} past their within: {past.name} is "
        f"{format_duration(timedelta(seconds=round(past.late_s)))} late "
        f"(within {format_duration(timedelta(seconds=past.within_s))})"
    )


def summary_text(summary: CheckSummary, now: datetime, *, color: bool) -> str:
    head = (
        f"celery-dgs deferred checks at {short_time(now)}: {summary.total_pending:,} pending, "
        f"{summary.total_overdue:,} overdue"
    )
    if not summary.pending:
        return head + "\nno pending checks"
    rows: list[list[Cell | str]] = []
    for task, count in sorted(summary.pending.items()):
        overdue = summary.overdue.get(task, 0)
        oldest = summary.oldest_due.get(task)
        rows.append(
            [
                task,
                f"{count:,}",
                Cell(f"{overdue:,}", "WARNING" if overdue else None),
                short_time(oldest),
                late_text(oldest, now),
            ]
        )
    body = table(["TASK", "PENDING", "OVERDUE", "OLDEST DUE", "LATENESS"], rows, color=color)
    return f"{head}\n{body}"


# -- a list of pending checks -----------------------------------------------------


def pending_json(row: StoredSchedule, now: datetime) -> dict[str, Any]:
    due = row.stats.next_target_at
    return {
        "name": row.name,
        "task": row.task,
        "key": check_key_of(row),
        "due_at": iso(due),
        "lateness_s": lateness_s(due, now),
        "check_count": row.check_count or 0,
        "failure_count": row.stats.failure_count or 0,
        "paused": row.paused,
    }


def pending_text(title: str, rows: Sequence[StoredSchedule], now: datetime, *, color: bool) -> str:
    if not rows:
        return f"{title}\nnone"
    body = table(
        ["TASK", "KEY", "DUE", "LATENESS", "CHECKS", "FAILS"],
        [
            [
                r.task,
                check_key_of(r),
                short_time(r.stats.next_target_at),
                Cell(
                    late_text(r.stats.next_target_at, now) + (", paused" if r.paused else ""),
                    "WARNING" if (r.stats.next_target_at or now) < now else None,
                ),
                str(r.check_count or 0),
                str(r.stats.failure_count or 0),
            ]
            for r in rows
        ],
        color=color,
    )
    return f"{title}\n{body}"


# -- one check ---------------------------------------------------------------------


def history_json(record: CheckHistoryRecord) -> dict[str, Any]:
    return {
        "outcome": record.outcome,
        "reason": record.reason,
        "check_count": record.check_count,
        "failure_count": record.failure_count,
        "added_at": iso(record.added_at),
        "first_check_at": iso(record.first_check_at),
        "last_check_at": iso(record.last_check_at),
        "ended_at": iso(record.ended_at),
    }


def check_json(
    name: str,
    task: str,
    key: str,
    row: StoredSchedule | None,
    runs: Sequence[RunRecord],
    history: Sequence[CheckHistoryRecord],
    now: datetime,
) -> dict[str, Any]:
    pending = row is not None and row.active
    spec = row.spec if row is not None and isinstance(row.spec, CheckSpec) else None
    due = row.stats.next_target_at if pending and row is not None else None
    return {
        "name": name,
        "task": task,
        "key": key,
        "state": "pending" if pending else "ended",
        "paused": pending and row is not None and row.paused,
        "due_at": iso(due),
        "lateness_s": lateness_s(due, now),
        "check_count": None if row is None else row.check_count or 0,
        "max_checks": None if spec is None else spec.max_checks,
        "first_check_at": None if not pending or row is None else iso(row.first_check_at),
        "failure_count": None if row is None else row.stats.failure_count or 0,
        "added_at": None if not pending or row is None else iso(row.stats.registered_at),
        "runs": [run_json(r) for r in runs],
        "history": [history_json(h) for h in history],
    }


def history_text(history: Sequence[CheckHistoryRecord], *, color: bool) -> str:
    return table(
        ["ENDED", "OUTCOME", "REASON", "CHECKS", "FAILS", "FIRST CHECK", "LAST CHECK", "ADDED"],
        [
            [
                short_time(h.ended_at),
                Cell(h.outcome, END_STYLES.get(h.outcome, "WARNING")),
                h.reason or NONE,
                str(h.check_count),
                str(h.failure_count),
                short_time(h.first_check_at),
                short_time(h.last_check_at),
                short_time(h.added_at),
            ]
            for h in history
        ],
        color=color,
    )


def check_text(
    doc: dict[str, Any],
    row: StoredSchedule | None,
    runs: Sequence[RunRecord],
    history: Sequence[CheckHistoryRecord],
    now: datetime,
    *,
    color: bool,
) -> str:
    """One check: its state (pending: due time, counts; ended: how), its runs,
    its history records (an ended check; a check added again keeps the older)."""
    lines = [f"check {doc['name']} (task {doc['task']}, key {doc['key']})"]
    if doc["state"] == "pending" and row is not None:
        due = row.stats.next_target_at
        checks = f"{doc['check_count']}" + (
            f" of at most {doc['max_checks']}" if doc["max_checks"] is not None else ""
        )
        lines += [
            f"  state:       {styled('pending', 'pending', color=color)}"
            + (f", paused (celery dgs resume {doc['name']})" if doc["paused"] else ""),
            f"  next check:  {short_time(due)} ({late_text(due, now)})",
            f"  checks run:  {checks}",
            f"  first check: {short_time(row.first_check_at)}",
            f"  added:       {short_time(row.stats.registered_at)}",
            f"  failures:    {doc['failure_count']} in a row",
        ]
        if row.spec is None:
            lines.append(f"  invalid stored spec: {row.spec_error}")
    else:
        last = history[0] if history else None
        how = (
            NONE
            if last is None
            else (
                f"{last.outcome}"
                + (f" ({last.reason})" if last.reason not in (None, last.outcome) else "")
                + f" at {short_time(last.ended_at)}"
            )
        )
        lines.append(f"  state:       ended: {how}")
    if history:
        lines += [
            "",
            f"history of {doc['name']}, latest end first ({len(history)} shown)",
            history_text(history, color=color),
        ]
    if row is not None:
        lines += ["", runs_text(doc["name"], runs, now, color=color)]
    return "\n".join(lines)
