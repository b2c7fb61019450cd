"""Instants as errors and reasons print them: UTC, ``2026-01-02 03:04:05Z``,
with milliseconds (``03:04:05.327Z``) when the instant is not a whole
second, so two instants that differ print differently."""

from __future__ import annotations

from datetime import datetime, timezone


def format_instant(moment: datetime) -> str:
    """``moment`` in UTC: ``2026-01-02 03:04:05Z`` or ``2026-01-02 03:04:05.327Z``
    (a naive one is taken as UTC)."""
    utc = moment.replace(tzinfo=timezone.utc) if moment.tzinfo is None else moment
    utc = utc.astimezone(timezone.utc)
    text = utc.strftime("%Y-%m-%d %H:%M:%S")
    if utc.microsecond:
        text += f".{utc.microsecond // 1000:03d}"
    return text + "Z"
