"""Connection handling and row helpers shared by the two halves of the SQL store."""

from __future__ import annotations

from collections.abc import Mapping
from contextlib import AbstractContextManager
from datetime import datetime
from typing import Any

from sqlalchemy import Engine, select, text
from sqlalchemy.orm import Session

from ..core.clock import Clock, SystemClock
from ..errors import UnknownScheduleError
from .base import ScheduleStore
from .engine import make_engine, session_transaction
from .loader import SpecCache
from .migrate import upgrade_engine
from .models import COUNTER_ID, ScheduleRow

BUMP_COUNTER = text(
    f"UPDATE dgs_counter SET value = value + 1 WHERE id = {COUNTER_ID} RETURNING value"
)
READ_COUNTER = text(f"SELECT value FROM dgs_counter WHERE id = {COUNTER_ID}")


class SqlStoreBase(ScheduleStore):
    """Engine, transactions, locking and ``change_seq`` helpers."""

    def __init__(
        self,
        url: str,
        *,
        engine_options: Mapping[str, Any] | None = None,
        clock: Clock | None = None,
    ) -> None:
        self.url = url
        self._engine = make_engine(url, engine_options)
        self._clock: Clock = clock or SystemClock()
        #: Parsed specs by shape, shared by every bulk read (see :mod:`.loader`).
        self._spec_cache = SpecCache()

    @property
    def engine(self) -> Engine:
        return self._engine

    def close(self) -> None:
        """Close every pooled connection (the store can still be used afterwards)."""
        self._engine.dispose()

    def upgrade(self) -> None:
        """Run the alembic migrations to head. Idempotent; concurrent callers are
        serialised (PostgreSQL advisory lock, SQLite write lock)."""
        upgrade_engine(self._engine)

    # -- transactions and helpers -------------------------------------------------

    def _write(self) -> AbstractContextManager[Session]:
        return session_transaction(self._engine, write=True)

    def _read(self) -> AbstractContextManager[Session]:
        return session_transaction(self._engine, write=False)

    def _next_seq(self, session: Session) -> int:
        return int(session.execute(BUMP_COUNTER).scalar_one())

    def _touch(self, session: Session, row: ScheduleRow, now: datetime | None = None) -> None:
        """Mark ``row`` changed: a new ``change_seq`` (take row locks before this)."""
        row.change_seq = self._next_seq(session)
        row.updated_at = now or self._clock.now()

    def _locked(self, session: Session, name: str) -> ScheduleRow:
        stmt = select(ScheduleRow).where(ScheduleRow.name == name).with_for_update(key_share=True)
        row = session.scalars(stmt).one_or_none()
        if row is None:
            raise UnknownScheduleError(f"no schedule named {name!r} in the store")
        return row
