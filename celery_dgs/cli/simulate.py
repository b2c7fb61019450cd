"""``celery -A proj dgs simulate``: will the schedules stay fresh on these workers?

Three sources of schedules: the app's fleet (default: its declarations and
what its store holds, sampled above ``--sample``), a workload file
(``--workload``) or a generated workload (``--schedules N``); the workload is
built in :mod:`.simulate_workload`. Also ``python -m celery_dgs.sim`` for a
workload file or a generated one, without an app. Format and metrics:
``docs/simulator.md``.
"""

from __future__ import annotations

import json
import math
from collections.abc import Callable
from dataclasses import asdict, replace
from pathlib import Path
from typing import Any

import click

from ..core.fewest_errors import OVERLOAD_GOALS
from ..core.overload import OVERLOAD_POLICIES
from ..core.ranking import OrderPolicy
from ..errors import SettingsError
from ..ops.env import Env
from ..sim.fleet import DEFAULT_SAMPLE_LIMIT
from ..sim.policies import POLICIES
from ..sim.report import (
    format_order,
    format_table,
    run_policies,
    unservable,
    wasted_note,
    workload_summary,
)
from ..sim.workload import DEFAULT_SLOTS_PER_WORKER, WorkloadError
from .simulate_search import echo_if, find_and_print
from .simulate_workload import WorkloadOptions, build_workload, parse_duration


def _app_env(ctx: click.Context) -> Env | None:
    """The app's environment; ``None`` without an app (``python -m celery_dgs.sim``)."""
    from .context import get_env

    try:
        env = get_env(ctx)
    except click.UsageError:
        return None
    try:
        env.settings  # noqa: B018 - read once: a bad setting is a usage error here
    except SettingsError as exc:
        raise click.UsageError(f"configuration: {exc}") from exc
    return env


def _order_options(command: Callable[..., Any]) -> Callable[..., Any]:
    """The settings that change ``dgs``'s order (:class:`OrderPolicy`) as
    options; unset ones come from the app's settings (beat's defaults without
    an app)."""
    options: tuple[tuple[str, Any, str | None, str], ...] = (
        ("--overload", click.Choice(OVERLOAD_GOALS), None, "dgs_overload"),
        ("--overload-floor", click.FloatRange(min=1), "PERIODS", "dgs_overload_floor"),
        ("--overload-policy", click.Choice(OVERLOAD_POLICIES), None, "dgs_overload_policy"),
        ("--shed-horizon", str, "DURATION", "dgs_shed_horizon (shed)"),
        ("--restore-aging", click.FloatRange(min=0), None, "dgs_restore_aging (restore)"),
        ("--laxity-floor", str, "DURATION|off", 'dgs_laxity_floor, or "off" (restore)'),
        ("--elevator-interval", str, "DURATION|off", 'dgs_elevator_interval, or "off"'),
    )
    command = click.option(
        "--lookahead/--no-lookahead", default=None, help="dgs's order: dgs_lookahead"
    )(command)
    command = click.option(
        "--window-horizon",
        metavar="DURATION",
        help="beat's window of schedules: dgs_schedule_window",
    )(command)
    command = click.option(
        "--window-read-on",
        metavar="SIZES|unlimited",
        help='beat\'s window of schedules: dgs_schedule_window_read_on, or "unlimited"',
    )(command)
    command = click.option(
        "--window",
        metavar="SIZE|off",
        help='beat\'s window of schedules: dgs_schedule_window_size, or "off" (all held)',
    )(command)
    for flag, kind, metavar, what in reversed(options):
        option = click.option(flag, type=kind, metavar=metavar, help=f"dgs's order: {what}")
        command = option(command)
    return command


