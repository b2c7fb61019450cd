"""Schedules as users declare them: decorators and ``app.conf.dgs_schedules``.

Both forms produce validated :class:`~celery_dgs.core.spec.ScheduleSpec`
objects. An invalid declaration never raises out of a decorator (that would
stop the module, and with it the worker or beat, from importing): it is logged
and kept in :attr:`Declarations.errors`, and ``celery dgs check`` reports it.
"""

from __future__ import annotations

import logging
from collections.abc import Mapping
from typing import Any

from .core.durations import format_duration, parse_duration
from .core.schedule_names import schedule_name, split_schedule_name
from .core.spec import PeriodicSpec, ScheduleSpec, given_differences
from .core.spec_build import (
    SPEC_KINDS,
    a_schedule_of,
    duration_fields,
    make_spec,
    spec_class,
    spec_fields,
    suggestion,
)
from .core.spec_values import DEFAULT_PRIORITY as DEFAULT_PRIORITY
from .core.timing import DEFAULT_COOLDOWN_FRACTION, with_default_cooldown
from .errors import ScheduleConfigError
from .task_arguments import ArgumentChecks, unknown_task

logger = logging.getLogger("celery_dgs.declarations")

#: Friendly names accepted by decorators and ``dgs_schedules`` → spec field names.
FIELD_ALIASES = {
    "period": "scheduling_period",
    "cooldown": "cooldown_duration",
    "cron": "cron_schedule",
    "schedule": "cron_schedule",
    "within": "cron_max_schedule_duration",
    "blackouts": "blackout_periods",
    "expected": "max_expected_duration",
    "max_duration": "max_allowed_duration",
    "queue": "pool",
}


def accepted_names(kind: str) -> list[str]:
    """The keys a ``kind`` declaration accepts: its spec fields and their friendly names."""
    fields = spec_fields(SPEC_KINDS[kind])
    return [*(a for a, real in FIELD_ALIASES.items() if real in fields), *fields]


def normalise_fields(
    fields: Mapping[str, Any], *, name: str = "?", kind: str | None = None
) -> dict[str, Any]:
    """``fields`` with the friendly names mapped to spec field names.

    A key given twice (``period`` and ``scheduling_period``) and, with
    ``kind``, a key that is no field of that kind raise ScheduleConfigError
    naming schedule ``name`` and the key (with the closest accepted name, or
    the kind the key belongs to)."""
    accepted = accepted_names(spec_class(kind, name).kind) if kind is not None else None
    out: dict[str, Any] = {}
    given_as: dict[str, Any] = {}
    for key, value in fields.items():
        real = FIELD_ALIASES.get(key, key) if isinstance(key, str) else key
        if accepted is not None and key not in accepted:
            raise _unknown_key(name, str(kind), key)
        if real in out:
            raise ScheduleConfigError(
                name, str(real), f"given twice (as {given_as[real]!r} and {key!r})"
            )
        out[real], given_as[real] = value, key
    return out


def given_names(*given: Mapping[str, Any]) -> dict[str, str]:
    """Spec field name -> the key it was given as, over the keys of ``given``
    (declarations or rows; a spec field given under its own name maps to itself)."""
    return {FIELD_ALIASES.get(key, key): key for fields in given for key in fields}


def friendly_name(field: str) -> str:
    """The first friendly name of spec field ``field`` (``period`` for
    ``scheduling_period``), or ``field`` when it has none."""
    return next((alias for alias, real in FIELD_ALIASES.items() if real == field), field)


def as_given(exc: ScheduleConfigError, names: Mapping[str, str]) -> ScheduleConfigError:
    """``exc`` naming its field as the user gave it (``period``, not
    ``scheduling_period``), or, for one not given (a required field left
    out), by its friendly name; ``exc`` itself when the names agree."""
    given = names.get(exc.field) or friendly_name(exc.field)
    return exc if given == exc.field else ScheduleConfigError(exc.schedule, given, exc.message)


