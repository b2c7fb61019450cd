"""The state of the in-memory store and the row helpers its schedule, run
and check methods share (:class:`~celery_dgs.store.memory.MemoryScheduleStore`).

Every helper is called with the lock held.
"""

from __future__ import annotations

import dataclasses
import threading
import uuid
from collections import OrderedDict
from datetime import datetime, timedelta
from typing import Any

from ..core.clock import Clock, SystemClock
from ..core.kept_condition import KeptTimes
from ..core.laxity import margin_bucket_of
from ..core.spec import ScheduleSpec
from ..core.timing import DEFAULT_RETRY_LADDER
from ..errors import UnknownScheduleError
from .base import ScheduleStore
from .check_types import CheckHistoryRecord
from .kept import times_of
from .loader import SpecCache
from .records import RunRecord, StoredSchedule


class MemoryStoreBase(ScheduleStore):
    """Rows, runs, check history, the lock and the ``change_seq`` counter.

    ``clock`` gives ``updated_at`` for writes that take no time argument (as
    the SQL store's).
    """

    def __init__(self, *, clock: Clock | None = None) -> None:
        self._clock: Clock = clock or SystemClock()
        self._lock = threading.RLock()
        self._specs = SpecCache()
        #: name -> row, in change order: the row changed last is last.
        self._rows: OrderedDict[str, StoredSchedule] = OrderedDict()
        self._seq = 0  # the last change_seq handed out
        self._runs: dict[str, RunRecord] = {}  # by run_id, in id (insertion) order
        self._next_run_id = 1
        self._check_history: list[CheckHistoryRecord] = []
        #: The earliest next check time each check row has had (see ``changes_since``).
        self._earliest: dict[str, datetime] = {}
        #: name -> its kept columns, written with every row stored (:mod:`.kept`).
        self._kept: dict[str, KeptTimes] = {}
        #: The retry ladder of the kept ``next_can_start_at`` (``dgs_retry_ladder``).
        self.retry_ladder: tuple[timedelta, ...] = DEFAULT_RETRY_LADDER
        #: The fingerprint of the ladder last adopted (``adopt_retry_ladder``).
        self._ladder_fingerprint: str | None = None
        #: This store's identity (:meth:`store_id`).
        self._store_id = uuid.uuid4().hex
        #: The key prefix whose declarations it holds (:meth:`claim_declarations`).
        self._declared_by: str | None = None

    def store_id(self) -> str:
        """A random id of this in-memory store."""
        return self._store_id

    def stored_store_id(self) -> str | None:
        return self._store_id

    def declarations_owner(self) -> str | None:
        return self._declared_by

    def claim_declarations(self, owner: str, *, take_over: bool = False) -> str | None:
        with self._lock:
            if take_over or self._declared_by is None:
                self._declared_by = owner
            return None if self._declared_by == owner else self._declared_by

    def upgrade(self) -> None:
        """Nothing to migrate."""

    def _next_seq(self) -> int:
        self._seq += 1
        return self._seq

    def _row(self, name: str) -> StoredSchedule:
        row = self._rows.get(name)
        if row is None:
            raise UnknownScheduleError(f"no schedule named {name!r} in the store")
        return row

    def _put(self, row: StoredSchedule) -> StoredSchedule:
        """Store ``row`` as the last changed one (``changes_since`` reads from the
        end), with its kept columns at its ``updated_at``."""
        kept = self._kept[row.name] = times_of(row, row.updated_at, self.retry_ladder)
        stored = self._rows[row.name] = dataclasses.replace(
            row,
            kept_can_start_at=kept.next_can_start_at,
            kept_should_start_by=kept.should_start_by,
            kept_error_at=kept.condition.error_at,
            kept_margin_bucket=margin_bucket_of(kept.should_start_by, kept.condition.error_at),
        )
        self._rows.move_to_end(row.name)
        return stored

    def _touch(self, row: StoredSchedule, **changes: Any) -> StoredSchedule:
        """``row`` with ``changes``, a new ``change_seq`` and ``updated_at`` now, stored."""
        changes.update(change_seq=self._next_seq(), updated_at=self._clock.now())
        return self._put(dataclasses.replace(row, **changes))

    def _parse(self, spec: ScheduleSpec, text: str) -> tuple[ScheduleSpec | None, str | None]:
        """The spec as a store reads it back from its canonical JSON ``text``."""
        return self._specs.parse(text, spec.task, spec.configuration)
