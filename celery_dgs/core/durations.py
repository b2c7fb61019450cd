"""Durations as people type them: ``90``, ``90s``, ``30m``, ``1h30m``, ``7d``,
``1.5h``, and as errors print them (the same syntax).

:func:`parse_duration` reads one: a number of seconds, or one or more
``<number><unit>`` parts, largest unit first, with units ``d`` (days), ``h``,
``m``, ``s`` (and ``ms``); a leading ``-`` makes it negative (the caller
decides whether that is allowed). :func:`format_duration` writes a duration
in that syntax, exactly (``parse_duration(format_duration(d)) == d`` to the
microsecond), so an error that echoes a value shows what to type.
"""

from __future__ import annotations

import re
from datetime import timedelta

#: The units of a duration text, largest first, in seconds.
UNITS: dict[str, float] = {"d": 86400.0, "h": 3600.0, "m": 60.0, "s": 1.0, "ms": 0.001}
#: How an error describes the syntax.
DURATION_SYNTAX = "seconds, or a duration like 90s, 30m, 1h30m, 7d"

_NUMBER = r"\d+(?:\.\d*)?|\.\d+"
_PART = re.compile(rf"\s*({_NUMBER})\s*(ms|[dhms])")
_BARE = re.compile(rf"\s*({_NUMBER})\s*")


def parse_duration(text: str) -> timedelta:
    """``text`` as a timedelta; ``ValueError`` saying the syntax otherwise."""
    if not isinstance(text, str):
        raise ValueError(f"{text!r} is not a duration: give {DURATION_SYNTAX}")
    body = text.strip()
    sign = -1 if body.startswith("-") else 1
    body = body.removeprefix("-")
    bare = _BARE.fullmatch(body)
    if bare is not None:
        return _delta(sign * float(bare.group(1)), text)
    seconds, pos, seen = 0.0, 0, -1
    order = list(UNITS)
    while pos < len(body):
        part = _PART.match(body, pos)
        if part is None or order.index(part.group(2)) <= seen:
            raise ValueError(f"{text!r} is not a duration: give {DURATION_SYNTAX}")
        seen = order.index(part.group(2))
        seconds += float(part.group(1)) * UNITS[part.group(2)]
        pos = part.end()
    if seen < 0 or body[pos:].strip():
        raise ValueError(f"{text!r} is not a duration: give {DURATION_SYNTAX}")
    return _delta(sign * seconds, text)


def _delta(seconds: float, text: str) -> timedelta:
    try:
        return timedelta(seconds=seconds)
    except OverflowError:
        raise ValueError(f"{text!r} is too long a duration") from None


def format_duration(delta: timedelta | float) -> str:
    """``delta`` (a timedelta or seconds) in the syntax :func:`parse_duration`
    reads: ``30d``, ``1h30m``, ``1m30s``, ``0.5s``, ``0s``, ``-5s``."""
    if not isinstance(delta, timedelta):
        delta = timedelta(seconds=delta)
    sign = "-" if delta < timedelta(0) else ""
    delta = abs(delta)
    days, seconds, micros = delta.days, delta.seconds, delta.microseconds
    hours, seconds = divmod(seconds, 3600)
    minutes, seconds = divmod(seconds, 60)
    parts = [f"{n}{unit}" for n, unit in ((days, "d"), (hours, "h"), (minutes, "m")) if n]
    if micros:
        parts.append(f"{seconds}.{micros:06d}".rstrip("0") + "s")
    elif seconds or not parts:
        parts.append(f"{seconds}s")
    return sign + "".join(parts)
