"""State-changing commands: ``run``, ``pause``, ``resume``, ``cancel``.

Each prints exactly what it changed, or that nothing changed and why. An
unknown schedule name is a usage error (exit status 2).
"""

from __future__ import annotations

import click

from .context import get_env, resolve_schedule, utcnow, wrap_errors
from .output import duration, short_time

NAME = click.argument("name")


@click.command()
@NAME
@click.pass_context
@wrap_errors
def run(ctx: click.Context, name: str) -> None:
    """Run schedule NAME now, ahead of all scheduled work.

    Beat dispatches it at the next free worker slot of its pool. A paused
    schedule runs once it is resumed; a running one after its current run.
    """
    env = get_env(ctx)
    rt = env.runtime
    schedule = resolve_schedule(env, name)
    if not schedule.active:
        raise click.ClickException(
            f"{schedule.name} is inactive (no longer declared): beat does not schedule it; "
            "nothing changed"
        )
    if schedule.run_requested_at is not None:
        click.echo(
            f"a run of {schedule.name} was already requested at "
            f"{short_time(schedule.run_requested_at)} and is not dispatched yet; nothing changed"
        )
        return
    now = utcnow()
    rt.store.request_run(schedule.name, now)
    click.echo(
        f"requested a run of {schedule.name} at {short_time(now)}: beat dispatches it ahead "
        "of scheduled work at the next free worker slot"
    )
    lease = rt.leases.get(schedule.name)
    if lease is not None:
        click.echo(
            f"note: {schedule.name} is running on {lease.owner_name}; the requested run "
            "starts after that run ends"
        )
    if schedule.paused:
        click.echo(
            f"note: {schedule.name} is paused; the requested run starts once it is resumed "
            f"(celery dgs resume {schedule.name})"
        )


def _set_paused(ctx: click.Context, name: str, paused: bool) -> None:
    env = get_env(ctx)
    rt = env.runtime
    schedule = resolve_schedule(env, name)
    if not rt.store.set_paused(schedule.name, paused):
        state = "paused" if paused else "not paused"
        click.echo(f"{schedule.name} was already {state}; nothing changed")
        return
    if not paused:
        click.echo(f"resumed {schedule.name}: beat schedules it again")
        return
    lease = rt.leases.get(schedule.name)
    running = (
        f"was running: {lease.owner_name} keeps its current run" if lease is not None
        else "was not running"
    )  # fmt: skip
    click.echo(f"paused {schedule.name} ({running}); beat dispatches no new run until resumed")


@click.command()
@NAME
@click.pass_context
@wrap_errors
def pause(ctx: click.Context, name: str) -> None:
    """Stop dispatching schedule NAME (a live run is not interrupted)."""
    _set_paused(ctx, name, True)


@click.command()
@NAME
@click.pass_context
@wrap_errors
def resume(ctx: click.Context, name: str) -> None:
    """Dispatch schedule NAME again."""
    _set_paused(ctx, name, False)


@click.command()
@NAME
@click.pass_context
@wrap_errors
def cancel(ctx: click.Context, name: str) -> None:
    """Stop the live run of schedule NAME.

    Its worker sees the request at its next ping (every dgs_ping_interval), stops
    the run and records it as cancelled (not a failure). The schedule is not
    paused: beat runs it again when it is due.
    """
    env = get_env(ctx)
    rt = env.runtime
    schedule = resolve_schedule(env, name)
    lease = rt.leases.get(schedule.name)
    if lease is None:
        click.echo(f"{schedule.name} has no live run; nothing to cancel")
        return
    who = f"{schedule.name}'s run on {lease.owner_name} (token {lease.token})"
    if lease.cancel_requested:
        click.echo(f"cancel of {who} was already requested; nothing changed")
        return
    if not rt.leases.request_cancel(schedule.name):
        click.echo(f"{schedule.name}'s run ended meanwhile; nothing to cancel")
        return
    age = duration(rt.leases.now() - lease.started_at)
    click.echo(
        f"requested cancel of {who}, started {age} ago: the worker stops it within "
        f"{duration(env.settings.ping_interval)} and records it cancelled"
    )