def read_text_durations(
    kind: str, fields: Mapping[str, Any], *, name: str, names: Mapping[str, str]
) -> dict[str, Any]:
    """``fields`` (spec field names) with each duration given as text
    (``"1h30m"``, ``"90"``: :func:`~celery_dgs.core.durations.parse_duration`)
    read as a timedelta; ScheduleConfigError naming the key as given otherwise."""
    out = dict(fields)
    for key in duration_fields(spec_class(kind, name)):
        value = out.get(key)
        if isinstance(value, str):
            try:
                out[key] = parse_duration(value)
            except ValueError as exc:
                raise ScheduleConfigError(name, names.get(key, key), str(exc)) from None
    return out


def _unknown_key(name: str, kind: str, key: Any) -> ScheduleConfigError:
    others = [k for k in SPEC_KINDS if k != kind and key in accepted_names(k)]
    if others:
        hint = f"; it is a field of {a_schedule_of(others[0])} (kind {others[0]!r})"
    else:
        hint = suggestion(str(key), accepted_names(kind)) or (
            f"; accepted: {', '.join(accepted_names(kind))}"
        )
    return ScheduleConfigError(name, str(key), f"is not a field of {a_schedule_of(kind)}{hint}")


def build_spec(
    kind: str,
    task: str,
    fields: Mapping[str, Any],
    *,
    name: str,
) -> ScheduleSpec:
    """The validated spec of one declaration; every problem is a
    ScheduleConfigError naming schedule ``name`` and the field as the
    declaration gave it (``period``, not ``scheduling_period``). Durations
    may be given as text (``"1h"``), in a decorator as in ``dgs_schedules``,
    schedule files and the command line."""
    real = normalise_fields(fields, name=name, kind=kind)
    names = given_names(fields)
    real["task"] = task
    if kind == "periodic" and real.get("cooldown_duration") is None:
        real.pop("cooldown_duration", None)  # the default cooldown applies
    try:
        real = read_text_durations(kind, real, name=name, names=names)
        return make_spec(kind, **real)
    except ScheduleConfigError as exc:
        named = as_given(exc, names)
        if named is exc:
            raise
        raise named from exc
    except (TypeError, ValueError, ArithmeticError) as exc:  # never out of a decorator
        raise ScheduleConfigError(name, "?", f"{type(exc).__name__}: {exc}") from exc


def split_entry(key: str, raw: Mapping[str, Any]) -> tuple[str, str, dict[str, Any]]:
    """``(kind, task, fields)`` of one ``dgs_schedules``-style entry: ``key`` is
    ``task`` or ``task@configuration`` unless the entry names its ``task``;
    ``kind`` defaults to ``cron`` when a cron field is given, else ``periodic``."""
    fields = dict(raw)
    task, configuration = split_schedule_name(str(fields.pop("task", key)))
    if "@" in key and not configuration:
        configuration = split_schedule_name(key)[1]
    if configuration:
        fields.setdefault("configuration", configuration)
    cron = "cron" in fields or "schedule" in fields or "cron_schedule" in fields
    kind = str(fields.pop("kind", "cron" if cron else "periodic"))
    return kind, task, fields


