"""Schedule specifications: periodic and cron (seed 000), adaptive (seed 001),
deferred checks (seed 002), validated at construction.

A spec is a frozen, keyword-only value. Invalid values raise
:class:`~celery_dgs.errors.ScheduleConfigError` naming the schedule and field.
``to_dict`` / ``spec_from_dict`` give the JSON form the store persists
(``SPEC_FORMAT_VERSION`` is written with it).
"""

from __future__ import annotations

import dataclasses
import difflib
import json
import math
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from datetime import datetime, time, timedelta, timezone
from functools import lru_cache
from typing import Any, ClassVar

from croniter import croniter

from ..errors import ScheduleConfigError
from .tz import ZoneLike, zone_name

SPEC_FORMAT_VERSION = 1
_CRON_PROBE = datetime(2026, 1, 1, tzinfo=timezone.utc)
#: The longest duration a spec field may have: deadlines past year 9999 overflow.
MAX_DURATION = timedelta(days=36500)
#: Cron expressions (and expression/zone pairs) whose checks are remembered.
CRON_CHECK_CACHE_SIZE = 4096
#: Priorities run from 0 (first) to 99 (last). Scheduled work defaults to the
#: middle; an operator's ad-hoc run (``celery dgs run``) defaults to 0.
MIN_PRIORITY, MAX_PRIORITY = 0, 99
DEFAULT_PRIORITY = 50
AD_HOC_PRIORITY = 0


def check_priority(name: str, value: Any, field_name: str = "priority") -> int:
    """``value`` as a priority (an int from 0 to 99); ScheduleConfigError otherwise."""
    if isinstance(value, bool) or not isinstance(value, int):
        raise ScheduleConfigError(
            name,
            field_name,
            f"must be an integer from {MIN_PRIORITY} to {MAX_PRIORITY}, got {value!r}",
        )
    if not MIN_PRIORITY <= value <= MAX_PRIORITY:
        raise ScheduleConfigError(
            name,
            field_name,
            f"must be from {MIN_PRIORITY} (first) to {MAX_PRIORITY} (last), got {value}",
        )
    return int(value)


#: A deferred check's configuration is this prefix and its key: the check of
#: ``task`` for key ``k`` is the schedule ``task@check:k``.
CHECK_CONFIGURATION_PREFIX = "check:"
#: The longest key a deferred check may have (its name must fit the store's 255).
MAX_CHECK_KEY_LENGTH = 200


def schedule_name(task: str, configuration: str = "") -> str:
    """``task`` for the default configuration, ``task@configuration`` otherwise."""
    return f"{task}@{configuration}" if configuration else task


def split_schedule_name(name: str) -> tuple[str, str]:
    """Inverse of :func:`schedule_name`."""
    task, _, configuration = name.partition("@")
    return task, configuration


@dataclass(frozen=True)
class Blackout:
    """A daily window, in the schedule's local time, when it must not run.

    ``end <= start`` means the window crosses midnight (``22:00``-``02:00``).
    """

    start: time
    end: time

    def __str__(self) -> str:
        return f"{self.start.isoformat()}-{self.end.isoformat()}"

    def as_pair(self) -> list[str]:
        return [self.start.isoformat(), self.end.isoformat()]


def _parse_clock(value: Any) -> time:
    if isinstance(value, time):
        return value.replace(tzinfo=None)
    if isinstance(value, str):
        try:
            return time.fromisoformat(value.strip())
        except ValueError:
            pass
    raise ValueError(f"{value!r} is not a time of day like '13:30' or '13:30:00'")


def parse_blackouts(name: str, value: Any) -> tuple[Blackout, ...]:
    """Accepts ``[("12:00", "14:00"), {"start": "00:00", "end": "01:00"}, Blackout]``."""
    if value is None:
        return ()
    if isinstance(value, (str, bytes, Mapping)) or not isinstance(value, Iterable):
        raise ScheduleConfigError(name, "blackout_periods", "must be a list of (start, end) pairs")
    result = []
    for i, item in enumerate(value):
        try:
            if isinstance(item, Blackout):
                window = item
            elif isinstance(item, Mapping):
                window = Blackout(_parse_clock(item["start"]), _parse_clock(item["end"]))
            else:
                start, end = item
                window = Blackout(_parse_clock(start), _parse_clock(end))
        except (KeyError, TypeError, ValueError) as exc:
            raise ScheduleConfigError(
                name, "blackout_periods", f"item {i} ({item!r}) is not a (start, end) pair: {exc}"
            ) from exc
        if window.start == window.end:
            raise ScheduleConfigError(
                name, "blackout_periods", f"item {i} ({window}) is empty: start equals end"
            )
        result.append(window)
    if _covers_whole_day(result):
        raise ScheduleConfigError(
            name, "blackout_periods", "the windows cover the whole day: it could never run"
        )
    return tuple(result)


