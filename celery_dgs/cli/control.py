"""State-changing commands: ``run``, ``pause``, ``resume``, ``cancel``.

Each prints exactly what it changed, or that nothing changed and why
(:mod:`celery_dgs.ops.actions`). An unknown schedule name is a usage error
(exit status 2).
"""

from __future__ import annotations

import click

from ..core.spec_values import MAX_PRIORITY, MIN_PRIORITY
from ..ops.actions import ActionResult, cancel_run, request_run, set_paused
from .context import get_env, wrap_errors

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
