"""Beat's window of schedules in the memory store: the SQL store's
(:mod:`.sql_window`) over the kept start times of every row
(:func:`~celery_dgs.core.window.slice_of`)."""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence
from datetime import datetime

from ..core.window import buckets_in_use, next_can_of, slice_of
from ..core.window_part import SliceRead
from .convert import utc
from .memory_base import MemoryStoreBase
from .records import StoredSchedule


class MemoryWindowMethods(MemoryStoreBase):
    """``window_schedules`` of the memory store."""

    def _window_schedules(
        self,
        can_after: datetime | None,
        can_until: datetime,
        key_after: tuple[datetime, datetime, str] | None,
        limit: int,
        bucket: int | None,
        key_until: tuple[datetime, datetime, str] | None = None,
    ) -> list[StoredSchedule]:
        read = SliceRead(
            None if can_after is None else utc(can_after, "can_after"),
            utc(can_until, "can_until"),
            None
            if key_after is None
            else (utc(key_after[0], "key_after"), utc(key_after[1], "key_after"), key_after[2]),
            limit,
            restart=False,
            bucket=bucket,
            key_until=None
            if key_until is None
            else (utc(key_until[0], "key_until"), utc(key_until[1], "key_until"), key_until[2]),
        )
        rows = self._active_schedules()
        kept = ((n, r.kept_start()) for n, r in rows.items())
        return [rows[name] for name in slice_of(read, kept)]

    def window_margin_buckets(self) -> list[int]:
        """See :meth:`ScheduleStore.window_margin_buckets
        <celery_dgs.store.base.ScheduleStore.window_margin_buckets>`."""
        return sorted(buckets_in_use(r.kept_start() for r in self._active_schedules().values()))

    def _active_schedules(self) -> dict[str, StoredSchedule]:
        """The active rows but the deferred checks, by name."""
        with self._lock:
            return {r.name: r for r in self._rows.values() if r.active and r.kind != "check"}

    def window_next_can(
        self, *, can_after: datetime, key_after: tuple[datetime, datetime, str]
    ) -> datetime | None:
        """See :meth:`ScheduleStore.window_next_can
        <celery_dgs.store.base.ScheduleStore.window_next_can>`."""
        after = (utc(key_after[0], "key_after"), utc(key_after[1], "key_after"), key_after[2])
        kept = ((n, r.kept_start()) for n, r in self._active_schedules().items())
        return next_can_of(utc(can_after, "can_after"), after, kept)

    def _window_should_at(
        self, can_until: datetime, key_after: tuple[datetime, datetime, str], offset: int
    ) -> datetime | None:
        rows = self._window_schedules(None, can_until, key_after, offset + 1, None)
        return rows[offset].kept_should_start_by if len(rows) > offset else None

    def _keep_past_blackout(self, moved: Sequence[StoredSchedule]) -> int:
        written = 0
        with self._lock:
            for new in moved:
                row = self._rows.get(new.name)
                if row is None or row.change_seq != new.change_seq or not row.active:
                    continue
                self._rows[new.name] = dataclasses.replace(  # in place: no change
                    row,
                    kept_can_start_at=new.kept_can_start_at,
                    kept_should_start_by=new.kept_should_start_by,
                    kept_margin_bucket=new.kept_margin_bucket,
                )
                self._kept[new.name] = dataclasses.replace(
                    self._kept[new.name],
                    next_can_start_at=new.kept_can_start_at,
                    should_start_by=new.kept_should_start_by,
                )
                written += 1
        return written
