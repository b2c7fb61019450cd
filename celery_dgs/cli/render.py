"""Status rows, leases and runs as tables and as JSON documents."""

from __future__ import annotations

from collections.abc import Sequence
from datetime import datetime
from typing import Any

from ..core.items import ItemCounts
from ..leases.types import LeaseInfo
from ..ops.leases import owner_restarted, silent_owner_note
from ..ops.spec_words import spec_words
from ..ops.timetext import NONE, counted, duration, iso, relative, short_time
from ..registry import WorkerInfo
from ..status import (
    HOLD_BACKOFF,
    HOLD_BLACKOUT,
    HOLD_DISABLED,
    HOLD_NO_WORKER,
    NO_LIVE_WORKER,
    Hold,
    StatusRow,
    count_levels,
    ping_age,
    steal_state,
)
from ..store.records import RunRecord
from .output import Cell, first_line, percent, seconds, styled, table

# -- status ---------------------------------------------------------------------


def status_json(
    rows: Sequence[StatusRow], now: datetime, workers: Sequence[WorkerInfo]
) -> dict[str, Any]:
    return {
        "now": iso(now),
        "counts": count_levels(rows),
        "workers": [
            {"name": w.name, "node": w.node, "slots": w.slots, "queues": list(w.queues)}
            for w in workers
        ],
        "schedules": [status_row_json(r, now) for r in rows],
    }


def status_row_json(row: StatusRow, now: datetime) -> dict[str, Any]:
    lease = row.running
    return {
        "name": row.name,
        "task": row.task,
        "configuration": row.configuration,
        "kind": row.kind,
        "pool": row.pool,
        "condition": row.condition,
        "reason": row.reason,
        "message": row.message,
        "can_start_by": iso(row.can_start_by),
        "may_run_at": iso(row.may_run_at),
        "seconds_until_may_run": (
            None
            if row.may_run_at is None
            else round(max(0.0, (row.may_run_at - now).total_seconds()), 3)
        ),
        "holds": [hold_json(h, now) for h in row.holds],
        "should_start_by": iso(row.should_start_by),
        "error_at": iso(row.error_at),
        "seconds_until_error": (
            None if row.error_at is None else round((row.error_at - now).total_seconds(), 3)
        ),
        "last_good_start_at": iso(row.last_good_start_at),
        "last_good_end_at": iso(row.last_good_end_at),
        "last_start_at": iso(row.last_start_at),
        "last_end_at": iso(row.last_end_at),
        "average_duration_s": seconds(row.average_duration),
        "failure_count": row.failure_count,
        "last_items_ok": row.last_items_ok,
        "last_items_failed": row.last_items_failed,
        "paused": row.paused,
        "active": row.active,
        "run_requested_at": iso(row.run_requested_at),
        "current_token": row.current_token,
        "interval_index": row.interval_index,
        "interval_s": seconds(row.interval),
        "next_target_at": iso(row.next_target_at),
        "upstream_modified_at": iso(row.upstream_modified_at),
        "disabled_reason": row.disabled_reason,
        "running": None
        if lease is None
        else {
            "owner_name": lease.owner_name,
            "owner_node": lease.owner_node,
            "started_at": iso(lease.started_at),
            "token": lease.token,
            "progress": lease.progress,
            "cancel_requested": lease.cancel_requested,
        },
        "priority": row.priority,
        "effective_priority": row.effective_priority,
        "spec_summary": None if row.spec is None else spec_words(row.spec),
    }


def hold_json(hold: Hold, now: datetime) -> dict[str, Any]:
    return {
        "reason": hold.reason,
        "message": hold.message,
        "until": iso(hold.until),
        "seconds_until": (
            None if hold.until is None else round((hold.until - now).total_seconds(), 3)
        ),
        "retry_step": hold.retry_step,
        "retry_steps": hold.retry_steps,
        "retry_delay_s": seconds(hold.retry_delay),
    }


def may_run(row: StatusRow, now: datetime) -> str:
    """The MAY RUN cell: ``now``, ``in 59m``, or why there is no time: ``running``,
    or the first hold without an end (``paused``, ``no worker``, ...)."""
    if row.running is not None:
        return "running"
    if row.may_run_at is not None:
        return "now" if row.may_run_at <= now else relative(row.may_run_at, now)
    held = next((h for h in row.holds if h.until is None), None)
    return NONE if held is None else held.reason.replace("_", " ")


def hold_text(row: StatusRow, hold: Hold, now: datetime) -> str:
    """One hold as a note line: relative times, most useful figure first."""
    if hold.reason == HOLD_BACKOFF and hold.until is not None:
        return (
            f"{row.name} backing off: retry {relative(hold.until, now)}, failure "
            f"{row.failure_count} (retry step {hold.retry_step} of {hold.retry_steps}: "
            f"{duration(hold.retry_delay)})"
        )
    if hold.reason == HOLD_BLACKOUT and hold.until is not None:
        return f"{row.name} in a blackout window: it ends {relative(hold.until, now)}"
    if hold.reason == HOLD_NO_WORKER:
        return f"{hold.message}: it cannot run until one can"
    if hold.reason == HOLD_DISABLED:
        return f"{hold.message}; `celery dgs resume {row.name}` enables it now"
    return hold.message


