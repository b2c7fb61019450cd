"""Status reads of the memory store: the SQL store's (:mod:`.sql_status`)
over the kept columns it stores with every row."""

from __future__ import annotations

import bisect
import re
from collections.abc import Callable, Iterator, Sequence
from datetime import datetime, timedelta

from ..core.condition import Level
from ..core.kept_condition import KeptTimes, condition_at
from .convert import utc
from .memory_base import MemoryStoreBase
from .records import StoredSchedule
from .selection import Selection, regex_pattern

_FAR = datetime.max.replace(tzinfo=None)


def _name_filter(selection: Selection) -> Callable[[str], bool]:
    if not selection.patterns:
        return lambda _name: True
    matchers = [re.compile(regex_pattern(p), re.DOTALL).match for p in selection.patterns]
    return lambda name: any(m(name) is not None for m in matchers)


class MemoryStatusMethods(MemoryStoreBase):
    """``condition_counts``, ``count_selected``, ``status_rows`` and ``kept_times``
    of the memory store."""

    def _selected(
        self, now: datetime, selection: Selection
    ) -> list[tuple[StoredSchedule, KeptTimes, Level, str]]:
        now = utc(now, "now")
        named = _name_filter(selection)
        names = None if selection.names is None else set(selection.names)
        levels = set(selection.levels)
        out = []
        with self._lock:
            for name, row in self._rows.items():
                if not row.active or row.kind == "check" or not named(name):
                    continue
                if names is not None and name not in names:
                    continue
                if selection.task_word not in row.task:
                    continue
                kept = self._kept[name]
                level, reason = condition_at(kept.condition, now)
                if levels and level.name not in levels:
                    continue
                if selection.pools:
                    pool = row.spec.pool if row.spec is not None else None
                    if (pool or selection.default_pool) not in selection.pools:
                        continue
                out.append((row, kept, level, reason))
        return out

    def condition_counts(self, now: datetime, selection: Selection) -> dict[tuple[str, str], int]:
        """See :meth:`ScheduleStore.condition_counts
        <celery_dgs.store.base.ScheduleStore.condition_counts>`."""
        counts: dict[tuple[str, str], int] = {}
        for _, _, level, reason in self._selected(now, selection):
            key = (level.name, reason)
            counts[key] = counts.get(key, 0) + 1
        return counts

    def fold_condition_tally(self, now: datetime) -> int:
        """Nothing to fold: the memory store counts its rows at each read."""
        return 0

    def count_selected(self, now: datetime, selection: Selection, at_most: int) -> int:
        """See :meth:`ScheduleStore.count_selected
        <celery_dgs.store.base.ScheduleStore.count_selected>`."""
        return min(len(self._selected(now, selection)), at_most)

    def status_rows(
        self, now: datetime, selection: Selection, *, limit: int | None = None, offset: int = 0
    ) -> Iterator[StoredSchedule]:
        """See :meth:`ScheduleStore.status_rows
        <celery_dgs.store.base.ScheduleStore.status_rows>`."""

        def key(
            item: tuple[StoredSchedule, KeptTimes, Level, str],
        ) -> tuple[int, bool, datetime, str]:
            row, kept, level, _ = item
            moment = kept.condition.error_at if level is Level.ERROR else kept.should_start_by
            naive = _FAR if moment is None else moment.replace(tzinfo=None)
            return (-int(level), moment is not None, naive, row.name)

        ordered = sorted(self._selected(now, selection), key=key)
        end = None if limit is None else offset + limit
        return iter([item[0] for item in ordered[offset:end]])

    def time_to_error_counts(self, now: datetime, bounds: Sequence[timedelta]) -> list[int]:
        """See :meth:`ScheduleStore.time_to_error_counts
        <celery_dgs.store.base.ScheduleStore.time_to_error_counts>`."""
        now = utc(now, "now")
        moments = [now + bound for bound in bounds]
        counts = [0] * (len(bounds) + 2)
        with self._lock:
            for name, row in self._rows.items():
                if not row.active or row.kind == "check":
                    continue
                kept = self._kept[name].condition
                level, _ = condition_at(kept, now)
                if level is Level.ERROR:
                    counts[0] += 1
                elif kept.error_at is not None:
                    counts[1 + bisect.bisect_right(moments, kept.error_at)] += 1
        return counts

    def failing_schedules(self, limit: int) -> list[StoredSchedule]:
        """See :meth:`ScheduleStore.failing_schedules
        <celery_dgs.store.base.ScheduleStore.failing_schedules>`."""
        with self._lock:
            failing = [
                row
                for row in self._rows.values()
                if row.active and row.kind != "check" and row.stats.failure_count
            ]

        def latest_first(row: StoredSchedule) -> tuple[bool, float, str]:
            ended = row.stats.last_end_at
            return (ended is None, -ended.timestamp() if ended else 0.0, row.name)

        return sorted(failing, key=latest_first)[:limit]

    def kept_times(self, name: str) -> KeptTimes:
        """See :meth:`ScheduleStore.kept_times <celery_dgs.store.base.ScheduleStore.kept_times>`."""
        with self._lock:
            self._row(name)
            return self._kept[name]
