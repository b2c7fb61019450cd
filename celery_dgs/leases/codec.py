"""Decoding the hashes celery-dgs keeps in Redis, strictly.

Everything read back is checked: a missing field, a number that is not one or
another format version raises :class:`MalformedDataError` naming the key and
the field, never a bare ``KeyError``/``ValueError`` deep in a worker.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from datetime import datetime, timedelta, timezone
from typing import Any

from ..errors import MalformedDataError

EPOCH = datetime(1970, 1, 1, tzinfo=timezone.utc)


def ms_to_datetime(ms: int) -> datetime:
    """Milliseconds since the epoch (Redis ``TIME``) as an aware UTC datetime."""
    return EPOCH + timedelta(milliseconds=ms)


def datetime_to_ms(moment: datetime) -> int:
    if moment.tzinfo is None:
        raise ValueError(f"an aware datetime is needed, got {moment!r}")
    return (moment - EPOCH) // timedelta(milliseconds=1)


def seconds_to_ms(name: str, seconds: float) -> int:
    if isinstance(seconds, bool) or not isinstance(seconds, (int, float)):
        raise ValueError(f"{name} must be a number of seconds, got {seconds!r}")
    if not math.isfinite(seconds) or seconds < 0:
        raise ValueError(f"{name} must be a finite number of seconds >= 0, got {seconds!r}")
    return round(seconds * 1000)


def pairs(flat: Sequence[Any]) -> dict[bytes, bytes]:
    """``[f1, v1, f2, v2, ...]`` (a Lua HGETALL) as a dict."""
    return {bytes(flat[i]): bytes(flat[i + 1]) for i in range(0, len(flat) - 1, 2)}


def text(value: Any) -> str:
    return value.decode("utf-8", "replace") if isinstance(value, bytes) else str(value)


class HashReader:
    """Typed access to one hash; every failure names ``key`` and the field."""

    def __init__(self, key: str, data: Mapping[bytes, bytes], *, format_version: int) -> None:
        self.key = key
        self._data = data
        found = data.get(b"format")
        if found != str(format_version).encode():
            shown = "missing" if found is None else repr(text(found))
            raise self.error(f"format version is {shown}, expected {format_version}")

    def error(self, what: str) -> MalformedDataError:
        return MalformedDataError(f"Redis key {self.key!r}: {what}")

    def _raw(self, field: str) -> bytes:
        value = self._data.get(field.encode())
        if value is None:
            raise self.error(f"field {field!r} is missing")
        return value

    def get_str(self, field: str) -> str:
        try:
            return self._raw(field).decode("utf-8")
        except UnicodeDecodeError as exc:
            raise self.error(f"field {field!r} is not UTF-8") from exc

    def opt_str(self, field: str) -> str | None:
        """``None`` when the field is absent or empty."""
        return (self.get_str(field) or None) if field.encode() in self._data else None

    def get_int(self, field: str) -> int:
        raw = self._raw(field)
        try:
            return int(raw)
        except ValueError as exc:
            raise self.error(f"field {field!r} is not an integer: {text(raw)!r}") from exc

    def get_time(self, field: str) -> datetime:
        return ms_to_datetime(self.get_int(field))

    def opt_time(self, field: str) -> datetime | None:
        return self.get_time(field) if self._data.get(field.encode()) else None

    def opt_float(self, field: str) -> float | None:
        raw = self._data.get(field.encode())
        if not raw:
            return None
        try:
            value = float(raw)
        except ValueError as exc:
            raise self.error(f"field {field!r} is not a number: {text(raw)!r}") from exc
        if not math.isfinite(value):
            raise self.error(f"field {field!r} is not finite: {text(raw)!r}")
        return value

    def flag(self, field: str) -> bool:
        raw = self._raw(field)
        if raw not in (b"0", b"1"):
            raise self.error(f"field {field!r} is not 0 or 1: {text(raw)!r}")
        return raw == b"1"
