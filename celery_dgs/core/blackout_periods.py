"""The ``blackout_periods`` field of a spec: the daily window type and the
parsing of the forms a user writes it in (ScheduleConfigError naming the
schedule and field ``blackout_periods`` otherwise).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from datetime import time
from typing import Any

from ..errors import ScheduleConfigError


@dataclass(frozen=True)
class Blackout:
    """A daily window, in the schedule's local time, when it must not run.

    ``end <= start`` means the window crosses midnight (``22:00``-``02:00``).
    """

    start: time
    end: time

    def __str__(self) -> str:
        return f"{self.start.isoformat()}-{self.end.isoformat()}"

    def as_pair(self) -> list[str]:
        return [self.start.isoformat(), self.end.isoformat()]


def _parse_clock(value: Any) -> time:
    if isinstance(value, time):
        return value.replace(tzinfo=None)
    if isinstance(value, str):
        text = value.strip()
        if text in ("24:00", "24:00:00"):  # the end of the day: midnight
            return time(0)
        if len(text) > 1 and text[0].isdigit() and text[1] == ":":
            text = "0" + text  # '9:00', as a clock is often written
        try:
            return time.fromisoformat(text)
        except ValueError:
            pass
    raise ValueError(f"{value!r} is not a time of day like '09:30', '13:30' or '13:30:00'")


def parse_blackouts(name: str, value: Any) -> tuple[Blackout, ...]:
    """Accepts ``[("12:00", "14:00"), "22:00-24:00", {"start": "00:00", "end":
    "01:00"}, Blackout]`` (an end of ``24:00`` is midnight)."""
    if value is None:
        return ()
    if isinstance(value, (str, bytes, Mapping)) or not isinstance(value, Iterable):
        raise ScheduleConfigError(name, "blackout_periods", "must be a list of (start, end) pairs")
    result = []
    for i, item in enumerate(value):
        try:
            if isinstance(item, Blackout):
                window = item
            elif isinstance(item, Mapping):
                window = Blackout(_parse_clock(item["start"]), _parse_clock(item["end"]))
            elif isinstance(item, str) and "-" in item:  # '12:00-14:00', as it is shown
                start, end = item.split("-", 1)
                window = Blackout(_parse_clock(start), _parse_clock(end))
            else:
                start, end = item
                window = Blackout(_parse_clock(start), _parse_clock(end))
        except (KeyError, TypeError) as exc:
            raise ScheduleConfigError(
                name, "blackout_periods", f"item {i} ({item!r}) is not a (start, end) pair: {exc}"
            ) from exc
        except ValueError as exc:  # a pair, or a mapping, with a bad time in it
            shape = (
                "a (start, end) pair"
                if "too many" in str(exc) or "not enough" in str(exc)
                else None
            )
            why = f"is not {shape}: {exc}" if shape else f"has a bad time: {exc}"
            raise ScheduleConfigError(
                name, "blackout_periods", f"item {i} ({item!r}) {why}"
            ) from exc
        if window.start == window.end:
            written = item if isinstance(item, str) else str(window)
            if "24:00" in repr(item):  # 00:00 to 24:00: an end of 24:00 is midnight
                why = "covers the whole day: it could never run"
            else:
                why = "is empty: start equals end"
            raise ScheduleConfigError(name, "blackout_periods", f"item {i} ({written}) {why}")
        result.append(window)
    if _covers_whole_day(result):
        raise ScheduleConfigError(
            name, "blackout_periods", "the windows cover the whole day: it could never run"
        )
    return tuple(result)


def _covers_whole_day(windows: list[Blackout]) -> bool:
    """Whether the union of the daily windows is all 24 hours."""

    def second(t: time) -> float:
        return t.hour * 3600 + t.minute * 60 + t.second + t.microsecond / 1e6

    spans: list[tuple[float, float]] = []
    for w in windows:
        start, end = second(w.start), second(w.end)
        spans.extend([(start, end)] if end > start else [(start, 86400.0), (0.0, end)])
    reached = 0.0
    for start, end in sorted(spans):
        if start > reached:
            return False
        reached = max(reached, end)
    return reached >= 86400.0
