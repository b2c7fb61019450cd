"""The workload ``celery dgs simulate`` runs, from its options: a workload
file, a generated fleet, or the app's fleet (its declarations and store,
:mod:`.simulate_fleet`); with the app's settings that change outcomes (the
retry backoff and the run-time average's weight) where the workload gives
none; and the words of the first output line that say where it came from."""

from __future__ import annotations

from dataclasses import dataclass, fields, replace
from datetime import datetime, timedelta, timezone
from pathlib import Path
from typing import Any

import click
import redis
from sqlalchemy.exc import SQLAlchemyError

from ..core.durations import format_duration
from ..core.durations import parse_duration as core_parse_duration
from ..core.timing import DEFAULT_RETRY_LADDER, RetryLadder
from ..errors import DgsError
from ..ops.env import Env
from ..ops.leader import split_foreign_workers
from ..ops.timetext import counted
from ..settings import DgsSettings
from ..sim.fleet import FleetSample, fleet_workload
from ..sim.generate import GeneratorOptions, generate
from ..sim.workload import DEFAULT_HORIZON_S, Outage, Workload, load_workload
from .simulate_fleet import read_app_fleet


def parse_duration(value: str, what: str) -> float:
    """A typed duration (``90``, ``90s``, ``30m``, ``1h30m``, ``7d``) in
    seconds, > 0; ``BadParameter`` naming the option otherwise."""
    try:
        seconds = core_parse_duration(value).total_seconds()
    except ValueError as exc:
        raise click.BadParameter(str(exc), param_hint=what) from None
    if seconds < 0:
        raise click.BadParameter(f"{value!r} must not be negative", param_hint=what)
    return seconds


def _outage(value: str) -> Outage:
    start, sep, end = value.partition(":")
    if not sep:
        raise click.BadParameter(
            f"{value!r}: expected START:END, e.g. 3d:3d6h", param_hint="--outage"
        )
    t1, t2 = parse_duration(start, "--outage"), parse_duration(end, "--outage")
    if t2 <= t1:
        raise click.BadParameter(f"{value!r}: END must be after START", param_hint="--outage")
    return Outage(t1, t2)


#: A sample's slots rounded by more than this fraction change its load: the
#: first line then gives the whole fleet's.
ROUNDING_SAID = 0.05


@dataclass(frozen=True)
class WorkloadOptions:
    """The options of ``simulate`` that choose and shape the workload."""

    workload_path: Path | None
    schedules: int | None
    slots: int | None
    slots_per_worker: int
    load: float
    period_min: str
    period_max: str
    cooldown_fraction: float
    failure_rate: float
    share_spread: float
    duration: str
    horizon: str | None
    warmup: str | None
    outages: tuple[str, ...]
    seed: int | None
    sample: int
    find_slots: bool = False

    @classmethod
    def take(cls, options: dict[str, Any]) -> WorkloadOptions:
        """Its fields, taken out of ``options`` (the command's keyword arguments)."""
        return cls(**{f.name: options.pop(f.name) for f in fields(cls) if f.name in options})


@dataclass(frozen=True)
class Built:
    """The workload; where it came from, in words (``""``: the options say it);
    the sample of the app's fleet it holds (``None``: not the app's fleet)."""

    workload: Workload
    source: str = ""
    sample: FleetSample | None = None

    def first_line_notes(self) -> str:
        """What follows the summary on the first line: the retry backoff, the source."""
        ladder = self.workload.retry_ladder or DEFAULT_RETRY_LADDER
        notes = "retries after " + ", ".join(format_duration(step) for step in ladder)
        return notes + (f"; source: {self.source}" if self.source else "")