def _covers_whole_day(windows: list[Blackout]) -> bool:
    """Whether the union of the daily windows is all 24 hours."""

    def second(t: time) -> float:
        return t.hour * 3600 + t.minute * 60 + t.second + t.microsecond / 1e6

    spans: list[tuple[float, float]] = []
    for w in windows:
        start, end = second(w.start), second(w.end)
        spans.extend([(start, end)] if end > start else [(start, 86400.0), (0.0, end)])
    reached = 0.0
    for start, end in sorted(spans):
        if start > reached:
            return False
        reached = max(reached, end)
    return reached >= 86400.0


def to_timedelta(name: str, field_name: str, value: Any, *, allow_zero: bool = False) -> timedelta:
    """Seconds (int/float) or ``timedelta`` → a positive ``timedelta``."""
    if isinstance(value, bool) or not isinstance(value, (int, float, timedelta)):
        raise ScheduleConfigError(
            name, field_name, f"must be a timedelta or a number of seconds, got {value!r}"
        )
    if isinstance(value, float) and not math.isfinite(value):
        raise ScheduleConfigError(name, field_name, f"must be finite, got {value!r}")
    try:
        delta = value if isinstance(value, timedelta) else timedelta(seconds=value)
    except OverflowError:
        delta = timedelta.max
    if delta > MAX_DURATION:
        raise ScheduleConfigError(
            name, field_name, f"{value!r} is too long: at most {MAX_DURATION.days} days (100 years)"
        )
    seconds = delta.total_seconds()
    if seconds < 0 or (seconds == 0 and not allow_zero):
        bound = "zero or more" if allow_zero else "more than zero"
        raise ScheduleConfigError(name, field_name, f"must be {bound}, got {seconds:g} s")
    return delta


def _is_list(value: Any) -> bool:
    """An iterable of items that is not a string, bytes or a mapping (whose
    iteration would give characters or keys)."""
    return isinstance(value, Iterable) and not isinstance(value, (str, bytes, Mapping))


def _optional_timedelta(name: str, field_name: str, value: Any) -> timedelta | None:
    return None if value is None else to_timedelta(name, field_name, value)


def _check_name(task: Any, configuration: Any, *, check: bool = False) -> str:
    """The schedule name of ``task``/``configuration``; ScheduleConfigError if invalid.

    Only a deferred check's configuration (``check=True``) starts with
    :data:`CHECK_CONFIGURATION_PREFIX`, and only its key may contain ``@``
    (the name splits at the first ``@``, which is after the task)."""
    name = schedule_name(task, configuration) if isinstance(task, str) else repr(task)
    if not isinstance(task, str) or not task.strip() or "@" in task:
        raise ScheduleConfigError(name, "task", "must be a non-empty task name without '@'")
    if not isinstance(configuration, str) or ("@" in configuration and not check):
        raise ScheduleConfigError(name, "configuration", "must be a string without '@'")
    if configuration.startswith(CHECK_CONFIGURATION_PREFIX) != check:
        raise ScheduleConfigError(
            name,
            "configuration",
            f"must not start with {CHECK_CONFIGURATION_PREFIX!r} (the names of deferred checks)",
        )
    return name


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
    (:mod:`celery_dgs.core.priority`).
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
    args: tuple[Any, ...] = ()
    kwargs: Mapping[str, Any] = field(default_factory=dict)

    @property
    def name(self) -> str:
        return schedule_name(self.task, self.configuration)

    def __post_init__(self) -> None:
        name = _check_name(self.task, self.configuration, check=self.kind == "check")
        try:
            object.__setattr__(self, "tz", zone_name(self.tz))
        except ValueError as exc:
            raise ScheduleConfigError(name, "tz", str(exc)) from exc
        object.__setattr__(self, "blackout_periods", parse_blackouts(name, self.blackout_periods))
        for fname in ("max_expected_duration", "max_allowed_duration", "duration_override"):
            object.__setattr__(self, fname, _optional_timedelta(name, fname, getattr(self, fname)))
        if (
            self.max_expected_duration is not None
            and self.max_allowed_duration is not None
            and self.max_expected_duration > self.max_allowed_duration
        ):
            raise ScheduleConfigError(
                name, "max_expected_duration", "must not exceed max_allowed_duration"
            )
        nodes: Any = self.dont_run_on_nodes
        nodes = tuple(nodes) if _is_list(nodes) else nodes  # a generator is read once
        if not isinstance(nodes, tuple) or not all(isinstance(n, str) for n in nodes):
            raise ScheduleConfigError(
                name, "dont_run_on_nodes", f"must be a list of node names, got {nodes!r}"
            )
        object.__setattr__(self, "dont_run_on_nodes", frozenset(nodes))
        if self.pool is not None and (not isinstance(self.pool, str) or not self.pool):
            raise ScheduleConfigError(name, "pool", "must be a non-empty queue name or None")
        object.__setattr__(self, "priority", check_priority(name, self.priority))
        if not isinstance(self.avoid_blackout_overlap, bool):
            raise ScheduleConfigError(
                name,
                "avoid_blackout_overlap",
                f"must be True or False, got {self.avoid_blackout_overlap!r}",
            )
        if not _is_list(self.args):
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
                self.name, "cooldown_duration", f"({cooldown}) must be shorter than the period"
            )
        if not isinstance(self.default_cooldown, bool):
            raise ScheduleConfigError(
                self.name,
                "default_cooldown",
                f"must be True or False, got {self.default_cooldown!r}",
            )
        object.__setattr__(self, "scheduling_period", period)
        object.__setattr__(self, "cooldown_duration", cooldown)

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
        if not isinstance(expr, str) or not _cron_is_valid(expr) or len(expr.split()) != 5:
            raise ScheduleConfigError(
                self.name, "cron_schedule", f"{expr!r} is not a 5-field cron expression"
            )
        object.__setattr__(self, "cron_schedule", " ".join(expr.split()))
        never = _cron_never_fires(self.cron_schedule, self.tz)
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
                f"schedule {self.name!r}, field 'cron_max_schedule_duration': "
                f"{self.cron_max_schedule_duration} is longer than the shortest gap "
                f"between cron times ({gap}); runs will overlap their next window"
            ]
        return []

    def to_dict(self) -> dict[str, Any]:
        return {
            **super().to_dict(),
            "cron_schedule": self.cron_schedule,
            "cron_max_schedule_duration": self.cron_max_schedule_duration.total_seconds(),
        }


