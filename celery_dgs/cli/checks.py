"""``celery dgs checks``: deferred checks for operators.

There may be millions of pending checks, so nothing here lists them all: the
summary is one grouped query (``check_summary``), lists are bounded
(``--limit``), and one check is read by its name.
"""

from __future__ import annotations

from dataclasses import dataclass

import click

from ..core.schedule_names import CHECK_CONFIGURATION_PREFIX, check_key, split_schedule_name
from ..errors import ScheduleConfigError, UnknownScheduleError
from ..store.check_types import CheckHistoryRecord
from ..store.records import RunRecord, StoredSchedule
from .checks_render import (
    check_json,
    check_text,
    pending_json,
    pending_text,
    summary_json,
    summary_text,
)
from .context import Env, get_env, utcnow, wrap_errors
from .control import ActionResult
from .output import dump_json, iso

#: The most checks ``checks --overdue`` / ``--task`` lists.
MAX_CHECKS_LIMIT = 10_000
#: How many runs and history records ``checks TASK KEY`` shows.
CHECK_DETAIL_LIMIT = 20


def check_name(task_or_name: str, key: str | None) -> tuple[str, str, str]:
    """(name, task, key) of ``TASK KEY`` or of a full name ``task@check:key``;
    a usage error otherwise."""
    if key is None:
        task, configuration = split_schedule_name(task_or_name)
        if not configuration.startswith(CHECK_CONFIGURATION_PREFIX):
            raise click.BadParameter(
                f"{task_or_name!r} is not a check's name: give TASK KEY, or the full "
                f"name TASK@{CHECK_CONFIGURATION_PREFIX}KEY",
                param_hint="'TASK'",
            )
        key = configuration[len(CHECK_CONFIGURATION_PREFIX) :]
    else:
        task = task_or_name
    try:
        key = check_key(task, key)
    except ScheduleConfigError as exc:
        raise click.BadParameter(str(exc), param_hint="'KEY'") from None
    return f"{task}@{CHECK_CONFIGURATION_PREFIX}{key}", task, key


def require_task(env: Env, task: str) -> None:
    """A usage error (exit 2) if ``task`` is not declared as a deferred check
    in this app and has no pending or ended check (read only when needed:
    the summary scans every pending check)."""
    declared = set(env.dgs.check_templates)
    if task in declared:
        return
    store = env.runtime.store
    with_checks = set(store.check_summary(utcnow()).pending)
    if task in with_checks or store.check_history(task=task, limit=1):
        return
    known = sorted(with_checks | declared)
    hint = f"; tasks with checks: {', '.join(known)}" if known else "; no task has checks"
    raise click.BadParameter(f"no deferred checks of task {task!r}{hint}", param_hint="'TASK'")


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
    """The check ``name``; a usage error if the store has neither its row nor
    a history record (or holds ``name`` as a schedule of another kind)."""
    store = env.runtime.store
    try:
        row: StoredSchedule | None = store.get(name)
    except UnknownScheduleError:
        row = None
    if row is not None and row.kind != "check":
        raise click.BadParameter(
            f"{name!r} is a {row.kind} schedule, not a deferred check", param_hint="'TASK'"
        )
    history = store.check_history(name=name, limit=CHECK_DETAIL_LIMIT)
    if row is None and not history:
        require_task(env, task)
        raise click.BadParameter(
            f"no check {name!r} (task {task!r} has no check with key {key!r}, pending or ended)",
            param_hint="'KEY'",
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


@click.command()
@click.argument("task", required=False)
@click.argument("key", required=False)
@click.option("--overdue", is_flag=True, help="List the overdue checks, oldest first.")
@click.option(
    "--task",
    "task_filter",
    metavar="TASK",
    default=None,
    help="List the pending checks of TASK, earliest first (with --overdue: its overdue ones).",
)
@click.option(
    "--limit",
    "-n",
    type=click.IntRange(min=1, max=MAX_CHECKS_LIMIT),
    default=20,
    show_default=True,
    help="How many checks --overdue / --task lists.",
)
@click.option("--cancel", is_flag=True, help="Cancel the pending check TASK KEY.")
@click.option("--json", "as_json", is_flag=True, help="One JSON document instead of a table.")
@click.pass_context
@wrap_errors
def checks(
    ctx: click.Context,
    task: str | None,
    key: str | None,
    overdue: bool,
    task_filter: str | None,
    limit: int,
    cancel: bool,
    as_json: bool,
) -> None:
    """Deferred checks: pending and overdue per task, the overdue ones, one check.

    \b
    checks                        per task: pending, overdue, the oldest due
                                  time and its lateness; totals
    checks --overdue [--task T]   the overdue checks, oldest first (--limit)
    checks TASK KEY               one check (or its full name TASK@check:KEY):
                                  pending (next check, counts, runs) or ended
                                  (its history: outcome, reason, counts, times)
    checks TASK KEY --cancel      cancel it (its history records it cancelled)

    Lateness is now minus the due time. An unknown task or check is a usage
    error (exit status 2).
    """
    env = get_env(ctx)
    color = env.color() and not as_json
    store = env.runtime.store
    if task is None:
        if cancel:
            raise click.UsageError("--cancel needs the check: TASK KEY")
        now = utcnow()
        if overdue or task_filter is not None:
            rows = store.pending_checks(
                task=task_filter, due_before=now if overdue else None, limit=limit
            )
            if task_filter is not None and not rows:
                require_task(env, task_filter)
            if as_json:
                click.echo(
                    dump_json(
                        {
                            "now": iso(now),
                            "task": task_filter,
                            "overdue_only": overdue,
                            "limit": limit,
                            "checks": [pending_json(r, now) for r in rows],
                        }
                    )
                )
                return
            of = f" of {task_filter}" if task_filter is not None else ""
            which = (
                f"overdue checks{of}, oldest first"
                if overdue
                else f"pending checks{of}, earliest first"
            )
            title = f"{which} ({len(rows)} shown, --limit {limit})"
            click.echo(pending_text(title, rows, now, color=color), color=color)
            return
        summary = store.check_summary(now)
        if as_json:
            click.echo(dump_json(summary_json(summary, now)))
        else:
            click.echo(summary_text(summary, now, color=color), color=color)
        return
    if overdue or task_filter is not None:
        raise click.UsageError("--overdue and --task list checks: give no TASK KEY with them")
    name, task, key = check_name(task, key)
    if cancel:
        result = cancel_check(env, name, task)
        if as_json:
            click.echo(
                dump_json({"name": name, "cancelled": result.changed, "lines": list(result.lines)})
            )
            return
        for line in result.lines:
            click.echo(line)
        return
    detail = read_check(env, name, task, key)
    now = utcnow()
    doc = check_json(name, task, key, detail.row, detail.runs, detail.history, now)
    if as_json:
        click.echo(dump_json(doc))
    else:
        text = check_text(doc, detail.row, detail.runs, detail.history, now, color=color)
        click.echo(text, color=color)
