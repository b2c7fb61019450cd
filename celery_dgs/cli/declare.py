"""Declaration commands: ``check`` (validate) and ``sync`` (declarations → store)."""

from __future__ import annotations

import click

from ..beat_schedule_entries import beat_schedule_warning
from ..celery_settings import check_celery_settings
from ..core.advice import schedule_advice
from ..declarations import Declarations
from ..errors import StoreClaimedError
from ..ops.env import Env, utcnow
from ..ops.timetext import counted
from ..sentinel import min_replicas_warning
from ..store.engine import make_engine, masked_url
from ..store.migrate import schema_state
from ..store.ownership import owned_by_api
from ..task_routing import routing_warnings
from .context import get_env, use_color, wrap_errors
from .output import styled


def _declarations(env: Env) -> Declarations:
    """Every declaration of the app (its task modules imported), as beat sees them."""
    return env.dgs.all_declarations()


def _report_problems(decl: Declarations, *, color: bool) -> None:
    """Each error (naming schedule and field) and warning, on stderr."""
    for name in sorted(decl.errors):
        err = decl.errors[name]
        label = styled("ERROR", "ERROR", color=color)
        click.echo(
            f"{label} schedule {err.schedule!r}, field {err.field!r}: {err.message}",
            err=True,
            color=color,
        )
    for warning in decl.warnings:
        click.echo(f"{styled('WARNING', 'WARNING', color=color)} {warning}", err=True, color=color)


@click.command()
@click.pass_context
@wrap_errors
def check(ctx: click.Context) -> None:
    """Validate every schedule declaration (decorators and dgs_schedules),
    and list the tasks declared as deferred checks (@dgs.deferred).

    Prints each error naming the schedule and field, and each warning, then a
    warning for each Celery setting that is unsafe with celery-dgs (as workers
    log at start-up), and a warning for each schedule that runs again at once
    when a slot is free (no cooldown), that one failure puts in ERROR (retry
    backoff not shorter than its period), or that can never be served (named
    with the reason, e.g. cron times in a blackout). With a sentinel://
    dgs_redis_url, a warning when the primary's min-replicas-to-write is 0 or
    cannot be read (the one Redis command it sends); a warning naming Celery's
    own beat_schedule entries, which celery-dgs does not run, with the
    dgs_schedules entry of each. Exit status 1 if any
    declaration (or @dgs.deferred one) is invalid. The store is not used.
    """
    env = get_env(ctx)
    decl = _declarations(env)
    color = use_color(ctx)
    _report_problems(decl, color=color)
    for task, err in sorted(env.dgs.check_template_errors.items()):
        label = styled("ERROR", "ERROR", color=color)
        click.echo(
            f"{label} deferred check task {task!r}, field {err.field!r}: {err.message}",
            err=True,
            color=color,
        )
    specs = decl.specs
    now, hints = utcnow(), []
    for name in sorted(specs):
        hints += schedule_advice(specs[name], now, retry_ladder=env.settings.retry_ladder)
    for message in hints:
        click.echo(f"{styled('WARNING', 'WARNING', color=color)} {message}", err=True, color=color)
    tasks = {s.task: env.app.tasks[s.task] for s in specs.values() if s.task in env.app.tasks}
    celery_advice = check_celery_settings(env.app.conf, specs, tasks)
    for advice in celery_advice:
        label = styled("WARNING", "WARNING", color=color)
        click.echo(f"{label} Celery setting {advice}", err=True, color=color)
    env.runtime  # noqa: B018 - resolves the Redis URL: none, or a malformed one, is an error
    setting_warnings = env.settings.warnings()
    legacy = beat_schedule_warning(env.app.conf, {s.task for s in decl.specs.values()})
    setting_warnings += [legacy] if legacy is not None else []
    setting_warnings += routing_warnings(env.app, decl.specs)
    master = env.settings.redis_master_name
    if master is not None:
        primary = min_replicas_warning(env.runtime.redis, master)
        setting_warnings += [primary] if primary is not None else []
    for warning in setting_warnings:
        click.echo(f"{styled('WARNING', 'WARNING', color=color)} {warning}", err=True, color=color)
    for name in sorted(decl.specs):
        spec = decl.specs[name]
        click.echo(f"{styled('OK', 'OK', color=color)} {name} ({spec.kind})", color=color)
    templates = env.dgs.check_templates  # declared as their task modules were imported
    for task in sorted(templates):
        click.echo(f"{styled('OK', 'OK', color=color)} {task} (deferred checks)", color=color)
    invalid_templates = env.dgs.check_template_errors
    plural = "" if len(templates) == 1 else "s"
    deferred = f", {len(templates)} deferred check task{plural}" if templates else ""
    warned = len(decl.warnings) + len(hints) + len(celery_advice) + len(setting_warnings)
    click.echo(
        f"{len(decl.specs)} valid, {len(decl.errors) + len(invalid_templates)} invalid, "
        f"{counted(warned, 'warning')}{deferred}"
    )
    ctx.exit(1 if decl.errors or invalid_templates else 0)


