"""State-changing commands: ``run``, ``pause``, ``resume``, ``cancel``.

Each prints exactly what it changed, or that nothing changed and why. An
unknown schedule name is a usage error (exit status 2).
"""

from __future__ import annotations

from dataclasses import dataclass

import click

from ..core.spec_values import AD_HOC_PRIORITY, MAX_PRIORITY, MIN_PRIORITY
from ..leases.types import CancelStatus
from .context import Env, get_env, resolve_schedule, utcnow, wrap_errors
from .output import duration, short_time

NAME = click.argument("name")


@click.command()
@NAME
@click.option(
    "--priority",
    type=click.IntRange(MIN_PRIORITY, MAX_PRIORITY),
    default=None,
    help="the priority class to serve it in (0-99, lower first; default 0: "
    "ahead of all scheduled work)",
)
@click.pass_context
@wrap_errors
def run(ctx: click.Context, name: str, priority: int | None) -> None:
    """Run schedule NAME now, ahead of all scheduled work.

    Beat dispatches it at the next free worker slot of its pool. A paused
    schedule runs once it is resumed; a running one after its current run.
    With --priority P, due scheduled work of a class below P goes first.
    """
    _echo(request_run(get_env(ctx), name, priority))


def _echo(result: ActionResult) -> None:
    for line in result.lines:
        click.echo(line)


@dataclass(frozen=True)
class ActionResult:
    """What an operator action did: whether it changed anything, and the lines
    that say what (or why nothing changed)."""

    changed: bool
    lines: tuple[str, ...]


def request_run(env: Env, name: str, priority: int | None = None) -> ActionResult:
    """Ask beat to run ``name`` at its next free slot (``celery dgs run``).
    Raises :class:`click.ClickException` for an inactive schedule and
    :class:`click.BadParameter` for an unknown one."""
    rt = env.runtime
    schedule = resolve_schedule(env, name)
    if not schedule.active:
        raise click.ClickException(
            f"{schedule.name} is inactive (removed, or no longer declared): beat does not "
            "schedule it; nothing changed"
        )
    if schedule.run_requested_at is not None and schedule.run_requested_priority != priority:
        rt.store.request_run(schedule.name, schedule.run_requested_at, priority=priority)
        return ActionResult(
            True,
            (
                f"the run of {schedule.name} requested at "
                f"{short_time(schedule.run_requested_at)} is now served in priority class "
                f"{AD_HOC_PRIORITY if priority is None else priority}",
            ),
        )
    if schedule.run_requested_at is not None:
        return ActionResult(
            False,
            (
                f"a run of {schedule.name} was already requested at "
                f"{short_time(schedule.run_requested_at)} and is not dispatched yet; "
                "nothing changed",
            ),
        )
    now = utcnow()
    rt.store.request_run(schedule.name, now, priority=priority)
    if priority is None or priority == AD_HOC_PRIORITY:
        ahead = "ahead of scheduled work"
    else:
        ahead = f"in priority class {priority} (due work of classes below {priority} goes first)"
    lines = [
        f"requested a run of {schedule.name} at {short_time(now)}: beat dispatches it {ahead} "
        "at the next free worker slot"
    ]
    lease = rt.leases.get(schedule.name)
    if lease is not None:
        lines.append(
            f"note: {schedule.name} is running on {lease.owner_name}; the requested run "
            "starts after that run ends"
        )
    if schedule.paused:
        lines.append(
            f"note: {schedule.name} is paused; the requested run starts once it is resumed "
            f"(celery dgs resume {schedule.name})"
        )
    return ActionResult(True, tuple(lines))


def set_paused(env: Env, name: str, paused: bool) -> ActionResult:
    """Pause or resume ``name`` (``celery dgs pause`` / ``resume``)."""
    rt = env.runtime
    schedule = resolve_schedule(env, name)
    if not rt.store.set_paused(schedule.name, paused):
        state = "paused" if paused else "not paused"
        return ActionResult(False, (f"{schedule.name} was already {state}; nothing changed",))
    if not paused:
        return ActionResult(True, (f"resumed {schedule.name}: beat schedules it again",))
    lease = rt.leases.get(schedule.name)
    running = (
        f"was running: {lease.owner_name} keeps its current run"
        if lease is not None
        else "was not running"
    )
    return ActionResult(
        True, (f"paused {schedule.name} ({running}); beat dispatches no new run until resumed",)
    )


@click.command()
@NAME
@click.pass_context
@wrap_errors
def pause(ctx: click.Context, name: str) -> None:
    """Stop dispatching schedule NAME (a live run is not interrupted)."""
    _echo(set_paused(get_env(ctx), name, True))


@click.command()
@NAME
@click.pass_context
@wrap_errors
def resume(ctx: click.Context, name: str) -> None:
    """Dispatch schedule NAME again."""
    _echo(set_paused(get_env(ctx), name, False))


@click.command()
@NAME
@click.option(
    "--token",
    type=int,
    default=None,
    help="Cancel only the run with this fencing token (as shown by `leases`).",
)
@click.option(
    "--run-id",
    default=None,
    help="Cancel only the run with this run id (as shown by `leases` and `runs`).",
)
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
    """
    _echo(cancel_run(get_env(ctx), name, token=token, run_id=run_id))


def cancel_run(
    env: Env, name: str, *, token: int | None = None, run_id: str | None = None
) -> ActionResult:
    """Ask the worker running ``name`` to stop that run (``celery dgs cancel``):
    the run holding the lease now, or only the one with ``token`` / ``run_id``."""
    rt = env.runtime
    schedule = resolve_schedule(env, name)
    lease = rt.leases.get(schedule.name)
    if lease is None:
        return ActionResult(False, (f"{schedule.name} has no live run; nothing to cancel",))
    if (token is not None and lease.token != token) or (
        run_id is not None and lease.owner_tag != run_id
    ):
        asked = " ".join(f"{k} {v}" for k, v in (("run", run_id), ("token", token)) if v)
        return ActionResult(
            False,
            (
                f"{schedule.name}'s {asked} is not running (the live run is {lease.owner_tag} "
                f"on {lease.owner_name}, token {lease.token}); nothing cancelled",
            ),
        )
    who = f"{schedule.name}'s run {lease.owner_tag} on {lease.owner_name} (token {lease.token})"
    if lease.cancel_requested:
        return ActionResult(False, (f"cancel of {who} was already requested; nothing changed",))
    result = rt.leases.request_cancel(schedule.name, owner_tag=lease.owner_tag, token=lease.token)
    if result.status is CancelStatus.NO_LEASE:
        return ActionResult(False, (f"{who} ended meanwhile; nothing to cancel",))
    if result.status is CancelStatus.OTHER_RUN:
        return ActionResult(
            False,
            (
                f"{who} ended meanwhile and run {result.owner_tag} (token {result.token}) started; "
                "nothing cancelled (run the command again to cancel the new run)",
            ),
        )
    if result.status is CancelStatus.ALREADY:
        return ActionResult(False, (f"cancel of {who} was already requested; nothing changed",))
    age = duration(rt.leases.now() - lease.started_at)
    return ActionResult(
        True,
        (
            f"requested cancel of {who}, started {age} ago: the worker stops it within "
            f"{duration(env.settings.ping_interval)} and records it cancelled",
        ),
    )
