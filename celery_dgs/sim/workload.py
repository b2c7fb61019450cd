"""The simulator's input: schedules with run-time behaviour, workers, outages, horizon.

A workload is built from a JSON file (:func:`load_workload`, format in
``docs/simulator.md``), from schedule specs (:func:`workload_from_specs`), from
an app's stored fleet (:mod:`celery_dgs.sim.fleet`) or by
:func:`celery_dgs.sim.generate.generate`. Times inside the simulation are float
seconds from the workload's ``start``.
"""

from __future__ import annotations

import functools
import json
import math
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import datetime, timedelta, timezone
from pathlib import Path
from typing import Any

from ..core.adaptive import ladder_interval
from ..core.cron import shortest_cron_gap
from ..core.spec import AdaptiveSpec, CheckSpec, CronSpec, PeriodicSpec, ScheduleSpec
from ..core.spec_build import spec_from_dict
from ..core.stats import ScheduleStats
from ..core.timing import validate_retry_ladder
from ..errors import DgsError, ScheduleConfigError

#: Where simulations start when the workload does not say (a Monday, UTC).
DEFAULT_START = datetime(2026, 1, 5, tzinfo=timezone.utc)
DEFAULT_HORIZON_S = 7 * 86400.0
DEFAULT_DURATION_SIGMA = 0.3  # lognormal shape of run durations
DEFAULT_SLOTS_PER_WORKER = 10
#: Default warm-up: this many times the longest period (at most half the horizon).
#: The random initial phases take more than two periods to settle (measured:
#: 20,000 schedules, periods 6-24 h, load 0.9: 3,506 late starts after a 2-day
#: warm-up, none after 4 days).
WARMUP_PERIODS = 4.0


class WorkloadError(DgsError, ValueError):
    """An invalid workload file or option, naming the field."""


@dataclass(frozen=True)
class SimSchedule:
    """A schedule and how its runs behave: durations are lognormal with mean
    ``duration_s`` and shape ``duration_sigma`` (0: always exactly the mean);
    each run fails with probability ``failure_rate`` (at its end)."""

    spec: ScheduleSpec
    duration_s: float
    duration_sigma: float = DEFAULT_DURATION_SIGMA
    failure_rate: float = 0.0
    #: A deferred check (``CheckSpec``): after its n-th good run it asks to be
    #: checked again this many seconds later; past the tuple's end it is done.
    check_again_s: tuple[float, ...] = ()

    @property
    def name(self) -> str:
        return self.spec.name


@dataclass(frozen=True)
class SimWorker:
    """A Celery worker: node name (``celery@host``), host node, queues, slots."""

    name: str
    node: str
    slots: int
    queues: frozenset[str] = frozenset({"celery"})


@dataclass(frozen=True)
class Outage:
    """Workers down from ``start_s`` to ``end_s``; ``nodes`` empty: all of them.
    Runs in progress on a node that goes down end as interrupted."""

    start_s: float
    end_s: float
    nodes: frozenset[str] = frozenset()

    def hits(self, worker: SimWorker) -> bool:
        return not self.nodes or worker.node in self.nodes or worker.name in self.nodes