#: The interval ladder's top index (``celery_dgs.core.adaptive``): 4**6 units.
MAX_INTERVAL_INDEX = 10


def _index(name: str, field_name: str, value: Any, low: int, high: int) -> int:
    if isinstance(value, bool) or not isinstance(value, int) or not low <= value <= high:
        raise ScheduleConfigError(
            name, field_name, f"must be a whole number from {low} to {high}, got {value!r}"
        )
    return value


@dataclass(frozen=True, kw_only=True)
class AdaptiveSpec(ScheduleSpec):
    """A revisit schedule whose period follows its runs' results (seed 001).

    The period is an interval of a ladder (``celery_dgs.core.adaptive``):
    index 0-1 is one ``interval_unit``, 2-4 two, ``n >= 5`` ``4**(n-4)``;
    a new schedule starts at ``initial_interval_index``. ``max_failures``
    consecutive failures disable it until the runtime API upserts it again."""

    kind: ClassVar[str] = "adaptive"

    interval_unit: timedelta = timedelta(days=1)
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
                f"{unit} is too long: the ladder's longest interval (4096 units) must "
                f"stay within {MAX_DURATION.days} days",
            )
        object.__setattr__(self, "interval_unit", unit)
        _index(
            self.name, "initial_interval_index", self.initial_interval_index, 0, MAX_INTERVAL_INDEX
        )
        _index(self.name, "max_failures", self.max_failures, 1, 1_000_000)

    def to_dict(self) -> dict[str, Any]:
        return {
            **super().to_dict(),
            "interval_unit": self.interval_unit.total_seconds(),
            "initial_interval_index": self.initial_interval_index,
            "max_failures": self.max_failures,
        }


def check_key(task: Any, key: Any) -> str:
    """``key`` as a deferred check's key: a non-empty string of at most
    :data:`MAX_CHECK_KEY_LENGTH` characters (ints are accepted and written in
    decimal); ScheduleConfigError naming the check and field ``key`` otherwise."""
    if isinstance(key, int) and not isinstance(key, bool):
        key = str(key)
    name = f"{task}@{CHECK_CONFIGURATION_PREFIX}{key}"
    if not isinstance(key, str) or not key.strip():
        raise ScheduleConfigError(name, "key", f"must be a non-empty string, got {key!r}")
    if len(key) > MAX_CHECK_KEY_LENGTH or any(ch in key for ch in "\x00\n\r"):
        raise ScheduleConfigError(
            name, "key", f"must be at most {MAX_CHECK_KEY_LENGTH} characters on one line"
        )
    return key


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
        object.__setattr__(self, "slot", _optional_timedelta(name, "slot", self.slot))
        _index(name, "max_checks", self.max_checks, 1, 1_000_000)
        _index(name, "max_failures", self.max_failures, 1, 1_000_000)

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


@lru_cache(maxsize=CRON_CHECK_CACHE_SIZE)
def _cron_is_valid(expr: str) -> bool:
    # croniter.is_valid expands the expression: ~0.3 ms, paid once per expression.
    return bool(croniter.is_valid(expr))


