"""Schedule specifications: periodic and cron (seed 000), adaptive (seed 001),
deferred checks (seed 002), validated at construction.

A spec is a frozen, keyword-only value. Invalid values raise
:class:`~celery_dgs.errors.ScheduleConfigError` naming the schedule and field.
``to_dict`` gives the JSON form the store persists (``SPEC_FORMAT_VERSION``
is written with it); :func:`~celery_dgs.core.spec_build.spec_from_dict` reads
it back.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import dataclass, field
from datetime import timedelta
from typing import Any, ClassVar

from ..errors import ScheduleConfigError
from .blackout_periods import Blackout, parse_blackouts
from .durations import format_duration
from .items import check_threshold
from .schedule_names import (
    CHECK_CONFIGURATION_PREFIX,
    check_key,
    check_schedule_name,
    schedule_name,
)
from .spec_values import (
    DEFAULT_PRIORITY,
    MAX_DURATION,
    bounded_int,
    check_priority,
    cron_never_fires,
    cron_problem,
    is_list,
    optional_timedelta,
    to_timedelta,
)
from .tz import ZoneLike, zone_name

SPEC_FORMAT_VERSION = 1
#: A periodic schedule whose period is shorter gets a warning (valid, but a
#: dispatch, tens of milliseconds, is then a large part of the period).
SHORTEST_SENSIBLE_PERIOD = timedelta(seconds=1)
#: The interval ladder's top index (``celery_dgs.core.adaptive``): 4**6 units.
MAX_INTERVAL_INDEX = 10


@dataclass(frozen=True, kw_only=True)
class ScheduleSpec:
    """Fields common to both kinds of schedule (seed 000, "Parameters and stats").

    ``task`` is the Celery task name; ``configuration`` names a second schedule
    of the same task (``task@configuration``). ``args``/``kwargs`` are passed to
    the task and must be JSON-serializable. ``pool`` is the worker queue the
    schedule runs on (``None``: the default pool). ``avoid_blackout_overlap``
    holds back a start that is expected, by the average duration, to run into a
    blackout window (seed future direction 6). ``priority`` (0-99, lower
    first, default 50) decides who waits when not every due schedule can start
    (:mod:`celery_dgs.core.priority`). ``partial_failure_threshold`` (a share in
    ``(0, 1]``; ``None``: ``dgs_partial_failure_threshold``): a run whose failed
    share of reported items is above it has failed (:mod:`celery_dgs.core.items`).
    """

    kind: ClassVar[str] = ""

    task: str
    configuration: str = ""
    tz: str = "UTC"
    blackout_periods: tuple[Blackout, ...] = ()
    max_expected_duration: timedelta | None = None
    max_allowed_duration: timedelta | None = None
    dont_run_on_nodes: frozenset[str] = frozenset()
    duration_override: timedelta | None = None
    avoid_blackout_overlap: bool = False
    pool: str | None = None
    priority: int = DEFAULT_PRIORITY
    partial_failure_threshold: float | None = None
    args: tuple[Any, ...] = ()
    kwargs: Mapping[str, Any] = field(default_factory=dict)

    @property
    def name(self) -> str:
        return schedule_name(self.task, self.configuration)

    def __post_init__(self) -> None:
        name = check_schedule_name(self.task, self.configuration, check=self.kind == "check")
        try:
            object.__setattr__(self, "tz", zone_name(self.tz))
        except ValueError as exc:
            raise ScheduleConfigError(name, "tz", str(exc)) from exc
        object.__setattr__(self, "blackout_periods", parse_blackouts(name, self.blackout_periods))
        for fname in ("max_expected_duration", "max_allowed_duration", "duration_override"):
            object.__setattr__(self, fname, optional_timedelta(name, fname, getattr(self, fname)))
        if (
            self.max_expected_duration is not None
            and self.max_allowed_duration is not None
            and self.max_expected_duration > self.max_allowed_duration
        ):
            raise ScheduleConfigError(
                name, "max_expected_duration", "must not exceed max_allowed_duration"
            )
        nodes: Any = self.dont_run_on_nodes
        nodes = tuple(nodes) if is_list(nodes) else nodes  # a generator is read once
        if not isinstance(nodes, tuple) or not all(isinstance(n, str) for n in nodes):
            raise ScheduleConfigError(
                name, "dont_run_on_nodes", f"must be a list of node names, got {nodes!r}"
            )
        object.__setattr__(self, "dont_run_on_nodes", frozenset(nodes))
        if self.pool is not None and (not isinstance(self.pool, str) or not self.pool):
            raise ScheduleConfigError(name, "pool", "must be a non-empty queue name or None")
        object.__setattr__(self, "priority", check_priority(name, self.priority))
        if self.partial_failure_threshold is not None:
            try:
                threshold = check_threshold(self.partial_failure_threshold)
            except ValueError as exc:
                raise ScheduleConfigError(name, "partial_failure_threshold", str(exc)) from None
            object.__setattr__(self, "partial_failure_threshold", threshold)
        if not isinstance(self.avoid_blackout_overlap, bool):
            raise ScheduleConfigError(
                name,
                "avoid_blackout_overlap",
                f"must be True or False, got {self.avoid_blackout_overlap!r}",
            )
        if not is_list(self.args):
            raise ScheduleConfigError(name, "args", f"must be a list or tuple, got {self.args!r}")
        kwargs: Any = self.kwargs
        if not isinstance(kwargs, Mapping) or not all(isinstance(k, str) for k in kwargs):
            raise ScheduleConfigError(
                name, "kwargs", f"must be a mapping with string keys, got {kwargs!r}"
            )
        object.__setattr__(self, "args", tuple(self.args))
        object.__setattr__(self, "kwargs", dict(kwargs))
        for fname in ("args", "kwargs"):
            try:
                json.dumps(getattr(self, fname), allow_nan=False)
            except (TypeError, ValueError) as exc:
                raise ScheduleConfigError(name, fname, f"must be JSON-serializable: {exc}") from exc

    def warnings(self) -> list[str]:
        """Suspicious but valid settings, as messages naming the schedule and field."""
        return []

    def to_dict(self) -> dict[str, Any]:
        """The JSON-able form persisted by the store."""
        return {
            "format": SPEC_FORMAT_VERSION,
            "kind": self.kind,
            "task": self.task,
            "configuration": self.configuration,
            "tz": self.tz,
            "blackout_periods": [b.as_pair() for b in self.blackout_periods],
            "max_expected_duration": _seconds(self.max_expected_duration),
            "max_allowed_duration": _seconds(self.max_allowed_duration),
            "dont_run_on_nodes": sorted(self.dont_run_on_nodes),
            "duration_override": _seconds(self.duration_override),
            "avoid_blackout_overlap": self.avoid_blackout_overlap,
            "pool": self.pool,
            **({"priority": self.priority} if self.priority != DEFAULT_PRIORITY else {}),
            **(
                {"partial_failure_threshold": self.partial_failure_threshold}
                if self.partial_failure_threshold is not None
                else {}
            ),
            "args": list(self.args),
            "kwargs": dict(self.kwargs),
        }


@dataclass(frozen=True, kw_only=True)
class PeriodicSpec(ScheduleSpec):
    """Data must never be older than ``scheduling_period``; wait ``cooldown_duration``
    after the last good run before starting again.

    ``default_cooldown``: the cooldown was not declared but given by
    ``dgs_default_cooldown_fraction`` (``cooldown_duration`` is that fraction of
    the period); such a cooldown waits the fraction of the time between the
    run's end and ``should_start_by`` (``celery_dgs.core.timing.start_times``)."""

    kind: ClassVar[str] = "periodic"

    scheduling_period: timedelta
    cooldown_duration: timedelta = timedelta(0)
    default_cooldown: bool = False

    def __post_init__(self) -> None:
        super().__post_init__()
        period = to_timedelta(self.name, "scheduling_period", self.scheduling_period)
        cooldown = to_timedelta(
            self.name, "cooldown_duration", self.cooldown_duration, allow_zero=True
        )
        if cooldown >= period:
            raise ScheduleConfigError(
                self.name,
                "cooldown_duration",
                f"({format_duration(cooldown)}) must be shorter than the period "
                f"({format_duration(period)})",
            )
        if not isinstance(self.default_cooldown, bool):
            raise ScheduleConfigError(
                self.name,
                "default_cooldown",
                f"must be True or False, got {self.default_cooldown!r}",
            )
        object.__setattr__(self, "scheduling_period", period)
        object.__setattr__(self, "cooldown_duration", cooldown)

    def warnings(self) -> list[str]:
        if self.scheduling_period >= SHORTEST_SENSIBLE_PERIOD:
            return []
        return [
            f"schedule {self.name!r}, field 'period': "
            f"{format_duration(self.scheduling_period)} is shorter than "
            f"{format_duration(SHORTEST_SENSIBLE_PERIOD)}: beat starts it again as soon "
            "as each run ends, one slot busy with it all the time, and its data is "
            "older than the period whenever a dispatch takes longer"
        ]

    def to_dict(self) -> dict[str, Any]:
        out = {
            **super().to_dict(),
            "scheduling_period": self.scheduling_period.total_seconds(),
            "cooldown_duration": self.cooldown_duration.total_seconds(),
        }
        if self.default_cooldown:  # only then: specs stored before it keep their JSON
            out["default_cooldown"] = True
        return out