@dataclass(frozen=True)
class Workload:
    schedules: Sequence[SimSchedule]
    workers: Sequence[SimWorker]
    horizon_s: float = DEFAULT_HORIZON_S
    warmup_s: float | None = None  # None: see effective_warmup
    outages: Sequence[Outage] = ()
    seed: int = 0
    start: datetime = DEFAULT_START
    #: Randomise the initial phase (last good start within the last period) of
    #: every schedule, as if the fleet had been running; False: all never ran.
    warm_start: bool = True
    default_queue: str = "celery"
    extra: Mapping[str, Any] = field(default_factory=dict)
    #: The retry backoff after a failed run (``dgs_retry_backoff``); None:
    #: beat's default (:data:`~celery_dgs.core.timing.DEFAULT_RETRY_LADDER`).
    retry_ladder: tuple[timedelta, ...] | None = None
    #: Weight of the latest run in the average run time (``dgs_ewma_alpha``);
    #: None: beat's default.
    ewma_alpha: float | None = None
    #: Starting statistics by schedule name (e.g. a store's, measured from
    #: ``start``); a schedule without them starts as ``warm_start`` says.
    initial_stats: Mapping[str, ScheduleStats] = field(default_factory=dict)
    #: Seconds from a dispatch to its run's start (the broker, the worker's
    #: lease and hooks): the slot is held from the dispatch, the run's start
    #: (its lateness, its statistics) and its end come this much later.
    dispatch_latency_s: float = 0.0

    @property
    def slots(self) -> int:
        return sum(w.slots for w in self.workers)

    def effective_warmup(self) -> float:
        if self.warmup_s is not None:
            return self.warmup_s
        longest = max((nominal_period(s.spec) for s in self.schedules), default=0.0)
        return min(WARMUP_PERIODS * longest, self.horizon_s / 2)

    def load(self) -> float:
        """Demand / capacity: sum of mean duration / period over the slots (a
        deferred check: its runs' time over the horizon)."""
        demand = sum(self._demand(s) for s in self.schedules)
        return demand / self.slots if self.slots else math.inf

    def _demand(self, sched: SimSchedule) -> float:
        if isinstance(sched.spec, CheckSpec):
            runs = 1 + len(sched.check_again_s)
            return sched.duration_s * runs / self.horizon_s
        return sched.duration_s / nominal_period(sched.spec)

    def queues(self) -> frozenset[str]:
        """The default queue and every schedule's pool."""
        pools = {s.spec.pool for s in self.schedules if s.spec.pool}
        return frozenset({self.default_queue} | pools)

    def with_slots(self, slots: int, per_worker: int = DEFAULT_SLOTS_PER_WORKER) -> Workload:
        """The same workload on ``slots`` slots in workers of ``per_worker`` that
        consume every queue the schedules use."""
        from dataclasses import replace

        return replace(self, workers=make_workers(slots, per_worker, self.queues()))


def nominal_period(spec: ScheduleSpec) -> float:
    """Seconds between obligations: the period, the shortest cron gap, or an
    adaptive schedule's initial interval (its interval moves with its runs)."""
    if isinstance(spec, PeriodicSpec):
        return spec.scheduling_period.total_seconds()
    if isinstance(spec, AdaptiveSpec):
        return ladder_interval(spec.initial_interval_index, spec.interval_unit).total_seconds()
    if isinstance(spec, CronSpec):
        return _cron_period(spec.cron_schedule, spec.tz)
    if isinstance(spec, CheckSpec):  # one obligation: start within `within` of its time
        return spec.within.total_seconds()
    raise TypeError(type(spec).__name__)


@functools.lru_cache(maxsize=4096)
def _cron_period(expr: str, tz: str) -> float:
    gap = shortest_cron_gap(expr, tz)
    return gap.total_seconds() if gap is not None else 86400.0


def make_workers(
    slots: int, per_worker: int = DEFAULT_SLOTS_PER_WORKER, queue: str | Iterable[str] = "celery"
) -> list[SimWorker]:
    """``slots`` slots in workers of ``per_worker`` (the last one may be smaller),
    each consuming ``queue`` (one name or several)."""
    queues = frozenset({queue} if isinstance(queue, str) else queue)
    if slots < 1 or per_worker < 1:
        raise WorkloadError(f"slots ({slots}) and slots per worker ({per_worker}) must be >= 1")
    workers, i = [], 0
    while slots > 0:
        n = min(per_worker, slots)
        workers.append(SimWorker(f"celery@w{i}", f"w{i}", n, queues))
        slots -= n
        i += 1
    return workers


def workload_from_specs(
    specs: Sequence[ScheduleSpec], *, slots: int, duration_s: float, **options: Any
) -> Workload:
    """Declared schedules (``celery -A proj dgs simulate``): each run lasts
    ``duration_s`` on average unless the spec has a ``duration_override``."""
    scheds = [
        SimSchedule(s, s.duration_override.total_seconds() if s.duration_override else duration_s)
        for s in specs
    ]
    queues = {"celery"} | {s.pool for s in specs if s.pool}
    return Workload(scheds, make_workers(slots, queue=queues), **options)


# -- JSON -------------------------------------------------------------------------------
_SCHEDULE_SIM_KEYS = ("duration", "duration_sigma", "failure_rate")


def _number(
    where: str, field_name: str, value: Any, *, minimum: float = 0.0, maximum: float = math.inf
) -> float:
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not math.isfinite(value):
        raise WorkloadError(f"{where}, field {field_name!r}: must be a number, got {value!r}")
    if not minimum <= value <= maximum:
        raise WorkloadError(
            f"{where}, field {field_name!r}: must be in [{minimum}, {maximum}], got {value!r}"
        )
    return float(value)


