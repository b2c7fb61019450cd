"""``celery dgs schema``: the store's schema revision and the migrations an
upgrade would apply, read without applying them (every other command opens
the store, which upgrades it); ``--upgrade`` applies them."""

from __future__ import annotations

import click

from ..store.engine import make_engine, masked_url
from ..store.migrate import head_revision, schema_state, upgrade_engine
from .context import get_env, wrap_errors


@click.command()
@click.option(
    "--upgrade",
    is_flag=True,
    help="Apply the pending migrations (as the schema's owner; stop every process of "
    "an older celery-dgs first).",
)
@click.pass_context
@wrap_errors
def schema(ctx: click.Context, upgrade: bool) -> None:
    """Show the store's schema revision and the migrations this celery-dgs
    would apply, without applying them; --upgrade applies them.

    Every other command, beat and the workers upgrade the schema when they
    open the store. Exit status 1 when migrations are pending (without
    --upgrade), 4 when the schema is newer than this celery-dgs knows.
    Upgrades are one-way: back the database up first
    (docs/operations.md, Upgrading the schema).
    """
    env = get_env(ctx)
    url = env.settings.database_url
    where = masked_url(url)
    engine = make_engine(url)
    try:
        current, pending = schema_state(engine)
        head = head_revision()
        shown = current or "(none: a new database)"
        click.echo(f"the schedule store at {where}: schema revision {shown}")
        if not pending:
            click.echo(f"up to date: this celery-dgs's newest revision is {head}")
            return
        if not upgrade:
            click.echo(f"{len(pending)} migration(s) to apply: {', '.join(pending)}")
            click.echo(
                "stop every process of an older celery-dgs, back the database up, then run "
                "celery dgs schema --upgrade (or start beat)"
            )
            ctx.exit(1)
        before, after = upgrade_engine(engine)
        click.echo(f"upgraded the schema from revision {before or '(none)'} to {after}")
    finally:
        engine.dispose()