@dataclass(frozen=True, kw_only=True)
class CronSpec(ScheduleSpec):
    """Start at each ``cron_schedule`` time (in ``tz``) and finish within
    ``cron_max_schedule_duration`` of it."""

    kind: ClassVar[str] = "cron"

    cron_schedule: str
    cron_max_schedule_duration: timedelta

    def __post_init__(self) -> None:
        super().__post_init__()
        expr = self.cron_schedule
        problem = cron_problem(expr) if isinstance(expr, str) else f"must be text, got {expr!r}"
        if problem is not None:
            raise ScheduleConfigError(self.name, "cron_schedule", problem)
        object.__setattr__(self, "cron_schedule", " ".join(expr.split()))
        never = cron_never_fires(self.cron_schedule, self.tz)
        if never is not None:  # croniter accepts dates that never come, like "0 0 30 2 *"
            raise ScheduleConfigError(self.name, "cron_schedule", f"{expr!r} never fires: {never}")
        within = to_timedelta(
            self.name, "cron_max_schedule_duration", self.cron_max_schedule_duration
        )
        object.__setattr__(self, "cron_max_schedule_duration", within)

    def warnings(self) -> list[str]:
        from .cron import shortest_cron_gap

        gap = shortest_cron_gap(self.cron_schedule, self.tz)
        if gap is not None and self.cron_max_schedule_duration > gap:
            return [
                f"schedule {self.name!r}, field 'within': "
                f"{format_duration(self.cron_max_schedule_duration)} is longer than the "
                f"shortest gap between cron times ({format_duration(gap)}); runs will "
                "overlap their next window"
            ]
        return []

    def to_dict(self) -> dict[str, Any]:
        return {
            **super().to_dict(),
            "cron_schedule": self.cron_schedule,
            "cron_max_schedule_duration": self.cron_max_schedule_duration.total_seconds(),
        }