def priority_cell(row: StatusRow) -> str:
    """``50``, or ``80→20`` while the elevator (or a run request) serves it in a
    higher class than its own."""
    if row.priority is None:
        return NONE
    if row.effective_priority is None or row.effective_priority == row.priority:
        return str(row.priority)
    return f"{row.priority}→{row.effective_priority}"


def _flags(row: StatusRow) -> str:
    flags = []
    if row.paused:
        flags.append("paused")
    if row.run_requested_at is not None:
        flags.append("run-requested")
    if not row.active:
        flags.append("inactive")
    if row.disabled_reason is not None:
        flags.append("disabled")
    if row.interval_index is not None:
        flags.append(f"interval-{row.interval_index}:{duration(row.interval)}")
    return ",".join(flags) or NONE


def _running(
    lease: LeaseInfo | None,
    now: datetime,
    ping_timeout: float | None,
    restarted: bool = False,
) -> str:
    """The RUNNING cell; ``restarted``: the owner's worker restarted since the
    run's last ping (:func:`~celery_dgs.ops.leases.owner_restarted`)."""
    if lease is None:
        return NONE
    extra = [duration(now - lease.started_at)]
    if lease.progress is not None:
        extra.append(percent(lease.progress))
    if lease.cancel_requested:
        extra.append("cancelling")
    silent = ping_age(lease, now)
    if restarted:
        extra.append("owner restarted")
    elif ping_timeout is not None and silent > ping_timeout:
        extra.append(f"silent {duration(silent)}")
    return f"{lease.owner_name} ({', '.join(extra)})"


def status_text(
    rows: Sequence[StatusRow],
    now: datetime,
    workers: Sequence[WorkerInfo],
    *,
    color: bool,
    capacity: int | None = None,
    counts: dict[str, int] | None = None,
    running: int | None = None,
    ping_timeout: float | None = None,
    steal_delay: float = 0.0,
    specs: bool = False,
) -> str:
    """The table. ``capacity`` (``dgs_capacity``) is the slot count beat uses
    while no worker is registered. ``counts`` (by level) and ``running``: of
    every selected schedule, when ``rows`` are a page of them (else counted
    over ``rows``). ``specs``: below the table, each row's spec in words."""
    if counts is None:
        counts = count_levels(rows)
    if running is None:
        running = sum(1 for r in rows if r.running is not None)
    if workers or not capacity:
        total = sum(w.slots for w in workers)
        slots = f"{counted(len(workers), 'live worker')}, {counted(total, 'slot')}"
    else:
        slots = f"no live workers registered, dgs_capacity {capacity} slots"
    summary = ", ".join(
        styled(f"{n} {level}", level, color=color and n > 0) for level, n in counts.items()
    )
    head = (
        f"celery-dgs status at {short_time(now)}: {counted(sum(counts.values()), 'schedule')} "
        f"({summary}); "
        f"{running} running; {slots}"
    )
    if not rows:
        return head + ("" if sum(counts.values()) else "\nno schedules match")
    restarted = {r.name: owner_restarted(r.running, workers) for r in rows if r.running is not None}
    body = table(
        [
            "CONDITION",
            "SCHEDULE",
            "REASON",
            "PRIO",
            "MAY RUN",
            "SHOULD START",
            "ERROR AT",
            "LAST GOOD START",
            "AVG",
            "FAILS",
            "FLAGS",
            "RUNNING",
        ],
        [
            [
                Cell(r.condition, r.condition),
                r.name,
                r.reason,
                priority_cell(r),
                may_run(r, now),
                relative(r.should_start_by, now),
                relative(r.error_at, now),
                relative(r.last_good_start_at, now),
                duration(r.average_duration),
                NONE if r.failure_count is None else str(r.failure_count),
                _flags(r),
                _running(r.running, now, ping_timeout, restarted.get(r.name) is not None),
            ]
            for r in rows
        ],
        color=color,
    )
    notes = []
    # With no live worker at all, say it once rather than on every schedule.
    nobody = not workers and any(h.reason == HOLD_NO_WORKER for r in rows for h in r.holds)
    if nobody:
        notes.append(f"  held every schedule: {NO_LIVE_WORKER}: nothing runs until one registers")
    for r in rows:
        if specs and r.spec is not None:
            notes.append(f"  {r.name}: {spec_words(r.spec)}")
        if r.condition != "OK":
            notes.append(f"  {styled(r.condition, r.condition, color=color)} {r.message}")
        silent = (
            silent_owner_note(
                r.name,
                r.running,
                now,
                ping_timeout=ping_timeout,
                steal_delay=steal_delay,
                can_start_by=r.can_start_by,
                restarted_at=restarted.get(r.name),
                pool=r.pool,
                workers=workers,
            )
            if r.running is not None and ping_timeout is not None
            else None
        )
        if silent is not None:
            notes.append(f"  {silent}")
        notes.extend(
            f"  held {hold_text(r, h, now)}"
            for h in r.holds
            if not (nobody and h.reason == HOLD_NO_WORKER)
        )
    return "\n".join([head, body, *(["", *notes] if notes else [])])