def entry_spec(
    raw: Mapping[str, Any], *, default_cooldown_fraction: float = DEFAULT_COOLDOWN_FRACTION
) -> ScheduleSpec:
    """The validated spec of one schedule given as a mapping (a runtime
    schedule, a line of an import file): ``name`` (``task@configuration``) or
    ``task`` (and ``configuration``), ``kind``, and the fields a declaration
    takes, friendly names included. Validated exactly as a declaration
    (:func:`split_entry`, :func:`build_spec`); every problem is a
    ScheduleConfigError naming the schedule and the field. A periodic one
    given no cooldown gets the default one, as a declaration does
    (``dgs_default_cooldown_fraction``: ``default_cooldown_fraction``)."""
    fields = dict(raw)
    name = fields.pop("name", None)
    if name is not None and not isinstance(name, str):
        raise ScheduleConfigError(repr(name), "name", "must be a string 'task@configuration'")
    key = name if name is not None else fields.get("task")
    if key is not None and not isinstance(key, str):
        raise ScheduleConfigError(
            repr(key), "task", "must be a task name (a string), 'task' or 'task@configuration'"
        )
    if not isinstance(key, str) or not key.strip():
        raise ScheduleConfigError(
            "?", "task", "is required (give 'name': 'task@configuration' or 'task')"
        )
    if key.endswith("@"):
        raise ScheduleConfigError(
            key,
            "name",
            f"the configuration after '@' is empty: write {key[:-1]!r}, "
            f"or {key + 'CONFIGURATION'!r}",
        )
    given = split_schedule_name(key)[1]
    if given and "configuration" in fields and fields["configuration"] != given:
        raise ScheduleConfigError(
            key, "configuration", f"{fields['configuration']!r} disagrees with {key!r}"
        )
    kind, task, fields = split_entry(key, fields)
    full = schedule_name(task, str(fields.get("configuration", "") or ""))
    if name is not None and full != name:
        raise ScheduleConfigError(
            name, "name", f"disagrees with task/configuration, which name {full!r}"
        )
    spec = build_spec(kind, task, fields, name=full)
    if isinstance(spec, PeriodicSpec) and cooldown_unset(fields):
        spec = with_default_cooldown(spec, default_cooldown_fraction)
    return spec


def _declared_twice(
    earlier: ScheduleSpec, spec: ScheduleSpec, names: Mapping[str, str], source: str
) -> ScheduleConfigError:
    """The error of a name declared twice with different values: the fields
    that differ, as the declarations named them, and their values."""
    differ = given_differences(earlier, spec) or ["?"]
    before, after = earlier.to_dict(), spec.to_dict()
    values = ", ".join(
        f"{names.get(key, key)}: {shown_value(key, before.get(key))} and "
        f"{shown_value(key, after.get(key))}"
        for key in differ
    )
    return ScheduleConfigError(
        spec.name,
        names.get(differ[0], differ[0]),
        f"declared twice with different values ({values}; from {source})",
    )


#: The spec fields that hold durations, over every kind.
_DURATION_FIELDS = frozenset(f for cls in SPEC_KINDS.values() for f in duration_fields(cls))


def shown_value(field: str, value: Any) -> str:
    """A stored field value as an error shows it: a duration as one types it
    (``1h30m``), anything else as its ``repr``."""
    if field in _DURATION_FIELDS and isinstance(value, (int, float)):
        return format_duration(value)
    return repr(value)


def cooldown_unset(fields: Mapping[str, Any]) -> bool:
    """Whether a declaration's ``fields`` give no cooldown (absent or ``None``,
    under any of its names): a periodic one then gets the default cooldown."""
    names = {"cooldown_duration"}
    names |= {k for k, v in FIELD_ALIASES.items() if v == "cooldown_duration"}
    return all(fields.get(key) is None for key in names)