def parse_schedule(index: int, data: Any) -> SimSchedule:
    """One entry of ``schedules``: the spec fields of ``ScheduleSpec.to_dict`` (durations
    in seconds; ``period``/``within`` accepted for ``scheduling_period`` and
    ``cron_max_schedule_duration``) plus ``duration``, ``duration_sigma``, ``failure_rate``."""
    if not isinstance(data, Mapping):
        raise WorkloadError(f"schedules[{index}]: must be an object, got {data!r}")
    fields = dict(data)
    where = f"schedule {fields.get('task', '?')!s}@{fields.get('configuration', '')!s}"
    where = where.rstrip("@") + f" (schedules[{index}])"
    if "period" in fields:
        fields["scheduling_period"] = fields.pop("period")
    if "within" in fields:
        fields["cron_max_schedule_duration"] = fields.pop("within")
    if "cron" in fields:
        fields["cron_schedule"] = fields.pop("cron")
    fields.setdefault("kind", "cron" if "cron_schedule" in fields else "periodic")
    if "duration" not in fields:
        raise WorkloadError(f"{where}, field 'duration': required (mean run seconds)")
    duration = _number(where, "duration", fields.pop("duration"))
    sigma = _number(
        where, "duration_sigma", fields.pop("duration_sigma", DEFAULT_DURATION_SIGMA), maximum=5.0
    )
    failure = _number(where, "failure_rate", fields.pop("failure_rate", 0.0), maximum=1.0)
    for key in (
        "scheduling_period",
        "cooldown_duration",
        "cron_max_schedule_duration",
        "max_expected_duration",
        "max_allowed_duration",
        "duration_override",
    ):
        if isinstance(fields.get(key), (int, float)) and not isinstance(fields[key], bool):
            fields[key] = timedelta(seconds=fields[key])
    try:
        spec = spec_from_dict(fields)
    except ScheduleConfigError as exc:
        raise WorkloadError(f"{where}, field {exc.field!r}: {exc.message}") from exc
    return SimSchedule(spec, duration, sigma, failure)


#: Bad schedules a workload's error names at most (then how many more).
SHOWN_BAD_SCHEDULES = 20


def parse_schedules(raw: Sequence[Any]) -> list[SimSchedule]:
    """Every entry of ``schedules``; a :class:`WorkloadError` naming each bad
    one (at most :data:`SHOWN_BAD_SCHEDULES`, one a line)."""
    schedules, bad = [], []
    for index, data in enumerate(raw):
        try:
            schedules.append(parse_schedule(index, data))
        except WorkloadError as exc:
            bad.append(str(exc))
    if bad:
        shown = bad[:SHOWN_BAD_SCHEDULES]
        if len(bad) > len(shown):
            shown.append(f"... and {len(bad) - len(shown)} more bad schedules")
        raise WorkloadError("\n".join(shown))
    return schedules


def _parse_worker(index: int, data: Any) -> SimWorker:
    where = f"workers[{index}]"
    if not isinstance(data, Mapping) or not isinstance(data.get("name"), str):
        raise WorkloadError(f"{where}: must be an object with a string 'name', got {data!r}")
    slots = data.get("slots", 1)
    if isinstance(slots, bool) or not isinstance(slots, int) or slots < 1:
        raise WorkloadError(f"{where}, field 'slots': must be an integer >= 1, got {slots!r}")
    queues = data.get("queues", ["celery"])
    if not isinstance(queues, list) or not all(isinstance(q, str) for q in queues):
        raise WorkloadError(f"{where}, field 'queues': must be a list of queue names")
    name = data["name"]
    node = data.get("node", name.split("@", 1)[-1])
    return SimWorker(name, str(node), slots, frozenset(queues))


def _parse_outage(index: int, data: Any) -> Outage:
    where = f"outages[{index}]"
    if not isinstance(data, Mapping):
        raise WorkloadError(f"{where}: must be an object, got {data!r}")
    start = _number(where, "start", data.get("start"))
    end = _number(where, "end", data.get("end"), minimum=start)
    nodes = data.get("nodes", [])
    if not isinstance(nodes, list) or not all(isinstance(n, str) for n in nodes):
        raise WorkloadError(f"{where}, field 'nodes': must be a list of node names")
    return Outage(start, end, frozenset(nodes))


_WORKLOAD_KEYS = {
    "schedules",
    "workers",
    "slots",
    "slots_per_worker",
    "horizon",
    "warmup",
    "outages",
    "seed",
    "start",
    "warm_start",
    "retry_backoff",
    "ewma_alpha",
    "dispatch_latency",
    "comment",
}


