"""The reads of beat's window of schedules, part of the schedule store
interface (:class:`~celery_dgs.store.base.ScheduleStore`): slices of the
active schedules by their kept start times (``window_schedules``), the margin
buckets in use, the ``should_start_by`` a number of rows past a key, and when
the next schedule past the window becomes eligible; and the one write, which
moves the kept start times of rows a blackout begun since keeps from
starting (``window_keep_past_blackout``). The SQL store reads them
along its partial indexes (:mod:`.sql_window`), the memory store over every
row (:mod:`.memory_window`)."""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Sequence
from datetime import datetime

from .records import StoredSchedule


class WindowReads(ABC):
    """What beat's window of schedules reads from the store."""

    def window_schedules(
        self,
        *,
        can_after: datetime | None,
        can_until: datetime,
        key_after: tuple[datetime, datetime, str] | None,
        limit: int,
        bucket: int | None = None,
        key_until: tuple[datetime, datetime, str] | None = None,
    ) -> list[StoredSchedule]:
        """Beat's window of schedules (deferred checks excluded): at most
        ``limit`` active schedules whose kept ``next_can_start_at`` is above
        ``can_after`` (``None``: any) and at or before ``can_until``, and whose
        (kept ``should_start_by``, kept ``next_can_start_at``, name) is above
        ``key_after`` (``None``: from the first) and at or below ``key_until``
        (``None``: to the last), in that order. A read from the start (both
        ``None``) first returns the active rows with no kept times (an invalid
        spec), within ``limit``.

        With ``bucket``, one margin bucket's slice: the schedules whose kept
        ``margin_bucket`` (:func:`~celery_dgs.core.laxity.margin_bucket`) is
        ``bucket``, by (kept ``error_at``, ``next_can_start_at``, name) above
        ``key_after``, in that order; never a row without kept times;
        ``can_after`` and ``key_until`` must be ``None`` (else ``ValueError``)."""
        if bucket is not None and (can_after is not None or key_until is not None):
            raise ValueError(
                f"a read of margin bucket {bucket} takes no can_after and no key_until, "
                f"got {can_after} and {key_until}"
            )
        if limit < 1:
            return []
        return self._window_schedules(can_after, can_until, key_after, limit, bucket, key_until)

    @abstractmethod
    def _window_schedules(
        self,
        can_after: datetime | None,
        can_until: datetime,
        key_after: tuple[datetime, datetime, str] | None,
        limit: int,
        bucket: int | None,
        key_until: tuple[datetime, datetime, str] | None = None,
    ) -> list[StoredSchedule]:
        """:meth:`window_schedules` with its arguments checked (``limit`` >= 1)."""

    @abstractmethod
    def window_margin_buckets(self) -> list[int]:
        """The distinct kept margin buckets of the active schedules (deferred
        checks excluded) with kept times, ascending: the buckets
        :meth:`window_schedules` has a slice of. Reads one index entry per
        bucket, not the fleet."""

    def window_should_at(
        self,
        *,
        can_until: datetime,
        key_after: tuple[datetime, datetime, str],
        offset: int,
    ) -> datetime | None:
        """The kept ``should_start_by`` of the row ``offset`` rows (0: the
        first) after ``key_after`` in :meth:`window_schedules`' order, among
        the active schedules whose kept ``next_can_start_at`` is at or before
        ``can_until``; ``None``: there are not that many. Reads only the
        window index's keys."""
        if offset < 0:
            raise ValueError(f"the offset must be >= 0, got {offset}")
        return self._window_should_at(can_until, key_after, offset)

    @abstractmethod
    def _window_should_at(
        self, can_until: datetime, key_after: tuple[datetime, datetime, str], offset: int
    ) -> datetime | None:
        """:meth:`window_should_at` with ``offset`` checked."""

    @abstractmethod
    def window_next_can(
        self, *, can_after: datetime, key_after: tuple[datetime, datetime, str]
    ) -> datetime | None:
        """The earliest kept ``next_can_start_at`` above ``can_after`` among the
        active schedules (deferred checks excluded) whose key (kept
        ``should_start_by``, ``next_can_start_at``, name) is above
        ``key_after``: when the next one past beat's window becomes eligible;
        ``None``: none. Reads ``ix_dgs_schedules_can_start`` from ``can_after``."""

    def window_keep_past_blackout(self, moved: Sequence[StoredSchedule]) -> int:
        """Write the kept start times of the rows ``moved`` as
        :func:`~celery_dgs.store.kept.kept_past_blackout` gives them: active
        schedules (deferred checks excluded) that a blackout begun since
        their row was written keeps from starting though their kept times
        say they may. Their kept ``next_can_start_at``, ``should_start_by``
        and margin bucket then say when the blackout lets them start, and
        beat's window reads them then. A row whose ``change_seq`` moved
        since it was read (it changed: the change reaches beat with the
        poll) is left as it is. Nothing else changes, ``change_seq``
        included (the kept times are derived). One transaction; returns how
        many rows were written."""
        return self._keep_past_blackout(moved) if moved else 0

    @abstractmethod
    def _keep_past_blackout(self, moved: Sequence[StoredSchedule]) -> int:
        """:meth:`window_keep_past_blackout` of at least one row."""