@dataclass(frozen=True, kw_only=True)
class AdaptiveSpec(ScheduleSpec):
    """A revisit schedule whose period follows its runs' results (seed 001).

    The period is an interval of a ladder (``celery_dgs.core.adaptive``):
    index 0-1 is one ``interval_unit``, 2-4 two, ``n >= 5`` ``4**(n-4)``;
    a new schedule starts at ``initial_interval_index``. ``max_failures``
    consecutive failures disable it until the runtime API upserts it again."""

    kind: ClassVar[str] = "adaptive"

    interval_unit: timedelta = timedelta(hours=36)
    initial_interval_index: int = 4
    max_failures: int = 3

    def __post_init__(self) -> None:
        super().__post_init__()
        unit = to_timedelta(self.name, "interval_unit", self.interval_unit)
        longest = unit * 4 ** (MAX_INTERVAL_INDEX - 4) * 1.1  # the top step, fudged up
        if longest > MAX_DURATION:
            raise ScheduleConfigError(
                self.name,
                "interval_unit",
                f"{format_duration(unit)} is too long: the ladder's longest interval "
                f"(4096 units) must stay within {MAX_DURATION.days} days",
            )
        object.__setattr__(self, "interval_unit", unit)
        bounded_int(
            self.name, "initial_interval_index", self.initial_interval_index, 0, MAX_INTERVAL_INDEX
        )
        bounded_int(self.name, "max_failures", self.max_failures, 1, 1_000_000)

    def to_dict(self) -> dict[str, Any]:
        return {
            **super().to_dict(),
            "interval_unit": self.interval_unit.total_seconds(),
            "initial_interval_index": self.initial_interval_index,
            "max_failures": self.max_failures,
        }


