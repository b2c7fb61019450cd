"""Time-zone names in, zoneinfo zones out.

Schedules accept a zone name (``"America/New_York"``), a pytz zone object or a
``zoneinfo.ZoneInfo``; internally every zone is a ``ZoneInfo`` (its
``fold``-based arithmetic is what makes DST transitions correct).
"""

from __future__ import annotations

from datetime import datetime, timezone, tzinfo
from difflib import get_close_matches
from functools import lru_cache
from typing import Any
from zoneinfo import ZoneInfo, ZoneInfoNotFoundError, available_timezones

ZoneLike = tzinfo


def zone_name(value: Any) -> str:
    """Normalise a zone given as a name, pytz zone or ZoneInfo to its IANA name.

    Raises ``ValueError`` for unknown zones.
    """
    if isinstance(value, ZoneInfo):
        name = value.key
    elif isinstance(value, str):
        name = canonical_zone_name(value.strip())
    elif value is timezone.utc:
        name = "UTC"
    elif hasattr(value, "zone") and isinstance(value.zone, str):  # pytz zones
        name = value.zone
    else:
        raise ValueError(f"{value!r} is not a time-zone name, pytz zone or ZoneInfo")
    get_zone(name)
    return name


@lru_cache(maxsize=1)
def _zones_by_folded_name() -> dict[str, str]:
    """Every IANA zone name of the system's database, by its case-folded form."""
    return {name.casefold(): name for name in available_timezones()}


@lru_cache(maxsize=1024)
def canonical_zone_name(name: str) -> str:
    """``name`` spelled as the zone database spells it when it differs only in
    case (``america/new_york`` → ``America/New_York``, as pytz accepts);
    otherwise ``name`` as given (an unknown one fails in :func:`get_zone`,
    with the closest names)."""
    return _zones_by_folded_name().get(name.casefold(), name)


@lru_cache(maxsize=1024)
def get_zone(name: str) -> ZoneInfo:
    try:
        return ZoneInfo(name)
    except (ZoneInfoNotFoundError, ValueError, TypeError) as exc:
        close = get_close_matches(str(name), available_timezones(), n=2, cutoff=0.8)
        hint = f"; did you mean {' or '.join(repr(c) for c in close)}?" if close else ""
        raise ValueError(f"unknown time zone {name!r}{hint}") from exc


def ensure_utc(moment: datetime, *, what: str = "datetime") -> datetime:
    """An aware datetime converted to UTC; naive datetimes are refused."""
    if moment.tzinfo is timezone.utc:  # the common case, on every start-time computation
        return moment
    if moment.tzinfo is None or moment.utcoffset() is None:
        raise ValueError(f"{what} must be timezone-aware, got naive {moment!r}")
    return moment.astimezone(timezone.utc)
