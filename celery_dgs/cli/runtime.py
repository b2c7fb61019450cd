"""Runtime schedule commands: ``add``, ``remove``, ``import``, ``export``.

They write through :class:`~celery_dgs.runtime_schedules.RuntimeSchedules`,
the same API a program uses (``dgs.schedules``): the same validation as a
declaration, and never a declared schedule (``sync`` owns those). A running
beat picks the changes up at its next store poll.
"""

from __future__ import annotations

import json
import sys
from collections.abc import Collection, Iterable, Iterator, Sequence
from typing import Any

import click
import redis

from ..core.advice import schedule_advice
from ..core.spec import ScheduleSpec
from ..errors import LeaseError, UnknownScheduleError
from ..ops.actions import live_lease
from ..ops.env import Env, utcnow
from ..ops.lookup import closest_names_hint
from ..registry import WorkerInfo
from ..runtime_schedules import BulkReport, RowError, RuntimeSchedules
from ..schedule_files import (
    FORMATS,
    cell_value,
    export_row,
    format_of,
    read_rows,
    without_removed,
    write_entries,
)
from .context import get_env, wrap_errors


def _api(env: Env) -> RuntimeSchedules:
    return RuntimeSchedules.for_app(env.app, env.settings, store=env.runtime.store)


#: The fields ``add`` takes as options, by the option's name.
_OPTIONS = {
    "kind": "--kind",
    "period": "--period",
    "cron": "--cron",
    "within": "--within",
    "args": "--args",
    "kwargs": "--kwargs",
}


def _row_error(err: RowError, set_fields: set[str]) -> str:
    """``err`` of ``add``'s one row, naming the option that gives the field,
    given or missing (``set_fields``: the fields given by ``--set``, named as
    fields)."""
    option = None if err.field in set_fields else _OPTIONS.get(err.field)
    where = f"option {option}" if option else f"field {err.field!r}"
    return f"schedule {err.schedule!r}, {where}: {err.message}"


#: The JSON type each of ``--args`` / ``--kwargs`` takes.
_JSON_OPTION_TYPES: dict[str, tuple[type, str]] = {
    "args": (list, "list"),
    "kwargs": (dict, "object"),
}


def _json_option(value: str | None, what: str) -> Any:
    if value is None:
        return None
    wanted, name = _JSON_OPTION_TYPES[what]
    try:
        decoded = json.loads(value)
    except (ValueError, RecursionError) as exc:
        raise click.BadParameter(
            f"must be a JSON {name}, got {value!r}, which is not JSON ({exc})",
            param_hint=f"--{what}",
        ) from None
    if not isinstance(decoded, wanted):
        raise click.BadParameter(
            f"must be a JSON {name}, got {value!r}, a JSON {_json_type(decoded)}",
            param_hint=f"--{what}",
        )
    return decoded