def build_workload(env: Env | None, opts: WorkloadOptions) -> Built:
    """The workload of the options; ``env``: the app (``None``: no app, as
    under ``python -m celery_dgs.sim``), whose settings fill what the workload
    leaves unset."""
    horizon_s = parse_duration(opts.horizon, "--horizon") if opts.horizon else None
    warmup_s = parse_duration(opts.warmup, "--warmup") if opts.warmup else None
    outage_list = [_outage(o) for o in opts.outages]
    if opts.workload_path is not None and opts.schedules is not None:
        raise click.UsageError("give --workload or --schedules, not both")
    if opts.workload_path is not None:
        built = Built(load_workload(opts.workload_path))
        if opts.slots is not None:
            sized = built.workload.with_slots(opts.slots, opts.slots_per_worker)
            built = replace(built, workload=sized)
    elif opts.schedules is not None:
        built = Built(_generated(opts))
    else:
        built = _app_fleet(env, opts, horizon_s or DEFAULT_HORIZON_S)
    updates: dict[str, Any] = {}
    if horizon_s is not None:
        updates["horizon_s"] = horizon_s
    if warmup_s is not None:
        updates["warmup_s"] = warmup_s
    if outage_list:
        updates["outages"] = [*built.workload.outages, *outage_list]
    if opts.seed is not None:
        updates["seed"] = opts.seed
    if env is not None:
        updates |= outcome_settings(built.workload, env.settings)
    built = replace(built, workload=replace(built.workload, **updates)) if updates else built
    workload = built.workload
    if warmup_s is not None and warmup_s >= workload.horizon_s:
        raise click.BadParameter(
            f"{opts.warmup!r}: the warm-up must be shorter than the simulated time "
            f"({format_duration(timedelta(seconds=workload.horizon_s))}): nothing would be "
            "measured",
            param_hint="--warmup",
        )
    return built


def outcome_settings(workload: Workload, settings: DgsSettings) -> dict[str, Any]:
    """The app's settings that change outcomes and the workload leaves unset
    (``dgs_retry_backoff``, ``dgs_ewma_alpha``), as workload fields; a
    workload's own ladder takes ``dgs_retry_duration_fraction``. The
    order's settings are passed apart (``settings.order_policy``); the default
    cooldown fraction is in the specs already (declarations and the store)."""
    found: dict[str, Any] = {}
    if workload.retry_ladder is None:
        found["retry_ladder"] = settings.retry_ladder
    else:
        found["retry_ladder"] = RetryLadder(
            workload.retry_ladder, float(settings.retry_duration_fraction)
        )
    if workload.ewma_alpha is None:
        found["ewma_alpha"] = settings.ewma_alpha
    return found


def _generated(opts: WorkloadOptions) -> Workload:
    if opts.slots is None:
        raise click.UsageError("--schedules needs --slots")
    return generate(
        GeneratorOptions(
            schedules=opts.schedules or 0,
            slots=opts.slots,
            load=opts.load,
            period_min_s=parse_duration(opts.period_min, "--period-min"),
            period_max_s=parse_duration(opts.period_max, "--period-max"),
            cooldown_fraction=opts.cooldown_fraction,
            failure_rate=opts.failure_rate,
            share_spread=opts.share_spread,
            slots_per_worker=opts.slots_per_worker,
            seed=opts.seed or 0,
        )
    )


def _app_fleet(env: Env | None, opts: WorkloadOptions, horizon_s: float) -> Built:
    """The app's fleet on ``--slots`` (one slot to start from with
    ``--find-slots``; without either, the live workers' slots), scaled to
    the sample."""
    if env is None:
        raise click.UsageError(
            "give --workload or --schedules, or run as `celery -A proj dgs simulate`"
        )
    slots = 1 if opts.slots is None and opts.find_slots else opts.slots
    live = None if slots is not None else live_slots(env)
    if slots is None and live is None:
        raise click.UsageError(
            "simulating the app's schedules needs --slots (or --find-slots "
            "to search the slot count): no live worker of this project is registered"
        )
    slots = slots if slots is not None else live
    assert slots is not None
    now = datetime.now(timezone.utc)
    fleet = read_app_fleet(
        env, now=now, horizon_s=horizon_s, limit=opts.sample, seed=opts.seed or 0
    )
    sample = fleet.sample
    workload = fleet_workload(
        sample,
        slots=slots,
        duration_s=parse_duration(opts.duration, "--duration"),
        now=now,
        per_worker=opts.slots_per_worker,
    )
    source = fleet.source
    if live is not None:
        source += f"; {counted(live, 'slot')}: the live workers' (--slots to change)"
    if sample.sampled:
        source += f"; sampled {len(sample.entries)} of {sample.total} (--sample)"
        if not opts.find_slots:
            source += f", slots scaled {slots} -> {workload.slots}"
            exact = slots * len(sample.entries) / sample.total
            if abs(workload.slots / exact - 1) > ROUNDING_SAID:
                fleet_load = workload.load() * workload.slots / exact
                source += f" (rounded: the whole fleet's load is about {fleet_load:.2f})"
    return Built(workload, source, sample)


def live_slots(env: Env) -> int | None:
    """The slots of this project's live workers (``None``: none registered,
    or Redis or the store cannot be read now)."""
    try:
        own, _ = split_foreign_workers(env, env.runtime.registry.live_workers())
    except (redis.RedisError, DgsError, SQLAlchemyError):
        return None
    return sum(w.slots for w in own) or None
