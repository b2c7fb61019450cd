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
import sys
from collections.abc import Callable
from dataclasses import asdict, replace
from pathlib import Path
from typing import Any

import click

from ..core.fewest_errors import OVERLOAD_GOALS
from ..core.overload import OVERLOAD_POLICIES
from ..core.ranking import OrderPolicy
from ..core.servable import Unservable
from ..errors import SettingsError
from ..ops.env import Env
from ..ops.timetext import counted
from ..sim.fleet import DEFAULT_SAMPLE_LIMIT, FleetSample
from ..sim.policies import POLICIES
from ..sim.report import (
    AMPLE_DEMAND_FACTOR,
    SlotSearch,
    ample_slots,
    find_slots,
    format_order,
    format_table,
    run_policies,
    unservable,
    wasted_note,
    workload_summary,
)
from ..sim.workload import DEFAULT_SLOTS_PER_WORKER, WorkloadError
from .simulate_workload import Built, WorkloadOptions, build_workload, parse_duration


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
        _find(built, chosen[0], opts.slots_per_worker, as_json, problems, order)
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
        _echo_if(wasted_note(results))
    ctx.exit(1 if results[0].error_s > 0 else 0)


def _echo_if(line: str | None) -> None:
    if line is not None:
        click.echo(line)


def _find(
    built: Built,
    policy: str,
    per_worker: int,
    as_json: bool,
    problems: dict[str, Unservable],
    order: OrderPolicy,
) -> None:
    workload = built.workload
    unlimited = ample_slots(workload)
    ample = (
        "a slot for every schedule"
        if unlimited == len(workload.schedules)
        else f"{AMPLE_DEMAND_FACTOR} x the demand"
    )

    def progress(slots: int, error_s: float, complete: bool) -> None:
        if as_json:
            return
        what = ample if slots == unlimited else "slots"
        shown = f"{slots:>6} {what}"
        if complete:
            click.echo(f"  {shown}: ERROR {error_s:.0f} s", err=True)
        else:
            click.echo(f"  {shown}: ERROR (stopped at the first)", err=True)

    if not as_json:
        shown = f"; {format_order(order)}" if policy == "dgs" else ""
        summary = workload_summary(workload, searching=True)
        click.echo(f"{summary}, {built.first_line_notes()}{shown}")
        click.echo(
            f"  first a run with {counted(unlimited, 'slot')} ({ample}: what no slot "
            "count can serve is in ERROR there), then the counts from the demand up:",
            err=True,
        )
    search = find_slots(workload, policy, per_worker=per_worker, progress=progress, order=order)
    if as_json:
        click.echo(json.dumps(_search_json(built, search, policy, order, problems), indent=2))
    elif search.slots is None:
        window_h = (workload.horizon_s - workload.effective_warmup()) / 3600
        click.echo(
            f"no slot count keeps every schedule out of ERROR: with {ample} "
            f"({unlimited} slots), over the {window_h:.3g} h after warm-up:"
        )
        for name, error_s in search.unservable.items():
            why = (
                f"{problems[name].reason}: {problems[name].detail}"
                if name in problems
                else "run-time variance or its constraints"
            )
            click.echo(f"  {name}: in ERROR {seconds_text(error_s)} ({why})")
        others = search.others
        if others is not None:
            rest = len(workload.schedules) - len(search.unservable)
            if others.slots is None:
                click.echo(f"nor the {counted(rest, 'other schedule')}: see them with --json")
            else:
                kept = counted(others.slots, "slot")
                click.echo(
                    f"{policy}: {kept} {'keeps' if others.slots == 1 else 'keep'} "
                    f"the {counted(rest, 'other schedule')} out of ERROR after warm-up"
                )
    else:
        kept = counted(search.slots, "slot")
        verb = "keeps" if search.slots == 1 else "keep"
        click.echo(f"{policy}: {kept} {verb} every schedule out of ERROR after warm-up")
        _echo_if(bunching_note(search.slots, workload.load() * workload.slots))
        sample = built.sample
        if sample is not None and sample.sampled:
            click.echo(_fleet_line(sample, search.slots, workload.load() * workload.slots))
        assert search.result is not None
        click.echo(format_table([search.result]))
        _echo_if(wasted_note([search.result]))
    sys.exit(0 if search.slots is not None else 1)


#: An answer this many times the demand or more is explained (:func:`bunching_note`).
BUNCHING_FACTOR = 1.5


def seconds_text(seconds: float) -> str:
    """``451 s``, or ``0.3 s`` for less than one (not ``0 s``)."""
    return f"{seconds:.0f} s" if seconds >= 1 or seconds == 0 else f"{seconds:.1g} s"


def bunching_note(slots: int, demand: float) -> str | None:
    """Why ``slots`` is well above the demand (the slots busy on average), when it is."""
    if slots < BUNCHING_FACTOR * max(demand, 1.0):
        return None
    return (
        f"({slots} slots against a demand of {demand:.3g}: the demand is the slots busy "
        "on average; runs whose deadlines fall together (cron times, windows shorter "
        "than the runs' spread, schedules added at once with equal periods) need more "
        "slots at once)"
    )


def _fleet_line(sample: FleetSample, slots: int, demand: float) -> str:
    """The sample's answer as the whole fleet's: a range, as coarse as one
    sample slot scaled up (a larger ``--sample`` narrows it)."""
    low, high = sample.fleet_slot_range(slots, demand)
    head = f"on a sample of {len(sample.entries)} of {sample.total} schedules: "
    if low == high:
        return f"{head}about {high} slots for the whole fleet"
    return (
        f"{head}the whole fleet needs {low} to {high} slots (the sample's {slots} scaled "
        f"by {sample.total}/{len(sample.entries)}, and its demand, "
        f"{demand * sample.total / len(sample.entries):.2f} slots, rounded up); "
        "a larger --sample narrows it"
    )


def _search_json(
    built: Built,
    search: SlotSearch,
    policy: str,
    order: OrderPolicy,
    problems: dict[str, Unservable],
) -> dict[str, Any]:
    """``--find-slots --json``'s document; with a sample, ``fleet_slots``: the
    answer scaled to the whole fleet, and ``fleet_slots_at_least``: the low end
    of the fleet counts the sample's answer stands for."""
    doc: dict[str, Any] = {
        "policy": policy,
        **({"order": asdict(order)} if policy == "dgs" else {}),
        "slots": search.slots,
        "tried": {str(k): v for k, v in sorted(search.tried.items())},
        "unservable": {
            name: {
                "error_s": error_s,
                "reason": problems[name].reason if name in problems else None,
                "detail": problems[name].detail if name in problems else None,
            }
            for name, error_s in search.unservable.items()
        },
        "result": search.result.to_dict() if search.result else None,
    }
    if search.others is not None:  # the answer for the schedules besides the unservable
        doc["others_slots"] = search.others.slots
    if built.source:
        doc["source"] = built.source
    sample = built.sample
    if sample is not None and sample.sampled and search.slots is not None:
        demand = built.workload.load() * built.workload.slots
        low, high = sample.fleet_slot_range(search.slots, demand)
        doc["fleet_slots"], doc["fleet_slots_at_least"] = high, low
    return doc