@click.command()
@click.argument("name")
@click.option(
    "--kind",
    type=click.Choice(["periodic", "cron", "adaptive"]),
    default=None,
    help="Default: cron when --cron is given, else periodic.",
)
@click.option(
    "--period", default=None, help="Freshness period (periodic): 3600, 90s, 30m, 1h30m, 7d."
)
@click.option("--cron", "cron_expr", default=None, help="5-field cron expression (cron).")
@click.option(
    "--within", default=None, help="How long after its time a cron run must finish: 600, 10m."
)
@click.option(
    "--args", "args_json", default=None, help="Task arguments, a JSON list: '[\"x\", 1]'."
)
@click.option(
    "--kwargs",
    "kwargs_json",
    default=None,
    help="Task keyword arguments, a JSON object: '{\"depth\": 2}'.",
)
@click.option(
    "--set",
    "extra",
    multiple=True,
    metavar="FIELD=VALUE",
    help="Any other declaration field (tz, pool, cooldown, blackouts, ...); "
    "VALUE is JSON when it parses, else text. Repeatable.",
)
@click.pass_context
@wrap_errors
def add(
    ctx: click.Context,
    name: str,
    kind: str | None,
    period: str | None,
    cron_expr: str | None,
    within: str | None,
    args_json: str | None,
    kwargs_json: str | None,
    extra: tuple[str, ...],
) -> None:
    """Add or change the runtime schedule NAME (task or task@configuration).

    Validated as a declaration; a declared schedule is refused (sync owns
    it). An unchanged schedule writes nothing. A running beat picks the
    change up at its next store poll. Exit status 1 if it was refused.
    """
    env = get_env(ctx)
    fields: dict[str, Any] = {"name": name}
    for key, raw in (("kind", kind), ("cron", cron_expr)):
        if raw is not None:
            fields[key] = raw
    for key, raw in (("period", period), ("within", within)):
        if raw is not None:
            fields[key] = raw  # text: validated with the schedule, naming it
    for key, raw in (("args", args_json), ("kwargs", kwargs_json)):
        decoded = _json_option(raw, key)
        if decoded is not None:
            fields[key] = decoded
    set_fields: set[str] = set()
    for item in extra:
        key, sep, raw = item.partition("=")
        if not sep or not key.strip():
            raise click.BadParameter(f"expected FIELD=VALUE, got {item!r}", param_hint="--set")
        fields[key.strip()] = cell_value(key.strip(), raw)
        set_fields.add(key.strip())
    before = _stored_spec(env, name)
    report = _api(env).upsert_many([fields])
    if report.errors:
        raise click.ClickException(_row_error(report.errors[0], set_fields))
    applied = report.applied
    for action in ("inserted", "updated", "reactivated", "unchanged"):
        names = getattr(applied, action)
        if names and action == "unchanged":
            click.echo(f"runtime schedule {names[0]} unchanged: nothing written")
        elif names and action == "updated" and before is not None:
            after = env.runtime.store.get(names[0]).spec
            click.echo(f"updated runtime schedule {names[0]}: {_spec_changes(before, after)}")
        elif names:
            click.echo(f"{action} runtime schedule {names[0]}")
        for warning in _warnings_of(env, names):
            click.echo(f"WARNING {warning}", err=True)


def _json_type(value: object) -> str:
    if isinstance(value, bool):
        return "boolean"
    if isinstance(value, int | float):
        return "number"
    if isinstance(value, str):
        return "string"
    if isinstance(value, list):
        return "list"
    return "object" if isinstance(value, dict) else "null"


def _stored_spec(env: Env, name: str) -> ScheduleSpec | None:
    """The stored spec of ``name`` (``None``: none stored, or not readable)."""
    try:
        return env.runtime.store.get(name).spec
    except UnknownScheduleError:
        return None


def _spec_changes(before: ScheduleSpec, after: ScheduleSpec | None) -> str:
    """What an update changed, field by field as ``export`` writes them
    (``add`` replaces the whole schedule: a field not given is its default)."""
    if after is None:
        return "changed"
    old, new = export_row(before), export_row(after)
    keys = [key for key in dict.fromkeys([*old, *new]) if old.get(key) != new.get(key)]
    changed = [f"{key} {_shown(old.get(key))} -> {_shown(new.get(key))}" for key in keys]
    reset = any(new.get(key) in (None, [], {}) for key in keys)
    note = " (add replaces the whole schedule: give every field to keep)" if reset else ""
    return ", ".join(changed) + note


def _shown(value: object) -> str:
    return "(default)" if value is None else json.dumps(value)


def _warnings_of(
    env: Env, names: list[str], workers: Sequence[WorkerInfo] | None = None
) -> list[str]:
    """The suspicious but valid settings of the stored schedules ``names``:
    the spec's own, ``check``'s advice (a zero cooldown, a retry backoff
    past the deadline, a schedule that can never be served), and a pool no
    live worker consumes while some worker is live (a misspelt pool, say;
    ``workers``: the live ones, read here if not given)."""
    specs = [env.runtime.store.get(name).spec for name in names]
    now, ladder = utcnow(), env.settings.retry_ladder
    found = [
        warning
        for spec in specs
        if spec is not None
        for warning in (*spec.warnings(), *schedule_advice(spec, now, retry_ladder=ladder))
    ]
    pools = {spec.pool or env.default_pool for spec in specs if spec is not None}
    if workers is None:
        workers = []
        if pools:
            read = _live_workers(env)
            if isinstance(read, str):
                return [*dict.fromkeys(found), read]
            workers = read
    consumed = {pool for w in workers for pool in w.pools}
    found += [
        f"no live worker consumes pool {pool!r} (live workers consume "
        f"{', '.join(repr(p) for p in sorted(consumed))}): it runs once one does"
        for pool in sorted(pools - consumed)
        if workers
    ]
    return list(dict.fromkeys(found))


