"""Read-only commands: ``leases``, ``runs`` (their reads: :mod:`celery_dgs.ops`;
``status``: :mod:`.status`)."""

from __future__ import annotations

import click

from ..ops.env import utcnow
from ..ops.leases import read_leases
from ..ops.runs import read_runs
from ..ops.timetext import iso
from .context import get_env, use_color, wrap_errors
from .output import dump_json
from .render import lease_json, leases_text, run_json, runs_text

#: The most runs ``runs --limit`` lists (a database LIMIT is a 64-bit integer).
MAX_RUNS_LIMIT = 1_000_000


@click.command()
@click.option("--json", "as_json", is_flag=True, help="One JSON document instead of a table.")
@click.pass_context
@wrap_errors
def leases(ctx: click.Context, as_json: bool) -> None:
    """Live runs: owner, start, last ping age, steal state, fencing token, progress.

    Steal states: none (pinging), stale (no ping for dgs_ping_timeout), pending
    (steal marked; the owner may still ping within dgs_steal_delay), takeable
    (beat treats the schedule as not running). Times come from Redis.
    """
    env = get_env(ctx)
    settings = env.settings
    live = read_leases(env)
    now = live.now
    docs = [
        lease_json(lease, now, ping_timeout=settings.ping_timeout, steal_delay=settings.steal_delay)
        for lease in live.leases
    ]
    if as_json:
        click.echo(dump_json({"now": iso(now), "leases": docs, "malformed": live.malformed}))
    else:
        color = use_color(ctx)
        click.echo(leases_text(docs, now, color=color), color=color)
    for problem in live.malformed:
        click.echo(f"warning: unreadable lease: {problem}", err=True)


@click.command()
@click.argument("name")
@click.option(
    "--limit",
    "-n",
    type=click.IntRange(min=1, max=MAX_RUNS_LIMIT),
    default=20,
    show_default=True,
    help="How many runs, newest first.",
)
@click.option("--json", "as_json", is_flag=True, help="One JSON document instead of a table.")
@click.pass_context
@wrap_errors
def runs(ctx: click.Context, name: str, limit: int, as_json: bool) -> None:
    """Run history of schedule NAME: outcome, owner, start, duration, error."""
    env = get_env(ctx)
    schedule, history = read_runs(env, name, limit)
    if as_json:
        click.echo(dump_json({"schedule": schedule.name, "runs": [run_json(r) for r in history]}))
    else:
        color = use_color(ctx)
        click.echo(runs_text(schedule.name, history, utcnow(), color=color), color=color)