@dataclass(frozen=True, kw_only=True)
class CheckSpec(ScheduleSpec):
    """A deferred check (seed 002): run ``task`` for ``key`` at a time, and again
    at the time its result names, until it returns ``None``.

    The check's state (its first and next check times and how many checks
    ran) is stored with it, not in the spec: ``celery_dgs.core.checks``.
    ``within``: how long after its time a check may start and still be on
    time (its deadline). Guards: at most ``max_checks`` checks; a next check
    that is not in the future, or further ahead than ``horizon``, ends it;
    ``max_failures`` consecutive failed runs end it. ``slot``: check times are
    rounded up to a multiple of it (from the Unix epoch), so checks batch.
    Give ``key``; the configuration is derived from it."""

    kind: ClassVar[str] = "check"

    key: str = ""
    within: timedelta = timedelta(minutes=5)
    max_checks: int = 5
    horizon: timedelta = timedelta(days=30)
    max_failures: int = 3
    slot: timedelta | None = None

    def __post_init__(self) -> None:
        key = check_key(self.task, self.key)
        configuration = CHECK_CONFIGURATION_PREFIX + key
        if self.configuration not in ("", configuration):
            raise ScheduleConfigError(
                schedule_name(str(self.task), configuration),
                "configuration",
                f"is derived from the key ({configuration!r}), got {self.configuration!r}",
            )
        object.__setattr__(self, "key", key)
        object.__setattr__(self, "configuration", configuration)
        super().__post_init__()
        name = self.name
        object.__setattr__(self, "within", to_timedelta(name, "within", self.within))
        object.__setattr__(self, "horizon", to_timedelta(name, "horizon", self.horizon))
        object.__setattr__(self, "slot", optional_timedelta(name, "slot", self.slot))
        bounded_int(name, "max_checks", self.max_checks, 1, 1_000_000)
        bounded_int(name, "max_failures", self.max_failures, 1, 1_000_000)

    def to_dict(self) -> dict[str, Any]:
        out = super().to_dict()
        del out["configuration"]  # derived from the key
        return {
            **out,
            "key": self.key,
            "within": self.within.total_seconds(),
            "max_checks": self.max_checks,
            "horizon": self.horizon.total_seconds(),
            "max_failures": self.max_failures,
            "slot": _seconds(self.slot),
        }


def with_name(spec: ScheduleSpec, task: str, configuration: str) -> ScheduleSpec:
    """``spec`` under another name: a copy with ``task`` and ``configuration``
    replaced, its own ``kwargs`` dict (the one mutable field) and the other,
    immutable, fields shared. Only the name fields are validated
    (ScheduleConfigError naming the new schedule): the other fields were
    validated when ``spec`` was built and no check of them depends on the name.
    Loading a million stored schedules that share a few shapes relies on this
    (see ``celery_dgs.store.loader``)."""
    check = isinstance(spec, CheckSpec)
    if (
        task == spec.task
        and isinstance(configuration, str)
        and not check
        and "@" not in configuration
        and not configuration.startswith(CHECK_CONFIGURATION_PREFIX)
    ):
        task = spec.task  # already checked; and one string object for all its schedules
    else:
        check_schedule_name(task, configuration, check=check)
    clone = object.__new__(type(spec))
    clone.__dict__.update(spec.__dict__)
    object.__setattr__(clone, "task", task)
    object.__setattr__(clone, "configuration", configuration)
    if check:
        key = configuration[len(CHECK_CONFIGURATION_PREFIX) :]
        object.__setattr__(clone, "key", check_key(task, key))
    object.__setattr__(clone, "kwargs", dict(spec.kwargs))
    return clone


def differing_fields(first: ScheduleSpec, second: ScheduleSpec) -> list[str]:
    """The spec fields (``kind`` included) whose values differ, in spec order."""
    a, b = first.to_dict(), second.to_dict()
    return [key for key in dict.fromkeys([*a, *b]) if a.get(key) != b.get(key)]


def given_differences(first: ScheduleSpec, second: ScheduleSpec) -> list[str]:
    """:func:`differing_fields` without the fields nobody declared:
    ``default_cooldown`` (it says how the cooldown was set: a difference is
    reported as ``cooldown_duration``), and ``cooldown_duration`` when both
    cooldowns are the default one (derived from the period)."""
    differ = differing_fields(first, second)
    derived = getattr(first, "default_cooldown", False) and getattr(
        second, "default_cooldown", False
    )
    if "default_cooldown" in differ and "cooldown_duration" not in differ:
        differ[differ.index("default_cooldown")] = "cooldown_duration"
    drop = {"default_cooldown", *(("cooldown_duration",) if derived else ())}
    return [key for key in differ if key not in drop]


def _seconds(delta: timedelta | None) -> float | None:
    return None if delta is None else delta.total_seconds()


def spec_zone(spec: ScheduleSpec) -> ZoneLike:
    """The spec's zone as a tzinfo (zoneinfo)."""
    from .tz import get_zone

    return get_zone(spec.tz)