def _order(env: Env | None, given: dict[str, Any]) -> OrderPolicy:
    """``dgs``'s order: the app's ``settings.order_policy`` (beat's defaults
    without an app), with the options given."""
    order = env.settings.order_policy if env is not None else OrderPolicy()
    changes: dict[str, Any] = {}
    for option, field in (
        ("overload", "goal"),
        ("overload_floor", "floor_periods"),
        ("overload_policy", "overload"),
        ("restore_aging", "restore_aging"),
    ):
        if given[option] is not None:
            changes[field] = given[option]
    if given["lookahead"] is not None:
        changes["lookahead"] = given["lookahead"]
    for option in ("shed_horizon", "laxity_floor", "elevator_interval"):
        value, flag = given[option], "--" + option.replace("_", "-")
        if value is None:
            continue
        off = option != "shed_horizon" and value.strip() == "off"
        changes[f"{option}_s"] = None if off else parse_duration(value, flag)
        if option == "elevator_interval" and changes[f"{option}_s"] == 0:
            raise click.BadParameter(f"{value!r}: must be > 0 or off", param_hint=flag)
    changes.update(_window(given))
    chosen = replace(order, **changes)
    if chosen.goal == "fewest_errors" and (
        chosen.overload != "restore" or chosen.laxity_floor_s is None
    ):
        raise click.UsageError(
            "--overload fewest_errors orders the schedules in ERROR of the default order: "
            "it needs --overload-policy restore and a --laxity-floor"
        )
    return chosen


def _window(given: dict[str, Any]) -> dict[str, Any]:
    """The window options given, as :class:`OrderPolicy` fields."""
    changes: dict[str, Any] = {}
    size = given["window"]
    if size is not None:
        if size.strip() == "off":
            changes["window_size"] = None
        else:
            try:
                changes["window_size"] = int(size)
            except ValueError:
                raise click.BadParameter(
                    f"{size!r}: a whole number of schedules, or off", param_hint="--window"
                ) from None
            if changes["window_size"] < 1:
                raise click.BadParameter(f"{size!r}: must be >= 1, or off", param_hint="--window")
    horizon = given["window_horizon"]
    if horizon is not None:
        seconds = parse_duration(horizon, "--window-horizon")
        if seconds <= 0:
            raise click.BadParameter(f"{horizon!r}: must be > 0", param_hint="--window-horizon")
        changes["window_s"] = seconds
    read_on = given["window_read_on"]
    if read_on is not None:
        changes["window_read_on"] = _read_on(read_on)
    return changes


def _read_on(value: str) -> float | None:
    """``--window-read-on``: window sizes (a number >= 0), or unlimited (``None``)."""
    if value.strip() == "unlimited":
        return None
    try:
        sizes = float(value)
    except ValueError:
        sizes = math.nan
    if not 0 <= sizes < math.inf:
        raise click.BadParameter(
            f"{value!r}: a number of window sizes >= 0, or unlimited", param_hint="--window-read-on"
        )
    return sizes


#: Upper bounds of the generated fleet's options: a typo such as an extra
#: digit group is a usage error, not an hour of memory allocation.
MAX_SCHEDULES = 10_000_000
MAX_SLOTS = 10_000_000