def _run_settings(data: Mapping[str, Any]) -> dict[str, Any]:
    """The settings of beat a workload may give: ``retry_backoff`` (seconds,
    ``dgs_retry_backoff``) and ``ewma_alpha`` (``dgs_ewma_alpha``), and the
    ``dispatch_latency`` of its workers (seconds)."""
    found: dict[str, Any] = {}
    if "retry_backoff" in data:
        steps = data["retry_backoff"]
        bad = WorkloadError(
            "field 'retry_backoff': must be a non-empty list of non-decreasing seconds "
            f"(the delays after the 1st, 2nd, ... consecutive failure), got {steps!r}"
        )
        if not isinstance(steps, list):
            raise bad
        seconds = [_number("workload", "retry_backoff", step) for step in steps]
        try:
            found["retry_ladder"] = validate_retry_ladder([timedelta(seconds=s) for s in seconds])
        except ValueError:
            raise bad from None
    if "ewma_alpha" in data:
        alpha = _number("workload", "ewma_alpha", data["ewma_alpha"], maximum=1.0)
        if alpha == 0:
            raise WorkloadError("field 'ewma_alpha': must be in (0, 1], got 0")
        found["ewma_alpha"] = alpha
    if "dispatch_latency" in data:
        found["dispatch_latency_s"] = _number(
            "workload", "dispatch_latency", data["dispatch_latency"]
        )
    return found


def workload_from_dict(data: Any) -> Workload:
    """Validate and build a workload from its JSON form (see ``docs/simulator.md``)."""
    if not isinstance(data, Mapping):
        raise WorkloadError("a workload must be a JSON object")
    unknown = set(data) - _WORKLOAD_KEYS
    if unknown:
        raise WorkloadError(f"unknown workload fields: {sorted(unknown)}")
    raw = data.get("schedules")
    if not isinstance(raw, list) or not raw:
        raise WorkloadError("field 'schedules': must be a non-empty list")
    schedules = parse_schedules(raw)
    names = [s.name for s in schedules]
    if len(set(names)) != len(names):
        dup = sorted({n for n in names if names.count(n) > 1})
        raise WorkloadError(f"field 'schedules': duplicate schedule names {dup}")
    if "workers" in data:
        if not isinstance(data["workers"], list) or not data["workers"]:
            raise WorkloadError("field 'workers': must be a non-empty list")
        workers = [_parse_worker(i, w) for i, w in enumerate(data["workers"])]
    else:
        slots = data.get("slots")
        if isinstance(slots, bool) or not isinstance(slots, int) or slots < 1:
            raise WorkloadError(
                f"field 'slots': give 'workers' or an integer 'slots' >= 1, got {slots!r}"
            )
        workers = make_workers(slots, int(data.get("slots_per_worker", DEFAULT_SLOTS_PER_WORKER)))
    horizon = _number("workload", "horizon", data.get("horizon", DEFAULT_HORIZON_S), minimum=1.0)
    warmup = data.get("warmup")
    if warmup is not None:
        warmup = _number("workload", "warmup", warmup, maximum=horizon)
    outages = data.get("outages", [])
    if not isinstance(outages, list):
        raise WorkloadError("field 'outages': must be a list")
    seed = data.get("seed", 0)
    if isinstance(seed, bool) or not isinstance(seed, int):
        raise WorkloadError(f"field 'seed': must be an integer, got {seed!r}")
    start = DEFAULT_START
    if "start" in data:
        try:
            start = datetime.fromisoformat(str(data["start"]))
        except ValueError as exc:
            raise WorkloadError(f"field 'start': {exc}") from exc
        if start.tzinfo is None:
            raise WorkloadError("field 'start': must have a UTC offset")
    return Workload(
        schedules,
        workers,
        horizon_s=horizon,
        warmup_s=warmup,
        outages=[_parse_outage(i, o) for i, o in enumerate(outages)],
        seed=seed,
        start=start.astimezone(timezone.utc),
        warm_start=bool(data.get("warm_start", True)),
        **_run_settings(data),
    )


def load_workload(path: str | Path) -> Workload:
    try:
        data = json.loads(Path(path).read_text())
    except (OSError, json.JSONDecodeError) as exc:
        raise WorkloadError(f"cannot read workload {path}: {exc}") from exc
    return workload_from_dict(data)
