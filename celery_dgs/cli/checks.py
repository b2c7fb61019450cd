"""``celery dgs checks``: deferred checks for operators.

There may be millions of pending checks, so nothing here lists them all: the
summary is one grouped query (``check_summary``), lists are bounded
(``--limit``), and one check is read by its name (:mod:`celery_dgs.ops.checks`).
"""

from __future__ import annotations

import click

from ..ops.checks import cancel_check, check_name, read_check, require_task, summary_json
from ..ops.env import Env, utcnow
from ..ops.timetext import iso
from .checks_render import check_json, check_text, pending_json, pending_text, summary_text
from .context import get_env, use_color, wrap_errors
from .output import dump_json

#: The most checks ``checks --overdue`` / ``--task`` lists.
MAX_CHECKS_LIMIT = 10_000


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
    color = use_color(ctx) and not as_json
    store = env.runtime.store
    if task is None:
        if cancel:
            raise click.UsageError("--cancel needs the check: TASK KEY")
        if overdue or task_filter is not None:
            _list_checks(env, task_filter, overdue, limit, as_json=as_json, color=color)
            return
        now = utcnow()
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


def _list_checks(
    env: Env, task: str | None, overdue: bool, limit: int, *, as_json: bool, color: bool
) -> None:
    """``checks --overdue`` / ``--task``: the overdue checks oldest first, or
    the pending ones of ``task`` earliest first, at most ``limit``."""
    now = utcnow()
    rows = env.runtime.store.pending_checks(
        task=task, due_before=now if overdue else None, limit=limit
    )
    if task is not None and not rows:
        require_task(env, task, argument="--task")
    if as_json:
        click.echo(
            dump_json(
                {
                    "now": iso(now),
                    "task": task,
                    "overdue_only": overdue,
                    "limit": limit,
                    "checks": [pending_json(r, now) for r in rows],
                }
            )
        )
        return
    of = f" of {task}" if task is not None else ""
    order = "oldest first" if overdue else "earliest first"
    which = f"{'overdue' if overdue else 'pending'} checks{of}, {order}"
    title = f"{which} ({len(rows)} shown, --limit {limit})"
    click.echo(pending_text(title, rows, now, color=color), color=color)
