"""Read-only commands: ``status``, ``leases``, ``runs`` (their reads:
:mod:`celery_dgs.ops`)."""

from __future__ import annotations

import math
import time
from collections.abc import Callable

import click

from ..core.condition import Level
from ..ops.checks import checks_past_within
from ..ops.env import utcnow
from ..ops.leader import leader_json, pace_text, read_leader, read_pace
from ..ops.leases import read_leases
from ..ops.runs import read_runs
from ..ops.state import read_status
from ..ops.timetext import iso
from ..status import any_error
from .checks_render import past_within_text, status_checks_json, status_checks_line
from .context import StateUnavailable, get_env, use_color, wrap_errors
from .leader_view import leader_text
from .output import dump_json
from .render import lease_json, leases_text, run_json, runs_text, status_json, status_text

LEVELS = [level.name for level in sorted(Level, reverse=True)]

#: The most runs ``runs --limit`` lists (a database LIMIT is a 64-bit integer).
MAX_RUNS_LIMIT = 1_000_000
#: The longest ``status --watch`` interval, in seconds (a day).
MAX_WATCH_INTERVAL_S = 86_400.0


def _not_nan(param: click.Parameter, value: float | None) -> float | None:
    """``value``, unless it is NaN (which passes every range check)."""
    if value is not None and math.isnan(value):
        raise click.BadParameter("must be a number of seconds, got nan", param=param)
    return value


#: A frame of ``status``: its text, and whether a listed schedule is in ERROR.
Frame = Callable[[], tuple[str, bool]]


@click.command()
@click.argument("patterns", nargs=-1, metavar="[PATTERN]...")
@click.option(
    "--condition",
    "conditions",
    multiple=True,
    type=click.Choice(LEVELS, case_sensitive=False),
    help="Only schedules in this condition (repeatable).",
)
@click.option("--pool", "pools", multiple=True, help="Only schedules of this pool (repeatable).")
@click.option("--json", "as_json", is_flag=True, help="One JSON document instead of a table.")
@click.option(
    "--watch",
    type=click.FloatRange(min=0.1, max=MAX_WATCH_INTERVAL_S),
    metavar="SECONDS",
    callback=lambda _ctx, param, value: _not_nan(param, value),
    help="Redraw every SECONDS until Ctrl-C.",
)
@click.pass_context
@wrap_errors
def status(
    ctx: click.Context,
    patterns: tuple[str, ...],
    conditions: tuple[str, ...],
    pools: tuple[str, ...],
    as_json: bool,
    watch: float | None,
) -> None:
    """Every schedule's condition (OK / WARNING / ERROR) and why, most urgent first.

    PATTERN selects schedules by name: a plain word matches anywhere in the
    name ('flaky' lists 'proj.flaky_report'); a pattern with a glob character
    (* ? [) must match the whole name ('proj.scrape_*'). Matching is
    case-sensitive; several patterns list the schedules matching any of them.

    MAY RUN says when beat may dispatch a schedule next: 'now', 'in 59m', or
    'running', 'paused', 'disabled' (an adaptive schedule after max_failures:
    `celery dgs resume` or an upsert enables it), 'no worker', 'lookahead',
    'inactive', 'invalid spec'. Below the table, 'held'
    lines say what holds a schedule back: a retry backoff after failures
    ('retry in 59m, failure 2 (retry step 2 of 3: 1h00m)'), a pause, no live
    worker able to run it (none consumes its pool, or dont_run_on_nodes
    excludes each one that does), a blackout window. Times in the table are
    relative to now; --json gives ISO-8601 UTC times and durations in seconds.

    Exit status: 1 if any listed schedule is in ERROR, or a deferred check is
    overdue past its within (a health check), 0 otherwise; 3 if Redis or the
    store cannot be read; 4 on a configuration error. Only active schedules
    are listed (one whose declaration is invalid is listed as stored, in
    ERROR declaration_invalid); a paused one keeps its
    real condition. Deferred checks are not listed: one line counts the
    pending and overdue ones (celery dgs checks shows them).
    """
    env = get_env(ctx)
    color = use_color(ctx) and not as_json

    @wrap_errors
    def frame() -> tuple[str, bool]:
        rows, workers, now = read_status(env, conditions, pools, patterns)
        leader, timeout = read_leader(env)
        pace = read_pace(env)
        checks = env.runtime.store.check_summary(now)  # one grouped query
        past = checks_past_within(env, checks, now)  # one read per task with overdue checks
        error = any_error(rows) or bool(past)
        if as_json:
            doc = status_json(rows, now, workers)
            doc["beat_leader"] = leader_json(leader, now, timeout)
            doc["beat_pace"] = None if pace is None else pace.to_dict()
            doc["checks"] = status_checks_json(checks, now)
            doc["checks"]["past_within"] = [p.task for p in past]
            return dump_json(doc), error
        text = status_text(rows, now, workers, color=color, capacity=env.settings.capacity)
        lines = [text, leader_text(leader, now, timeout), pace_text(pace)]
        lines.append(status_checks_line(checks, now, color=color))
        lines += [past_within_text(p, color=color) for p in past]
        return "\n".join(line for line in lines if line is not None), error

    if watch is None:
        text, error = frame()
        click.echo(text, color=color)
        ctx.exit(1 if error else 0)
    ctx.exit(watch_loop(frame, watch, color=color))


def watch_loop(frame: Frame, interval: float, *, color: bool) -> int:
    """Redraw ``frame()`` every ``interval`` seconds until Ctrl-C. The exit status
    is the last successful frame's (1: a schedule in ERROR). A failed read is
    shown in place of the table and retried at the next frame."""
    error = False
    try:
        while True:
            try:
                text, error = frame()
            except StateUnavailable as exc:
                text = f"cannot read the state: {exc.message} (retrying every {interval:g}s)"
            if color:
                click.clear()
            click.echo(text, color=color)
            if not color:
                click.echo("")  # frames one after another: keep them apart
            time.sleep(interval)
    except KeyboardInterrupt:
        return 1 if error else 0


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