class Declarations:
    """The declared schedules of one app, by name, and the declarations that failed.

    A name is in :attr:`specs` or in :attr:`errors`, never both. A name declared
    twice with different fields is an error (field: the first one that
    differs) for the rest of the process: neither declaration is used, since
    which one came first depends on import order.

    Problems are recorded, and logged only at DEBUG as they are found (at
    import): the worker and beat log them at their start, and ``celery dgs
    check`` lists them, each once.
    """

    def __init__(self) -> None:
        self.specs: dict[str, ScheduleSpec] = {}
        self.errors: dict[str, ScheduleConfigError] = {}
        self.warnings: list[str] = []
        self._conflicting: set[str] = set()
        #: The keys each valid declaration was given with (errors name fields so).
        self._given: dict[str, Mapping[str, Any]] = {}
        #: Periodic schedules declared without a cooldown (``None`` or absent):
        #: :meth:`with_default_cooldown` gives them the default one.
        self.default_cooldown: set[str] = set()

    def with_default_cooldown(self, fraction: float = DEFAULT_COOLDOWN_FRACTION) -> Declarations:
        """A copy whose periodic schedules declared without a cooldown get the
        default one (``dgs_default_cooldown_fraction``:
        :func:`~celery_dgs.core.timing.with_default_cooldown`); this object keeps
        the declared specs, so a repeated declaration still compares equal."""
        out = Declarations()
        out.errors, out.warnings = dict(self.errors), list(self.warnings)
        out.default_cooldown = set(self.default_cooldown)
        out._conflicting = set(self._conflicting)
        out._given = dict(self._given)
        for name, spec in self.specs.items():
            if name in self.default_cooldown and isinstance(spec, PeriodicSpec):
                spec = with_default_cooldown(spec, fraction)
            out.specs[name] = spec
        return out

    def declare(
        self,
        kind: str,
        task: str,
        fields: Mapping[str, Any],
        *,
        source: str,
    ) -> None:
        """Validate and add one declaration; a bad one is recorded, not raised."""
        configuration = str(fields.get("configuration", "") or "")
        name = schedule_name(task, configuration)
        if name in self._conflicting:
            logger.debug("celery-dgs: %s (again, from %s)", self.errors[name], source)
            return
        try:
            spec = build_spec(kind, task, fields, name=name)
            unset_cooldown = kind == "periodic" and cooldown_unset(fields)
        except ScheduleConfigError as exc:
            self.errors[name] = exc
            self.specs.pop(name, None)
            logger.debug("celery-dgs: invalid schedule from %s: %s", source, exc)
            return
        earlier = self.specs.get(name)
        if earlier is not None and earlier != spec:
            self.errors[name] = _declared_twice(
                earlier, spec, given_names(self._given.get(name, {}), fields), source
            )
            del self.specs[name]
            self._conflicting.add(name)
            logger.debug("celery-dgs: %s", self.errors[name])
            return
        self.specs[name] = spec
        self._given[name] = fields
        self.errors.pop(name, None)
        if unset_cooldown:
            self.default_cooldown.add(name)
        else:
            self.default_cooldown.discard(name)
        for warning in spec.warnings():
            logger.debug("celery-dgs: %s", warning)
            self.warnings.append(warning)

    def invalid(self) -> dict[str, str]:
        """The names of the invalid declarations and their errors, as
        :meth:`~celery_dgs.store.base.ScheduleStore.sync` takes them."""
        return {name: str(err) for name, err in self.errors.items()}

    def declare_from_conf(self, schedules: Mapping[str, Any]) -> None:
        """``{"task" or "task@configuration": {"kind": "periodic"|"cron", **fields}}``."""
        for key, raw in schedules.items():
            if not isinstance(raw, Mapping):
                self.errors[str(key)] = ScheduleConfigError(
                    str(key), "dgs_schedules", "each entry must be a mapping of fields"
                )
                continue
            kind, task, fields = split_entry(str(key), raw)
            self.declare(kind, task, fields, source="app.conf.dgs_schedules")

    def check_tasks(
        self, known_tasks: Mapping[str, Any], *, max_argument_bytes: int | None = None
    ) -> list[ScheduleConfigError]:
        """Record an error for every schedule whose task is not registered,
        whose ``args``/``kwargs`` its task cannot take (they are bound to its
        signature), or whose arguments take more than ``max_argument_bytes``
        as JSON (``dgs_max_argument_bytes``; None: no limit)."""
        checks = ArgumentChecks(known_tasks, max_argument_bytes=max_argument_bytes)
        found = []
        for name, spec in list(self.specs.items()):
            err = None
            if spec.task not in known_tasks:
                why = unknown_task(spec.task, known_tasks, declared=True)
                err = ScheduleConfigError(name, "task", why)
            else:
                try:
                    checks.check(spec)
                except ScheduleConfigError as exc:
                    err = exc
            if err is not None:
                self.errors[name] = err
                del self.specs[name]
                found.append(err)
        return found
