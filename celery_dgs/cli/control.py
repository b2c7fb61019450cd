"""State-changing commands: ``run``, ``pause``, ``resume``, ``cancel``.

Each takes one or more schedule names and prints, for each, exactly what it
changed, or that nothing changed and why (:mod:`celery_dgs.ops.actions`). An
unknown name is a usage error (exit status 2) and nothing changes; a name the
action does not apply to (an inactive schedule) is an error line, the others
are still acted on, and the exit status is 1.
"""

from __future__ import annotations

from collections.abc import Callable

import click

from ..core.spec_values import MAX_PRIORITY, MIN_PRIORITY
from ..ops.actions import ActionResult, cancel_run, request_run, set_paused
from ..ops.env import Env
from ..ops.errors import ActionRefused, UnknownTarget
from ..ops.lookup import resolve_schedule
from .context import get_env, wrap_errors

NAMES = click.argument("names", nargs=-1, required=True, metavar="NAME...")


def _act(
    ctx: click.Context, names: tuple[str, ...], action: Callable[[Env, str], ActionResult]
) -> None:
    """``action`` on each of ``names`` (each once, in order), once every name
    is known; a refused one is an error line and exit status 1 at the end."""
    env = get_env(ctx)
    unique = list(dict.fromkeys(names))
    if len(unique) > 1:  # one name is looked up by its action
        for name in unique:
            try:
                resolve_schedule(env, name)  # an unknown name: a usage error
            except UnknownTarget as exc:
                message = f"{exc.message}; nothing changed (of {len(unique)} names)"
                raise UnknownTarget(message, exc.argument) from None
    refused = 0
    for name in unique:
        try:
            result = action(env, name)
        except ActionRefused as exc:
            click.echo(f"Error: {exc.message}", err=True)
            refused += 1
            continue
        for line in result.lines:
            click.echo(line)
    if refused:
        ctx.exit(1)


@click.command()
@NAMES
@click.option(
    "--priority",
    type=click.IntRange(MIN_PRIORITY, MAX_PRIORITY),
    default=None,
    help="the priority class to serve it in (0-99, lower first; default 0: "
    "ahead of all scheduled work)",
)
@click.pass_context
@wrap_errors
def run(ctx: click.Context, names: tuple[str, ...], priority: int | None) -> None:
    """Run each schedule NAME now, ahead of all scheduled work.

    Beat dispatches it at the next free worker slot of its pool. A paused
    schedule runs once it is resumed; a running one after its current run.
    With --priority P, due scheduled work of a class below P goes first.
    """
    _act(ctx, names, lambda env, name: request_run(env, name, priority))


@click.command()
@NAMES
@click.pass_context
@wrap_errors
def pause(ctx: click.Context, names: tuple[str, ...]) -> None:
    """Stop dispatching each schedule NAME (a live run is not interrupted)."""
    _act(ctx, names, lambda env, name: set_paused(env, name, True))


@click.command()
@NAMES
@click.pass_context
@wrap_errors
def resume(ctx: click.Context, names: tuple[str, ...]) -> None:
    """Dispatch each schedule NAME again."""
    _act(ctx, names, lambda env, name: set_paused(env, name, False))


@click.command()
@NAMES
@click.option(
    "--token",
    type=int,
    default=None,
    help="Cancel only the run with this fencing token (as shown by `leases`); one NAME.",
)
@click.option(
    "--run-id",
    default=None,
    help="Cancel only the run with this run id (as shown by `leases` and `runs`); one NAME.",
)
@click.pass_context
@wrap_errors
def cancel(
    ctx: click.Context, names: tuple[str, ...], token: int | None, run_id: str | None
) -> None:
    """Stop the live run of each schedule NAME.

    The cancel is aimed at one run: the one holding the lease when the command
    reads it (or the one named by --token / --run-id). If that run ends and a
    new one starts before the request lands, the new run is left alone. Its
    worker sees the request at its next ping (every dgs_ping_interval), stops
    the run and records it as cancelled (not a failure). The schedule is not
    paused: beat runs it again when it is due.
    """
    if (token is not None or run_id is not None) and len(set(names)) > 1:
        raise click.UsageError("--token and --run-id name one run: give one NAME with them")
    _act(ctx, names, lambda env, name: cancel_run(env, name, token=token, run_id=run_id))
