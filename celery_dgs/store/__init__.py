"""The schedule store: schedules, statistics and run history in SQL.

``SqlScheduleStore.open(url)`` gives a store whose schema is at the newest
migration; see :class:`ScheduleStore` for the contract every backend keeps.
``MemoryScheduleStore()`` keeps the same contract in memory (not durable: a
reference backend for tests and benchmarks).
"""

from __future__ import annotations

from ..core.run_end import END_OUTCOMES, FAILURE_OUTCOMES, INTERRUPTION_OUTCOMES, SUCCESS_OUTCOMES
from .base import ScheduleStore
from .memory import MemoryScheduleStore
from .migrate import upgrade_url
from .records import (
    ALL_OUTCOMES,
    OWNER_DECLARED,
    OWNER_RUNTIME,
    RemoveReport,
    RunOutcome,
    RunRecord,
    StoredSchedule,
    SyncReport,
    UpsertReport,
)
from .sql import SqlScheduleStore

__all__ = [
    "ALL_OUTCOMES",
    "END_OUTCOMES",
    "FAILURE_OUTCOMES",
    "INTERRUPTION_OUTCOMES",
    "OWNER_DECLARED",
    "OWNER_RUNTIME",
    "SUCCESS_OUTCOMES",
    "MemoryScheduleStore",
    "RemoveReport",
    "RunOutcome",
    "RunRecord",
    "ScheduleStore",
    "SqlScheduleStore",
    "StoredSchedule",
    "SyncReport",
    "UpsertReport",
    "upgrade_url",
]
