"""State-changing commands: ``run``, ``pause``, ``resume``, ``cancel``.

Each prints exactly what it changed, or that nothing changed and why. An
unknown schedule name is a usage error (exit status 2).
"""

from __future__ import annotations

import click

from ..leases.types import CancelStatus
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
            f"{schedule.name} is inactive (removed, or no longer declared): beat does not "
            "schedule it; nothing changed"
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
@click.option("--token", type=int, default=None,
              help="Cancel only the run with this fencing token (as shown by `leases`).")
@click.option("--run-id", default=None,
              help="Cancel only the run with this run id (as shown by `leases` and `runs`).")
@click.pass_context
@wrap_errors
def cancel(ctx: click.Context, name: str, token: int | None, run_id: str | None) -> None:
    """Stop the live run of schedule NAME.

    The cancel is aimed at one run: the one holding the lease when the command
    reads it (or the one named by --token / --run-id). If that run ends and a
    new one starts before the request lands, the new run is left alone. Its
    worker sees the request at its next ping (every dgs_ping_interval), stops
    the run and records it as cancelled (not a failure). The schedule is not
    paused: beat runs it again when it is due.
    """  # fmt: skip
    env = get_env(ctx)
    rt = env.runtime
    schedule = resolve_schedule(env, name)
    lease = rt.leases.get(schedule.name)
    if lease is None:
        click.echo(f"{schedule.name} has no live run; nothing to cancel")
        return
    if (token is not None and lease.token != token) or (
        run_id is not None and lease.owner_tag != run_id
    ):
        asked = " ".join(f"{k} {v}" for k, v in (("run", run_id), ("token", token)) if v)
        click.echo(
            f"{schedule.name}'s {asked} is not running (the live run is {lease.owner_tag} "
            f"on {lease.owner_name}, token {lease.token}); nothing cancelled"
        )
        return
    who = f"{schedule.name}'s run {lease.owner_tag} on {lease.owner_name} (token {lease.token})"
    if lease.cancel_requested:
        click.echo(f"cancel of {who} was already requested; nothing changed")
        return
    result = rt.leases.request_cancel(schedule.name, owner_tag=lease.owner_tag, token=lease.token)
    if result.status is CancelStatus.NO_LEASE:
        click.echo(f"{who} ended meanwhile; nothing to cancel")
        return
    if result.status is CancelStatus.OTHER_RUN:
        click.echo(
            f"{who} ended meanwhile and run {result.owner_tag} (token {result.token}) started; "
            "nothing cancelled (run the command again to cancel the new run)"
        )
        return
    if result.status is CancelStatus.ALREADY:
        click.echo(f"cancel of {who} was already requested; nothing changed")
        return
    age = duration(rt.leases.now() - lease.started_at)
    click.echo(
        f"requested cancel of {who}, started {age} ago: the worker stops it within "
        f"{duration(env.settings.ping_interval)} and records it cancelled"
    )
