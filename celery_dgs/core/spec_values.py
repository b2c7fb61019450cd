"""The checks of a spec's field values: durations, priorities, bounded whole
numbers, lists, cron expressions. Each returns the value in its stored form or
raises :class:`~celery_dgs.errors.ScheduleConfigError` naming the schedule and
field.
"""

from __future__ import annotations

import json
import math
import re
from collections.abc import Iterable, Mapping
from datetime import datetime, timedelta, timezone
from functools import lru_cache
from typing import Any

from croniter import croniter

from ..errors import ScheduleConfigError
from .durations import format_duration

#: The instant from which a cron expression must have a next fire time.
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
#: The default most bytes a schedule's ``args`` and ``kwargs`` may take as
#: JSON, together (``dgs_max_argument_bytes``): 64 KiB.
DEFAULT_MAX_ARGUMENT_BYTES = 64 * 1024
#: How the size of arguments is measured: the store's encoding (ASCII, so
#: one byte a character).
_ARGUMENT_ENCODER = json.JSONEncoder(sort_keys=True, separators=(",", ":"), allow_nan=False)


def check_argument_size(
    name: str,
    args: Any,
    kwargs: Any,
    limit: int | None,
    *,
    texts: tuple[str | None, str | None] = (None, None),
) -> None:
    """ScheduleConfigError naming schedule ``name`` and the larger of ``args``
    and ``kwargs`` when their JSON (as the store writes it) is more than
    ``limit`` bytes together; ``None``: no limit. ``texts``: their JSON texts
    when the caller has them already."""
    if limit is None:
        return
    args_text, kwargs_text = texts
    args_size = len(args_text) if args_text is not None else _json_size(list(args))
    kwargs_size = len(kwargs_text) if kwargs_text is not None else _json_size(dict(kwargs))
    if args_size + kwargs_size > limit:
        raise ScheduleConfigError(
            name,
            "args" if args_size > kwargs_size else "kwargs",
            f"args and kwargs take {args_size + kwargs_size} bytes as JSON, more than the "
            f"{limit} allowed (dgs_max_argument_bytes)",
        )


def _json_size(value: Any) -> int:
    """The length of ``value``'s JSON (ASCII): sorted keys where they sort."""
    try:
        return len(_ARGUMENT_ENCODER.encode(value))
    except TypeError:  # keys of several types, which do not sort
        return len(json.dumps(value, separators=(",", ":")))


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
        shown = format_duration(value) if isinstance(value, timedelta) else repr(value)
        raise ScheduleConfigError(
            name, field_name, f"{shown} is too long: at most {MAX_DURATION.days} days (100 years)"
        )
    if delta < timedelta(0) or (not delta and not allow_zero):
        bound = "zero or more" if allow_zero else "more than zero"
        raise ScheduleConfigError(
            name, field_name, f"must be {bound}, got {format_duration(delta)}"
        )
    return delta


def is_list(value: Any) -> bool:
    """An iterable of items that is not a string, bytes or a mapping (whose
    iteration would give characters or keys)."""
    return isinstance(value, Iterable) and not isinstance(value, (str, bytes, Mapping))


def optional_timedelta(name: str, field_name: str, value: Any) -> timedelta | None:
    """``None`` as it is, else :func:`to_timedelta` of ``value``."""
    return None if value is None else to_timedelta(name, field_name, value)


def bounded_int(name: str, field_name: str, value: Any, low: int, high: int) -> int:
    """``value`` if it is a whole number (not a bool) from ``low`` to ``high``."""
    if isinstance(value, bool) or not isinstance(value, int) or not low <= value <= high:
        raise ScheduleConfigError(
            name, field_name, f"must be a whole number from {low} to {high}, got {value!r}"
        )
    return value


#: The fields of a cron expression, in order, with the values each takes.
CRON_FIELDS = (
    ("minute", "0-59"),
    ("hour", "0-23"),
    ("day of month", "1-31"),
    ("month", "1-12 or jan-dec"),
    ("day of week", "0-7 or sun-sat"),
)


#: The ``@`` nicknames of other crons, as the 5-field expressions to write.
CRON_NICKNAMES = {
    "@yearly": "0 0 1 1 *",
    "@annually": "0 0 1 1 *",
    "@monthly": "0 0 1 * *",
    "@weekly": "0 0 * * 0",
    "@daily": "0 0 * * *",
    "@midnight": "0 0 * * *",
    "@hourly": "0 * * * *",
}


@lru_cache(maxsize=CRON_CHECK_CACHE_SIZE)
def cron_problem(expr: str) -> str | None:
    """Why ``expr`` is no 5-field cron expression croniter accepts (naming
    the first field it refuses and the values that field takes), or None."""
    fields = expr.split()
    if len(fields) == 1 and fields[0].lower() in CRON_NICKNAMES:
        written = CRON_NICKNAMES[fields[0].lower()]
        return f"{expr!r} is not a 5-field cron expression: write it as {written!r}"
    if len(fields) != 5:
        count = f"{len(fields)} field{'' if len(fields) == 1 else 's'}"
        return f"{expr!r} is not a 5-field cron expression (it has {count})"
    # croniter.is_valid expands the expression: ~0.3 ms, paid once per expression.
    if croniter.is_valid(expr):
        return None
    for i, (label, values) in enumerate(CRON_FIELDS):
        alone = " ".join(fields[i] if j == i else "*" for j in range(5))
        if not croniter.is_valid(alone):
            why = f"it takes {values}"
            if re.search(r"/0*(,|$)", fields[i]):
                why = "a step (/N) must be at least 1"
            return f"{expr!r}: the {label} field {fields[i]!r} is not valid ({why})"
    return f"{expr!r} is not a valid cron expression"


@lru_cache(maxsize=CRON_CHECK_CACHE_SIZE)
def cron_never_fires(expr: str, tz: str) -> str | None:
    """Why ``expr`` has no fire time in ``tz``, or None if it fires."""
    from .cron import next_cron_time

    try:
        next_cron_time(expr, tz, _CRON_PROBE)
    except ValueError as exc:
        return str(exc)
    return None
