"""Deferred checks: a check by its name, its detail, cancelling it, and the
pending checks' summary as a document.

There may be millions of pending checks, so nothing here lists them all: the
summary is one grouped query (``check_summary``) and one check is read by
its name.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime
from typing import Any

from ..core.schedule_names import CHECK_CONFIGURATION_PREFIX, check_key, split_schedule_name
from ..core.spec import CheckSpec
from ..errors import ScheduleConfigError, UnknownScheduleError
from ..store.check_types import CheckHistoryRecord, CheckSummary
from ..store.records import RunRecord, StoredSchedule
from .actions import ActionResult
from .env import Env, utcnow
from .errors import UnknownTarget
from .timetext import iso

#: How many runs and history records one check's detail holds.
CHECK_DETAIL_LIMIT = 20


def check_name(task_or_name: str, key: str | None) -> tuple[str, str, str]:
    """(name, task, key) of ``TASK KEY`` or of a full name ``task@check:key``;
    :class:`~.errors.UnknownTarget` otherwise."""
    if key is None:
        task, configuration = split_schedule_name(task_or_name)
        if not configuration.startswith(CHECK_CONFIGURATION_PREFIX):
            task_alone = "" if configuration else f" (--task {task_or_name} lists its checks)"
            raise UnknownTarget(
                f"{task_or_name!r} is not a check's name: give TASK KEY, or the full "
                f"name TASK@{CHECK_CONFIGURATION_PREFIX}KEY{task_alone}",
                argument="TASK",
            )
        key = configuration[len(CHECK_CONFIGURATION_PREFIX) :]
    else:
        task = task_or_name
    try:
        key = check_key(task, key)
    except ScheduleConfigError as exc:
        raise UnknownTarget(str(exc), argument="KEY") from None
    return f"{task}@{CHECK_CONFIGURATION_PREFIX}{key}", task, key


def require_task(env: Env, task: str, argument: str = "TASK") -> None:
    """:class:`~.errors.UnknownTarget` (of the command's ``argument``, an
    argument or an option) if ``task`` is not declared as a deferred check in
    this app and has no pending or ended check (read only when needed: the
    summary scans every pending check)."""
    declared = set(env.dgs.check_templates)
    if task in declared:
        return
    store = env.runtime.store
    with_checks = set(store.check_summary(utcnow()).pending)
    if task in with_checks or store.check_history(task=task, limit=1):
        return
    known = sorted(with_checks | declared)
    hint = f"; tasks with checks: {', '.join(known)}" if known else "; no task has checks"
    raise UnknownTarget(f"no deferred checks of task {task!r}{hint}", argument=argument)


@dataclass(frozen=True)
class CheckDetail:
    """One check as stored: its row (``None``: pruned or never added), its
    latest runs and its history records (the latest end first)."""

    name: str
    task: str
    key: str
    row: StoredSchedule | None
    runs: list[RunRecord]
    history: list[CheckHistoryRecord]


def read_check(env: Env, name: str, task: str, key: str) -> CheckDetail:
    """The check ``name``; :class:`~.errors.UnknownTarget` if the store has
    neither its row nor a history record (or holds ``name`` as a schedule of
    another kind)."""
    store = env.runtime.store
    try:
        row: StoredSchedule | None = store.get(name)
    except UnknownScheduleError:
        row = None
    if row is not None and row.kind != "check":
        raise UnknownTarget(
            f"{name!r} is a {row.kind} schedule, not a deferred check", argument="TASK"
        )
    history = store.check_history(name=name, limit=CHECK_DETAIL_LIMIT)
    if row is None and not history:
        require_task(env, task)
        raise UnknownTarget(
            f"no check {name!r} (task {task!r} has no check with key {key!r}, pending or ended)",
            argument="KEY",
        )
    runs = store.runs(name, limit=CHECK_DETAIL_LIMIT) if row is not None else []
    return CheckDetail(name, task, key, row, runs, history)


def cancel_check(env: Env, name: str, task: str) -> ActionResult:
    """End the pending check ``name`` as cancelled (``checks TASK KEY --cancel``)."""
    rt = env.runtime
    if not rt.store.cancel_checks([name], utcnow()):
        require_task(env, task)
        return ActionResult(False, (f"no pending check {name}; nothing changed",))
    lines = [f"cancelled check {name}: its history records it cancelled"]
    lease = rt.leases.get(name)
    if lease is not None:
        lines.append(
            f"note: its run on {lease.owner_name} keeps going (its verdict is "
            f"ignored); `celery dgs cancel {name}` stops it"
        )
    return ActionResult(True, tuple(lines))


def cancel_check_named(env: Env, name: str) -> ActionResult:
    """:func:`cancel_check` of a check's full name (the status page's action)."""
    name, task, _key = check_name(name, None)
    return cancel_check(env, name, task)


def lateness_s(due: datetime | None, now: datetime) -> float | None:
    """Seconds ``due`` is behind ``now`` (negative: not due yet)."""
    return None if due is None else round((now - due).total_seconds(), 3)


def summary_json(summary: CheckSummary, now: datetime) -> dict[str, Any]:
    """The pending checks' summary as a JSON object: totals and per task."""
    oldest = min(summary.oldest_due.values(), default=None)
    return {
        "now": iso(now),
        "pending": summary.total_pending,
        "overdue": summary.total_overdue,
        "oldest_due_at": iso(oldest),
        "oldest_lateness_s": lateness_s(oldest, now),
        "tasks": [
            {
                "task": task,
                "pending": count,
                "overdue": summary.overdue.get(task, 0),
                "oldest_due_at": iso(summary.oldest_due.get(task)),
                "oldest_lateness_s": lateness_s(summary.oldest_due.get(task), now),
            }
            for task, count in sorted(summary.pending.items())
        ],
    }


@dataclass(frozen=True)
class PastWithin:
    """A task whose oldest overdue check is past its ``within`` (its deadline):
    the check, how late it is, and its ``within`` (seconds)."""

    task: str
    name: str
    late_s: float
    within_s: float


def checks_past_within(env: Env, summary: CheckSummary, now: datetime) -> list[PastWithin]:
    """The tasks whose oldest overdue check started later than its ``within``
    allows: one read of that check per task with overdue checks."""
    found = []
    store = env.runtime.store
    for task in sorted(summary.overdue):
        oldest = store.pending_checks(task=task, due_before=now, limit=1)
        due = oldest[0].stats.next_target_at if oldest else None
        if due is None:
            continue
        row = oldest[0]
        within = row.spec.within if isinstance(row.spec, CheckSpec) else None
        late = (now - due).total_seconds()
        if within is not None and late > within.total_seconds():
            found.append(PastWithin(task, row.name, late, within.total_seconds()))
    return found
