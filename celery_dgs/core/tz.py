"""Time-zone names in, zoneinfo zones out.

Schedules accept a zone name (``"America/New_York"``), a pytz zone object or a
``zoneinfo.ZoneInfo``; internally every zone is a ``ZoneInfo`` (its
``fold``-based arithmetic is what makes DST transitions correct).
"""

from __future__ import annotations

from datetime import datetime, timezone, tzinfo
from functools import lru_cache
from typing import Any
from zoneinfo import ZoneInfo, ZoneInfoNotFoundError

ZoneLike = tzinfo


def zone_name(value: Any) -> str:
    """Normalise a zone given as a name, pytz zone or ZoneInfo to its IANA name.

    Raises ``ValueError`` for unknown zones.
    """
    if isinstance(value, ZoneInfo):
        name = value.key
    elif isinstance(value, str):
        name = value.strip()
    elif value is timezone.utc:
        name = "UTC"
    elif hasattr(value, "zone") and isinstance(value.zone, str):  # pytz zones
        name = value.zone
    else:
        raise ValueError(f"{value!r} is not a time-zone name, pytz zone or ZoneInfo")
    get_zone(name)
    return name


@lru_cache(maxsize=1024)
def get_zone(name: str) -> ZoneInfo:
    try:
        return ZoneInfo(name)
    except (ZoneInfoNotFoundError, ValueError, TypeError) as exc:
        raise ValueError(f"unknown time zone {name!r}") from exc


def ensure_utc(moment: datetime, *, what: str = "datetime") -> datetime:
    """An aware datetime converted to UTC; naive datetimes are refused."""
    if moment.tzinfo is timezone.utc:  # the common case, on every start-time computation
        return moment
    if moment.tzinfo is None or moment.utcoffset() is None:
        raise ValueError(f"{what} must be timezone-aware, got naive {moment!r}")
    return moment.astimezone(timezone.utc)