def _refuse_a_dry_run_that_would_upgrade(env: Env) -> None:
    """A dry run writes nothing: opening the store would upgrade an older
    schema first, so it stops and says so (``celery dgs schema``)."""
    engine = make_engine(env.settings.database_url)
    try:
        current, pending = schema_state(engine)
    finally:
        engine.dispose()
    if pending:
        raise click.ClickException(
            f"dry run: the store's schema is at revision {current or '(none)'} and "
            f"{len(pending)} migration(s) would be applied first; a dry run applies none "
            "(celery dgs schema shows them)"
        )


@click.command()
@click.option(
    "--take-over",
    is_flag=True,
    help="Store them even if another key prefix's project stored its declarations "
    "here (this app replaces it): its schedules not declared here are deactivated.",
)
@click.option(
    "--dry-run",
    is_flag=True,
    help="Say what the sync would insert, update, reactivate and deactivate; change nothing.",
)
@click.pass_context
@wrap_errors
def sync(ctx: click.Context, take_over: bool, dry_run: bool) -> None:
    """Store the declared schedules, as beat does when it starts.

    New schedules are inserted, changed ones updated, stored ones no longer
    declared deactivated (history kept). Invalid declarations are reported, as
    beat does: a stored schedule whose declaration became invalid keeps its
    last valid version (still served; `status` shows it in ERROR
    declaration_invalid), a new one is not stored. Runtime schedules (added
    with `add` / `import` or the API) are left alone; a declared name that
    is one is refused. Exit status 1 if there are any. When the retry
    settings changed since the store last adopted them, the failing
    schedules' kept start times are rewritten with the new ones, as beat
    does when it starts. The store records the key prefix (dgs_key_prefix)
    of the first project that stores its declarations there; another
    project's sync is refused (exit status 4: it would deactivate the first
    one's schedules) unless --take-over. With --dry-run nothing is written:
    the lines say what a sync would do (exit status as the sync's).
    """
    env = get_env(ctx)
    decl = _declarations(env)
    _report_problems(decl, color=use_color(ctx))
    if dry_run:
        _refuse_a_dry_run_that_would_upgrade(env)
    store = env.runtime.store
    where = masked_url(env.settings.database_url)
    prefix = env.settings.key_prefix
    if dry_run:
        claimed_by = store.declarations_owner()
        if claimed_by is not None and claimed_by != prefix and not take_over:
            raise StoreClaimedError(where, prefix, claimed_by)
    else:
        claimed_by = store.claim_declarations(prefix, take_over=take_over)
        if claimed_by is not None:
            raise StoreClaimedError(where, prefix, claimed_by)
    report = store.sync(
        list(decl.specs.values()), utcnow(), invalid=decl.invalid(), dry_run=dry_run
    )
    if dry_run:
        click.echo(
            f"dry run: syncing {len(decl.specs)} declared schedules to {where} would "
            "change these (nothing written):"
        )
    else:
        click.echo(f"synced {len(decl.specs)} declared schedules to {where}")
        adopted = store.adopt_retry_ladder(env.settings.retry_ladder)
        if adopted.rewritten:
            click.echo(f"  {adopted}")
    for label, names in (
        ("inserted", report.inserted),
        ("updated", report.updated),
        ("reactivated", report.reactivated),
        ("deactivated", report.deactivated),
    ):
        if names:
            click.echo(f"  {label + ':':<13}{', '.join(names)}")
    if report.changed:
        click.echo(f"  {'unchanged:':<13}{len(report.unchanged)}")
    else:
        click.echo(f"  nothing changed ({len(report.unchanged)} unchanged)")
    for name in report.refused:
        click.echo(f"  {'refused:':<13}{owned_by_api(name)}", err=True)
    kept = set(report.invalid)
    for name in sorted(decl.errors):
        if name in kept:
            click.echo(
                f"  {'kept:':<13}{name} (declaration invalid: its last valid "
                "stored version is still served)"
            )
        else:
            click.echo(f"  {'skipped:':<13}{name} (declaration invalid: not stored)")
    ctx.exit(1 if decl.errors or report.refused else 0)