@click.command()
@click.argument("names", nargs=-1, required=True)
@click.pass_context
@wrap_errors
def remove(ctx: click.Context, names: tuple[str, ...]) -> None:
    """Remove the runtime schedules NAMES.

    Beat stops dispatching them at its next store poll; a live run ends as
    usual; statistics and run history stay. Declared schedules are refused
    (remove them from the code). Exit status 1 if any was refused.
    """
    env = get_env(ctx)
    report = _api(env).remove_many(names)
    live = _live_runs(env, report.removed)
    for name in report.removed:
        run = live.get(name)
        click.echo(f"removed runtime schedule {name}" + ("" if run is None else f" ({run})"))
    for name in report.absent:  # (not suggesting the names just removed)
        click.echo(f"{name}: {_absent(env, name, report.removed)}; nothing changed")
    for name in report.refused:
        click.echo(f"refused {name}: it is a declared schedule; `sync` owns it", err=True)
    ctx.exit(1 if report.refused else 0)


def _absent(env: Env, name: str, removed: Collection[str] = ()) -> str:
    """Why ``remove`` found no runtime schedule ``name`` to remove: removed
    already, or never stored (then the closest stored names other than
    ``removed``: a typo?)."""
    try:
        env.runtime.store.get(name)
    except UnknownScheduleError:
        hint = closest_names_hint(env, name, besides=removed).removeprefix("; ")
        return "no such runtime schedule" + (f" ({hint})" if hint.startswith("did") else "")
    return "no such runtime schedule (or already removed)"


def _live_runs(env: Env, names: Iterable[str]) -> dict[str, str]:
    """What each removed schedule's live run does now (a note), by name;
    none past a read that fails (the removal is made regardless)."""
    notes: dict[str, str] = {}
    for name in names:
        lease, unread = live_lease(env, name)
        if unread is not None:
            break
        if lease is not None:
            notes[name] = (
                f"its live run on {lease.owner_name} goes on to its end: "
                f"celery dgs cancel {name} stops it"
            )
    return notes


def _print_bulk(report: BulkReport, source: str, skipped: list[str] | None = None) -> None:
    for err in report.errors:
        click.echo(f"ERROR {source}: {err}", err=True)
    a = report.applied
    removed = (
        f", {len(skipped)} removed skipped (a removed schedule is not imported)" if skipped else ""
    )
    click.echo(
        f"imported {source}: {len(a.inserted)} inserted, {len(a.updated)} updated, "
        f"{len(a.reactivated)} reactivated, {len(a.unchanged)} unchanged, "
        f"{len(report.errors)} rows not applied{removed}"
    )


@click.command(name="import")
@click.argument("file", type=click.Path(exists=True, dir_okay=False, allow_dash=True))
@click.option(
    "--format",
    "fmt",
    type=click.Choice(FORMATS),
    default=None,
    help="Default: csv for a .csv file, else jsonl (JSON lines).",
)
@click.pass_context
@wrap_errors
def import_(ctx: click.Context, file: str, fmt: str | None) -> None:
    """Add or change the runtime schedules of FILE (JSON lines or CSV; - for stdin).

    Every row is validated as a declaration. A bad row (invalid field,
    unknown task, a declared schedule) is reported with its line, schedule
    and field, and the good rows are applied, in one transaction. Exit
    status 1 if any row was not applied.
    """
    env = get_env(ctx)
    fmt = format_of(file, fmt)
    source = "-" if file == "-" else click.format_filename(file)
    skipped: list[str] = []  # rows marked removed (export --include-removed)
    try:
        # utf-8-sig: a byte-order mark (Excel's "CSV UTF-8") is not part of the header.
        with click.open_file(file, "r", encoding="utf-8-sig") as stream:
            report = _api(env).upsert_lines(without_removed(read_rows(stream, fmt), skipped))
    except UnicodeDecodeError as exc:
        raise click.ClickException(
            f"{source}: not UTF-8 text ({exc.reason}, byte {exc.object[exc.start]:#04x}); "
            "nothing imported"
        ) from None
    except OSError as exc:
        raise click.FileError(source, hint=f"{exc.strerror or exc}; nothing imported") from None
    _print_bulk(report, source, skipped)
    a = report.applied
    for line in _grouped_warnings(env, [*a.inserted, *a.updated, *a.reactivated]):
        click.echo(f"WARNING {line}", err=True)
    ctx.exit(0 if report.ok else 1)