@click.command()
@click.option(
    "--workload",
    "workload_path",
    type=click.Path(dir_okay=False, path_type=Path),
    help="a workload JSON file (docs/simulator.md)",
)
@click.option(
    "--schedules", type=click.IntRange(1, MAX_SCHEDULES), help="generate N periodic schedules"
)
@click.option(
    "--slots",
    type=click.IntRange(1, MAX_SLOTS),
    help="worker slots (overrides the workload's workers)",
)
@click.option(
    "--slots-per-worker",
    type=click.IntRange(1, MAX_SLOTS),
    default=DEFAULT_SLOTS_PER_WORKER,
    show_default=True,
    help="the slots of one simulated worker: --slots (and a generated workload's "
    "slots) is split into workers of this many",
)
@click.option(
    "--load", type=float, default=0.9, show_default=True, help="generated: demand / capacity"
)
@click.option("--period-min", default="1h", show_default=True, help="generated: shortest period")
@click.option("--period-max", default="6h", show_default=True, help="generated: longest period")
@click.option(
    "--cooldown-fraction",
    type=float,
    default=0.5,
    show_default=True,
    help="generated: cooldown as a fraction of the period",
)
@click.option(
    "--failure-rate",
    type=click.FloatRange(0.0, 1.0),
    default=0.0,
    show_default=True,
    help="generated: probability that a run fails",
)
@click.option(
    "--share-spread",
    type=float,
    default=1.0,
    show_default=True,
    help="generated: capacity shares (run time / period) log-uniform within this "
    "factor either way; 1: every schedule the same share",
)
@click.option(
    "--duration",
    default="60s",
    show_default=True,
    help="the app's schedules: mean run time of one with none measured "
    "(else its duration_override)",
)
@click.option(
    "--sample",
    type=click.IntRange(1, MAX_SCHEDULES),
    default=DEFAULT_SAMPLE_LIMIT,
    show_default=True,
    help="the app's schedules: simulate a random sample of this many when more "
    "are stored, on slots scaled alike",
)
@click.option("--horizon", help="simulated time, e.g. 7d (default: the workload's, else 7d)")
@click.option(
    "--warmup", help="not measured at the start (default: 4 longest periods, <= horizon/2)"
)
@click.option(
    "--outage",
    "outages",
    multiple=True,
    help="all workers down START:END (from the start), e.g. 3d:3d6h; repeatable",
)
@click.option("--seed", type=int, help="random seed (default: the workload's, else 0)")
@click.option(
    "--policy",
    "policies",
    multiple=True,
    type=click.Choice(POLICIES),
    help="repeatable; default: all of " + ", ".join(POLICIES),
)
@click.option(
    "--find-slots",
    is_flag=True,
    help="search the smallest slot count with no ERROR after warm-up (first policy); "
    "names the schedules no slot count keeps out of ERROR",
)
@_order_options
@click.option("--json", "as_json", is_flag=True, help="JSON instead of a table")
@click.pass_context
def simulate(
    ctx: click.Context,
    /,
    policies: tuple[str, ...],
    find_slots: bool,
    as_json: bool,
    **options: Any,
) -> None:
    """Simulate the scheduler on a virtual clock and compare policies.

    \b
    Examples:
      celery -A proj dgs simulate --slots 8 --duration 2m
      celery -A proj dgs simulate --workload fleet.json --json
      celery -A proj dgs simulate --schedules 1000 --slots 20 --load 1.1 --share-spread 4
      celery -A proj dgs simulate --duration 5m --find-slots
    Without --workload or --schedules it runs the app's fleet: its declarations
    and the runtime and adaptive schedules and pending checks its store holds
    (a random sample above --sample, said on the first line).
    dgs runs with the app's dgs_* order settings (beat's defaults without an
    app); --overload-policy ... --lookahead change them. Retries follow
    dgs_retry_backoff (the workload file's retry_backoff when it has one).
    Schedules that can never be served (e.g. cron times inside a blackout) are
    named on stderr with the reason.
    Exit status: 0 done; 1 ERROR after warm-up under the first policy (or no
    slot count found); 2 bad options or workload.
    """
    env = _app_env(ctx)
    opts = WorkloadOptions.take(options | {"find_slots": find_slots})
    try:
        built = build_workload(env, opts)
    except WorkloadError as exc:
        raise click.UsageError(str(exc)) from exc
    workload = built.workload
    problems = unservable(workload)
    for problem in problems.values():
        click.echo(f"WARNING {problem}", err=True)
    chosen = list(policies) or list(POLICIES)
    order = _order(env, options)
    if find_slots:
        find_and_print(built, chosen[0], opts.slots_per_worker, as_json, problems, order)
        return
    results = run_policies(workload, chosen, order)
    if as_json:
        source = {"source": built.source} if built.source else {}
        rows = [
            r.to_dict() | ({"order": asdict(order)} if r.policy == "dgs" else {}) | source
            for r in results
        ]
        click.echo(json.dumps(rows, indent=2))
    else:
        shown = format_order(order) if "dgs" in chosen else ""
        notes = built.first_line_notes() + (f"; {shown}" if shown else "")
        click.echo(f"{workload_summary(workload)}, {notes}")
        click.echo(format_table(results))
        echo_if(wasted_note(results))
    ctx.exit(1 if results[0].error_s > 0 else 0)
