"""Beat's window of schedules in the memory store: the SQL store's
(:mod:`.sql_window`) over the kept start times of every row
(:func:`~celery_dgs.core.window.slice_of`)."""

from __future__ import annotations

from datetime import datetime

from ..core.window import KeptStart, SliceRead, slice_of
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
        read = SliceRead(
            None if can_after is None else utc(can_after, "can_after"),
            utc(can_until, "can_until"),
            None
            if key_after is None
            else (utc(key_after[0], "key_after"), utc(key_after[1], "key_after"), key_after[2]),
            limit,
            restart=False,
        )
        with self._lock:
            rows = {r.name: r for r in self._rows.values() if r.active and r.kind != "check"}
        kept = (
            (n, KeptStart(r.kept_can_start_at, r.kept_should_start_by)) for n, r in rows.items()
        )
        return [rows[name] for name in slice_of(read, kept)]

    def _window_should_at(
        self, can_until: datetime, key_after: tuple[datetime, datetime, str], offset: int
    ) -> datetime | None:
        rows = self.window_schedules(
            can_after=None, can_until=can_until, key_after=key_after, limit=offset + 1
        )
        return rows[offset].kept_should_start_by if len(rows) > offset else None
