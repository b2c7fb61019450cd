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

from .core.spec import (
    PeriodicSpec,
    ScheduleSpec,
    make_spec,
    schedule_name,
    split_schedule_name,
)
from .core.timing import DEFAULT_COOLDOWN_FRACTION, with_default_cooldown
from .errors import ScheduleConfigError

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


def normalise_fields(fields: Mapping[str, Any]) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for key, value in fields.items():
        real = FIELD_ALIASES.get(key, key)
        if real in out:
            raise TypeError(f"{key!r} given twice (also as {real!r})")
        out[real] = value
    return out


class Declarations:
    """The declared schedules of one app, by name, and the declarations that failed."""

    def __init__(self) -> None:
        self.specs: dict[str, ScheduleSpec] = {}
        self.errors: dict[str, ScheduleConfigError] = {}
        self.warnings: list[str] = []
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
        for name, spec in self.specs.items():
            if name in self.default_cooldown and isinstance(spec, PeriodicSpec):
                spec = with_default_cooldown(spec, fraction)
            out.specs[name] = spec
        return out

    def declare(self, kind: str, task: str, fields: Mapping[str, Any], *, source: str) -> None:
        """Validate and add one declaration; a bad one is recorded, not raised."""
        configuration = str(fields.get("configuration", "") or "")
        name = schedule_name(task, configuration)
        try:
            try:
                real = normalise_fields(fields)
            except TypeError as exc:
                raise ScheduleConfigError(name, "?", str(exc)) from exc
            real["task"] = task
            unset_cooldown = kind == "periodic" and real.get("cooldown_duration") is None
            if unset_cooldown:
                real.pop("cooldown_duration", None)
            try:
                spec = make_spec(kind, **real)
            except TypeError as exc:
                raise ScheduleConfigError(
                    name, "?", f"bad fields for a {kind} schedule: {exc}"
                ) from exc
        except ScheduleConfigError as exc:
            self.errors[name] = exc
            self.specs.pop(name, None)
            logger.error("celery-dgs: invalid schedule from %s: %s", source, exc)
            return
        if name in self.specs and self.specs[name] != spec:
            self.errors[name] = ScheduleConfigError(
                name, "configuration", f"declared twice with different fields ({source})"
            )
            logger.error("celery-dgs: %s", self.errors[name])
            return
        self.specs[name] = spec
        self.errors.pop(name, None)
        if unset_cooldown:
            self.default_cooldown.add(name)
        else:
            self.default_cooldown.discard(name)
        for warning in spec.warnings():
            logger.warning("celery-dgs: %s", warning)
            self.warnings.append(warning)

    def declare_from_conf(self, schedules: Mapping[str, Any]) -> None:
        """``{"task" or "task@configuration": {"kind": "periodic"|"cron", **fields}}``."""
        for key, raw in schedules.items():
            if not isinstance(raw, Mapping):
                self.errors[str(key)] = ScheduleConfigError(
                    str(key), "dgs_schedules", "each entry must be a mapping of fields"
                )
                continue
            fields = dict(raw)
            task, configuration = split_schedule_name(str(fields.pop("task", key)))
            if "@" in str(key) and not configuration:
                configuration = split_schedule_name(str(key))[1]
            if configuration:
                fields.setdefault("configuration", configuration)
            kind = str(fields.pop("kind", "cron" if "cron" in fields or "schedule" in fields
                                  or "cron_schedule" in fields else "periodic"))
            self.declare(kind, task, fields, source="app.conf.dgs_schedules")

    def check_tasks(self, known_tasks: Mapping[str, Any]) -> list[ScheduleConfigError]:
        """Record an error for every schedule whose task is not registered."""
        found = []
        for name, spec in list(self.specs.items()):
            if spec.task not in known_tasks:
                err = ScheduleConfigError(name, "task", f"unknown task {spec.task!r}")
                self.errors[name] = err
                del self.specs[name]
                found.append(err)
        return found