@lru_cache(maxsize=CRON_CHECK_CACHE_SIZE)
def _cron_never_fires(expr: str, tz: str) -> str | None:
    """Why ``expr`` has no fire time in ``tz``, or None if it fires."""
    from .cron import next_cron_time

    try:
        next_cron_time(expr, tz, _CRON_PROBE)
    except ValueError as exc:
        return str(exc)
    return None


SPEC_KINDS: dict[str, type[ScheduleSpec]] = {
    "periodic": PeriodicSpec,
    "cron": CronSpec,
    "adaptive": AdaptiveSpec,
    "check": CheckSpec,
}


def spec_from_dict(data: Mapping[str, Any]) -> ScheduleSpec:
    """Rebuild a spec from :meth:`ScheduleSpec.to_dict` output (validating it again)."""
    data = dict(data)
    version = data.pop("format", SPEC_FORMAT_VERSION)
    name = schedule_name(str(data.get("task", "?")), str(data.get("configuration", "")))
    if version != SPEC_FORMAT_VERSION:
        raise ScheduleConfigError(name, "format", f"unsupported spec format {version!r}")
    cls = spec_class(data.pop("kind", None), name)
    for key in ("dont_run_on_nodes",):
        if _is_list(data.get(key)):
            data[key] = frozenset(data[key])
    check_field_names(cls, name, data)
    return cls(**data)


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
        _check_name(task, configuration, check=check)
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


def spec_fields(cls: type[ScheduleSpec]) -> tuple[str, ...]:
    """The field names a spec class takes, in declaration order."""
    return tuple(f.name for f in dataclasses.fields(cls) if f.init)


def required_fields(cls: type[ScheduleSpec]) -> tuple[str, ...]:
    """The fields of ``cls`` that have no default."""
    return tuple(
        f.name
        for f in dataclasses.fields(cls)
        if f.init and f.default is dataclasses.MISSING and f.default_factory is dataclasses.MISSING
    )


def suggestion(word: str, choices: Iterable[str]) -> str:
    """``"; did you mean 'x'?"`` for the closest of ``choices``, or ``""``."""
    close = difflib.get_close_matches(word, list(choices), n=1, cutoff=0.6)
    return f"; did you mean {close[0]!r}?" if close else ""


def check_field_names(cls: type[ScheduleSpec], name: str, fields: Mapping[str, Any]) -> None:
    """ScheduleConfigError naming the first field ``cls`` does not take (with the
    closest valid name) or the first required field missing from ``fields``."""
    known = spec_fields(cls)
    for key in fields:
        if key not in known:
            others = (k for k, c in SPEC_KINDS.items() if c is not cls and key in spec_fields(c))
            where = next(others, None)
            hint = (
                f"; it is a field of a {where} schedule"
                if where is not None
                else suggestion(str(key), known)
            )
            raise ScheduleConfigError(
                name, str(key), f"is not a field of a {cls.kind} schedule{hint}"
            )
    for key in required_fields(cls):
        if key not in fields:
            raise ScheduleConfigError(name, key, f"is required for a {cls.kind} schedule")


#: The kinds a schedule may be declared or added as (a deferred check is
#: added with ``dgs.check_at``, never declared).
SCHEDULE_KINDS = ("periodic", "cron", "adaptive")


def spec_class(kind: Any, name: str) -> type[ScheduleSpec]:
    """The spec class of ``kind``; ScheduleConfigError naming field ``kind`` otherwise."""
    cls = SPEC_KINDS.get(kind) if isinstance(kind, str) else None
    if cls is None:
        hint = suggestion(str(kind).lower(), SCHEDULE_KINDS)
        raise ScheduleConfigError(
            name, "kind", f"must be one of {sorted(SCHEDULE_KINDS)}, got {kind!r}{hint}"
        )
    return cls


def make_spec(kind: str, **fields: Any) -> ScheduleSpec:
    """Build a spec of ``kind`` ('periodic' or 'cron') from keyword fields.

    Every problem, an unknown or missing field included, is a
    ScheduleConfigError naming the schedule and the field."""
    name = schedule_name(str(fields.get("task", "?")), str(fields.get("configuration", "")))
    if kind == CheckSpec.kind:
        raise ScheduleConfigError(
            name,
            "kind",
            "a deferred check is not declared as a schedule: declare its task "
            "with @dgs.deferred and add checks with dgs.check_at(task, key, at=...)",
        )
    cls = spec_class(kind, name)
    check_field_names(cls, name, fields)
    return cls(**fields)


def _seconds(delta: timedelta | None) -> float | None:
    return None if delta is None else delta.total_seconds()


def spec_zone(spec: ScheduleSpec) -> ZoneLike:
    """The spec's zone as a tzinfo (zoneinfo)."""
    from .tz import get_zone

    return get_zone(spec.tz)
