"""Beat's window of schedules in the memory store: the SQL store's
(:mod:`.sql_window`) over the kept start times of every row."""

from __future__ import annotations

from datetime import datetime

from .convert import utc
from .memory_base import MemoryStoreBase
from .records import StoredSchedule


class MemoryWindowMethods(MemoryStoreBase):
    """``window_schedules`` of the memory store."""

    def window_schedules(
        self,
        *,
        can_after: datetime | None,
        can_until: datetime,
        key_after: tuple[datetime, datetime, str] | None,
        limit: int,
    ) -> list[StoredSchedule]:
        """See :meth:`ScheduleStore.window_schedules
        <celery_dgs.store.base.ScheduleStore.window_schedules>`."""
        if limit < 1:
            return []
        until = utc(can_until, "can_until")
        after = None if can_after is None else utc(can_after, "can_after")
        key = (
            None
            if key_after is None
            else (utc(key_after[0], "key_after"), utc(key_after[1], "key_after"), key_after[2])
        )
        with self._lock:
            rows = [r for r in self._rows.values() if r.active and r.kind != "check"]
        unkept = sorted(
            (r for r in rows if r.kept_can_start_at is None and after is None and key is None),
            key=lambda r: r.name,
        )[:limit]
        keyed = []
        for r in rows:
            at, by = r.kept_can_start_at, r.kept_should_start_by
            if at is None or by is None or at > until or (after is not None and at <= after):
                continue
            if key is None or (by, at, r.name) > key:
                keyed.append(((by, at, r.name), r))
        keyed.sort(key=lambda item: item[0])
        return unkept + [r for _, r in keyed[: limit - len(unkept)]]
