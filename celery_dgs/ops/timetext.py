"""Times and durations as text, the same on every surface: ISO-8601 UTC for
documents, ``2026-01-02 03:04:05Z`` and ``3m05s`` / ``in 1m40s`` for people."""

from __future__ import annotations

from datetime import datetime, timedelta, timezone

#: The text of an unknown value.
NONE = "-"


def iso(moment: datetime | None) -> str | None:
    """ISO-8601 in UTC with milliseconds; ``None`` stays ``None``."""
    if moment is None:
        return None
    return moment.astimezone(timezone.utc).isoformat(timespec="milliseconds")


def short_time(moment: datetime | None) -> str:
    """``2026-01-02 03:04:05Z`` (UTC, to the second)."""
    if moment is None:
        return NONE
    return moment.astimezone(timezone.utc).strftime("%Y-%m-%d %H:%M:%SZ")


def duration(value: timedelta | float | None) -> str:
    """``0.8s``, ``12s``, ``3m05s``, ``2h04m``, ``3d04h``; ``-`` for ``None``."""
    if value is None:
        return NONE
    total = value.total_seconds() if isinstance(value, timedelta) else float(value)
    sign, total = ("-" if total < 0 else ""), abs(total)
    if total < 10:
        return f"{sign}{total:.1f}s"
    secs = round(total)
    days, rest = divmod(secs, 86400)
    hours, rest = divmod(rest, 3600)
    minutes, secs = divmod(rest, 60)
    if days:
        return f"{sign}{days}d{hours:02d}h"
    if hours:
        return f"{sign}{hours}h{minutes:02d}m"
    if minutes:
        return f"{sign}{minutes}m{secs:02d}s"
    return f"{sign}{secs}s"


def relative(moment: datetime | None, now: datetime) -> str:
    """``in 1m40s`` / ``12s ago`` / ``now``; ``-`` for ``None``."""
    if moment is None:
        return NONE
    delta = (moment - now).total_seconds()
    if abs(delta) < 0.05:
        return "now"
    return f"in {duration(delta)}" if delta > 0 else f"{duration(-delta)} ago"


def late_text(due: datetime | None, now: datetime) -> str:
    """``3m05s late`` for a time past, ``due in 12m`` for one ahead."""
    if due is None:
        return NONE
    if due <= now:
        return f"{duration(now - due)} late"
    return f"due {relative(due, now)}"


def counted(n: int, noun: str, plural: str | None = None) -> str:
    """``1 schedule``, ``2 schedules`` (``plural``: when not ``noun + "s"``)."""
    return f"{n} {noun if n == 1 else plural or noun + 's'}"