# -- leases ---------------------------------------------------------------------


def lease_json(
    lease: LeaseInfo, now: datetime, *, ping_timeout: float, steal_delay: float
) -> dict[str, Any]:
    return {
        "schedule": lease.schedule,
        "owner_name": lease.owner_name,
        "owner_node": lease.owner_node,
        "owner_tag": lease.owner_tag,
        "started_at": iso(lease.started_at),
        "running_s": round(max(0.0, (now - lease.started_at).total_seconds()), 3),
        "last_ping_at": iso(lease.last_ping_at),
        "ping_age_s": round(ping_age(lease, now), 3),
        "steal_state": steal_state(lease, now, ping_timeout=ping_timeout, steal_delay=steal_delay),
        "steal_start_at": iso(lease.steal_start_at),
        "token": lease.token,
        "progress": lease.progress,
        "cancel_requested": lease.cancel_requested,
        "dispatch_id": lease.dispatch_id,
    }


def leases_text(docs: Sequence[dict[str, Any]], now: datetime, *, color: bool) -> str:
    head = f"celery-dgs leases at {short_time(now)}: {counted(len(docs), 'live run')}"
    if not docs:
        return head
    body = table(
        [
            "SCHEDULE",
            "OWNER",
            "NODE",
            "STARTED",
            "PING AGE",
            "STEAL",
            "TOKEN",
            "PROGRESS",
            "CANCEL",
        ],
        [
            [
                d["schedule"],
                d["owner_name"],
                d["owner_node"],
                f"{duration(d['running_s'])} ago",
                f"{d['ping_age_s']:.1f}s",
                Cell(d["steal_state"], d["steal_state"]),
                str(d["token"]),
                percent(d["progress"]),
                "requested" if d["cancel_requested"] else NONE,
            ]
            for d in docs
        ],
        color=color,
    )
    return f"{head}\n{body}"


# -- runs -----------------------------------------------------------------------


def run_json(run: RunRecord) -> dict[str, Any]:
    return {
        "run_id": run.run_id,
        "outcome": run.outcome,
        "owner_node": run.owner_node,
        "owner_name": run.owner_name,
        "token": run.token,
        "started_at": iso(run.started_at),
        "ended_at": iso(run.ended_at),
        "duration_s": None if run.duration_s is None else round(run.duration_s, 3),
        "error": run.error,
        "progress": run.progress,
        "items_ok": run.items_ok,
        "items_failed": run.items_failed,
        "fenced": run.fenced,
        "dispatch_id": run.dispatch_id,
    }


def items_cell(items: ItemCounts | None) -> str:
    """A run's item counts in a table cell: ``3/10 failed``, or ``-`` for none."""
    return NONE if items is None else f"{items.failed}/{items.total} failed"


#: Outcomes whose recorded end is when the run was found gone (its lease
#: expired or taken over), not when its body stopped: it ran at most that long.
_END_FOUND_LATER = frozenset({"lost", "stolen"})


def run_duration_cell(run: RunRecord, now: datetime) -> str:
    """``12s``; ``3m05s…`` while running; ``≤2m32s`` for a run found gone
    (lost, stolen): its end is the take-over, and its body may have died
    any time before."""
    if run.outcome == "running":
        return duration(now - run.started_at) + "…"
    at_most = "≤" if run.outcome in _END_FOUND_LATER and run.duration is not None else ""
    return at_most + duration(run.duration)


def runs_text(name: str, runs: Sequence[RunRecord], now: datetime, *, color: bool) -> str:
    head = f"runs of {name}, newest first ({len(runs)} shown)"
    if not runs:
        return f"{head}\nno runs recorded"
    body = table(
        ["STARTED", "OUTCOME", "OWNER", "NODE", "DURATION", "TOKEN", "ITEMS", "ERROR"],
        [
            [
                short_time(r.started_at),
                Cell(r.outcome + (" (fenced)" if r.fenced else ""), r.outcome),
                r.owner_name or NONE,
                r.owner_node or NONE,
                run_duration_cell(r, now),
                NONE if r.token is None else str(r.token),
                items_cell(r.items),
                first_line(r.error),
            ]
            for r in runs
        ],
        color=color,
    )
    return f"{head}\n{body}"
