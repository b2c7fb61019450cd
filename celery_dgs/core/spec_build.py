"""Building a spec of a named kind from the fields a user gives (a
declaration, the runtime API, the CLI) or from its stored dict, with every
problem, an unknown or missing field included, a
:class:`~celery_dgs.errors.ScheduleConfigError` naming the schedule and field.
"""

from __future__ import annotations

import dataclasses
import difflib
from collections.abc import Iterable, Mapping
from typing import Any

from ..errors import ScheduleConfigError
from .schedule_names import schedule_name
from .spec import (
    SPEC_FORMAT_VERSION,
    AdaptiveSpec,
    CheckSpec,
    CronSpec,
    PeriodicSpec,
    ScheduleSpec,
)
from .spec_values import is_list

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
        if is_list(data.get(key)):
            data[key] = frozenset(data[key])
    check_field_names(cls, name, data)
    return cls(**data)


def spec_fields(cls: type[ScheduleSpec]) -> tuple[str, ...]:
    """The field names a spec class takes, in declaration order."""
    return tuple(f.name for f in dataclasses.fields(cls) if f.init)


def duration_fields(cls: type[ScheduleSpec]) -> tuple[str, ...]:
    """The fields of ``cls`` that hold a duration (a ``timedelta``)."""
    return tuple(f.name for f in dataclasses.fields(cls) if f.init and "timedelta" in str(f.type))


def required_fields(cls: type[ScheduleSpec]) -> tuple[str, ...]:
    """The fields of ``cls`` that have no default."""
    return tuple(
        f.name
        for f in dataclasses.fields(cls)
        if f.init and f.default is dataclasses.MISSING and f.default_factory is dataclasses.MISSING
    )


#: How alike (difflib's ratio) a choice must be to be suggested.
SUGGESTION_CUTOFF = 0.6


def suggestion(word: str, choices: Iterable[str]) -> str:
    """``"; did you mean 'x'?"`` for the choice ``word`` abbreviates (one
    that starts with its first three letters or more), else the closest of
    ``choices``, or ``""``."""
    options = list(choices)
    started = sorted((c for c in options if len(word) >= 3 and c.startswith(word)), key=len)
    close = started or difflib.get_close_matches(word, options, n=1, cutoff=SUGGESTION_CUTOFF)
    return f"; did you mean {close[0]!r}?" if close else ""


def a_schedule_of(kind: str) -> str:
    """``a periodic schedule``, ``an adaptive schedule``."""
    return f"{'an' if kind[:1] in 'aeiou' else 'a'} {kind} schedule"


def check_field_names(cls: type[ScheduleSpec], name: str, fields: Mapping[str, Any]) -> None:
    """ScheduleConfigError naming the first field ``cls`` does not take (with the
    closest valid name) or the first required field missing from ``fields``."""
    known = spec_fields(cls)
    for key in fields:
        if key not in known:
            others = (k for k, c in SPEC_KINDS.items() if c is not cls and key in spec_fields(c))
            where = next(others, None)
            hint = (
                f"; it is a field of {a_schedule_of(where)}"
                if where is not None
                else suggestion(str(key), known)
            )
            raise ScheduleConfigError(
                name, str(key), f"is not a field of {a_schedule_of(cls.kind)}{hint}"
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