def _live_workers(env: Env) -> list[WorkerInfo] | str:
    """The live workers, or why they could not be read: the warnings follow a
    write that is done, so Redis being down does not fail the command."""
    try:
        return env.runtime.registry.live_workers()
    except (redis.RedisError, LeaseError) as exc:
        return f"live workers not read, so the pools were not checked: {exc}"


#: How many imported schedules ``import`` reads back for ``add``'s warnings.
IMPORT_ADVICE_LIMIT = 1000


def _grouped_warnings(env: Env, names: list[str]) -> list[str]:
    """``add``'s warnings for the first :data:`IMPORT_ADVICE_LIMIT` of
    ``names``, one line per warning that differs only in the schedule's name:
    ``3 schedules (t.a, t.b, t.c), field 'period': ...``."""
    checked = names[:IMPORT_ADVICE_LIMIT]
    groups: dict[str, list[str]] = {}
    read = _live_workers(env) if checked else []
    workers = [] if isinstance(read, str) else read
    for name in checked:
        for warning in _warnings_of(env, [name], workers):
            prefix = f"schedule {name!r}"
            rest = warning.removeprefix(prefix) if warning.startswith(prefix) else f": {warning}"
            groups.setdefault(rest, []).append(name)
    lines = []
    of = f" (of the first {len(checked):,} imported)" if len(names) > len(checked) else ""
    for rest, group in groups.items():
        if len(group) == 1:
            lines.append(f"schedule {group[0]!r}{rest}")
            continue
        shown = ", ".join(group[:3]) + (", ..." if len(group) > 3 else "")
        lines.append(f"{len(group):,} schedules{of} ({shown}){rest}")
    return lines if not isinstance(read, str) else [*lines, read]


@click.command()
@click.option(
    "--format",
    "fmt",
    type=click.Choice(FORMATS),
    default="jsonl",
    show_default=True,
    help="jsonl (JSON lines) or csv, as `import` reads them.",
)
@click.option(
    "--output",
    "-o",
    default="-",
    type=click.Path(dir_okay=False, allow_dash=True),
    help="File to write (default: stdout).",
)
@click.option("--include-removed", is_flag=True, help="Removed runtime schedules too.")
@click.pass_context
@wrap_errors
def export(ctx: click.Context, fmt: str, output: str, include_removed: bool) -> None:
    """Write the runtime schedules as JSON lines or CSV, in the form `import` reads.

    Declared schedules are not written: they live in the code.
    """
    env = get_env(ctx)
    api = _api(env)
    passes = 0

    def entries() -> Iterator[tuple[ScheduleSpec, bool]]:
        """The stored rows a page at a time; an invalid one is skipped, said
        once (CSV reads them twice)."""
        nonlocal passes
        passes += 1
        for row in api.iter_list(include_removed=include_removed):
            if row.spec is not None:
                yield row.spec, not row.active
            elif passes == 1:
                click.echo(
                    f"skipped {row.name}: its stored spec is invalid ({row.spec_error})", err=True
                )

    try:
        with click.open_file(output, "w", encoding="utf-8") as stream:
            count = write_entries(stream, fmt, entries)
    except BrokenPipeError:
        raise  # the reader of stdout went away: wrap_errors stops quietly
    except OSError as exc:
        raise click.FileError(output, hint=str(exc.strerror or exc)) from None
    if output != "-":
        click.echo(
            f"exported {count} runtime schedules to {click.format_filename(output)}",
            file=sys.stderr,
        )
    elif not count:
        click.echo("no runtime schedules to export", file=sys.stderr)
