"""Beat's window of schedules in the SQL store: a slice of the active
schedules by their kept start times (:meth:`WindowMethods.window_schedules`),
read along the partial index in its order (``ix_dgs_schedules_window``)."""

from __future__ import annotations

from datetime import datetime
from typing import Any, cast

from sqlalchemy import ColumnClause, Select, Table, and_, column, or_, select, text

from .convert import utc
from .engine import connection_transaction
from .loader import SCHEDULE_COLUMNS, ValueMemo, stored_schedule_from_values
from .models import ScheduleRow
from .records import StoredSchedule
from .sql_base import SqlStoreBase

_T = cast(Table, ScheduleRow.__table__)
#: The columns untyped: the driver's values go to the loader's memo as they
#: are (:func:`~.loader.stored_schedule_from_values`), not through each
#: column type's result processing first.
_COLUMNS: list[ColumnClause[Any]] = [column(name) for name in SCHEDULE_COLUMNS]
#: As the partial indexes state it: the planner then uses them.
_ACTIVE_SCHEDULE = text("kind <> 'check' AND active")


def window_statement(
    can_after: datetime | None,
    can_until: datetime,
    key_after: tuple[datetime, datetime, str] | None,
    limit: int,
    *,
    columns: list[ColumnClause[Any]] = _COLUMNS,
) -> Select[Any]:
    """The ``SELECT`` of one slice (the rows with kept times): a range of
    ``ix_dgs_schedules_window``, in its order."""
    can = _T.c.next_can_start_at
    stmt = (
        select(*columns).select_from(_T).where(_ACTIVE_SCHEDULE, can <= utc(can_until, "can_until"))
    )
    if can_after is not None:
        stmt = stmt.where(can > utc(can_after, "can_after"))
    if key_after is not None:
        should, at = utc(key_after[0], "key_after"), utc(key_after[1], "key_after")
        by, name = _T.c.should_start_by, _T.c.name
        stmt = stmt.where(
            or_(
                by > should,
                and_(by == should, can > at),
                and_(by == should, can == at, name > key_after[2]),
            )
        )
    return stmt.order_by(_T.c.should_start_by, can, _T.c.name).limit(limit)


class WindowMethods(SqlStoreBase):
    """``window_schedules`` of the SQL store."""

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
        found: list[Any] = []
        with connection_transaction(self.engine, write=False) as conn:
            if can_after is None and key_after is None:
                unkept = (
                    select(*_COLUMNS)
                    .select_from(_T)
                    .where(_ACTIVE_SCHEDULE, _T.c.next_can_start_at.is_(None))
                )
                found.extend(conn.execute(unkept.order_by(_T.c.name).limit(limit)))
            if len(found) < limit:
                stmt = window_statement(can_after, can_until, key_after, limit - len(found))
                found.extend(conn.execute(stmt))
            memo = ValueMemo()
            return [stored_schedule_from_values(v, self._spec_cache, memo) for v in found]

    def _window_should_at(
        self, can_until: datetime, key_after: tuple[datetime, datetime, str], offset: int
    ) -> datetime | None:
        should = cast(ColumnClause[Any], _T.c.should_start_by)  # typed: an aware datetime
        stmt = window_statement(None, can_until, key_after, 1, columns=[should]).offset(offset)
        with connection_transaction(self.engine, write=False) as conn:
            found = conn.execute(stmt).scalar()
        return cast(datetime | None, found)
