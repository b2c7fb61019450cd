"""One schedule row changed by Core statements, without the ORM's unit of work.

A run's start and end change one schedule row each, many times a second on
a busy worker. :class:`RowEdit` reads the row with its lock (one ``SELECT
... FOR UPDATE``), hands it out as plain values
(:class:`~.models.ScheduleValues`) that the same helpers change as they
change a mapped row (:func:`~.convert.apply_stats`,
:func:`~.sql_check_rows.apply_check_end`), and writes it back with one
``UPDATE`` of the columns that changed, its kept columns recomputed first by
:func:`~.sql_kept.keep_row`, the computation the ORM writes' flush hook
makes. The statements and the transaction are those of the ORM's flush;
what it saves is the instrumentation, the identity map and the flush's
planning.
"""

from __future__ import annotations

from collections.abc import Sequence
from datetime import datetime, timedelta
from typing import Any, cast

from sqlalchemy import Connection, Table, Update, bindparam, select, update

from ..errors import UnknownScheduleError
from .models import ScheduleRow, ScheduleValues
from .sql_kept import keep_row

_T = cast(Table, ScheduleRow.__table__)
_COLUMNS: tuple[str, ...] = tuple(c.name for c in _T.columns)
_LOCK = (
    select(*(_T.c[name] for name in _COLUMNS))
    .where(_T.c.name == bindparam("name"))
    .with_for_update(key_share=True)
)
#: The ``UPDATE`` statement of each set of changed columns seen (a handful:
#: a run's start and its end each change the same few), built once.
_UPDATES: dict[tuple[str, ...], Update] = {}


def _update_of(columns: tuple[str, ...]) -> Update:
    statement = _UPDATES.get(columns)
    if statement is None:
        statement = (
            update(_T)
            .where(_T.c.name == bindparam("b_name"))
            .values({column: bindparam(column) for column in columns})
        )
        _UPDATES[columns] = statement
    return statement


class RowEdit:
    """The schedule row ``name``, read and locked in ``conn``'s transaction.

    Change :attr:`row` (its values), then :meth:`write`.
    ``UnknownScheduleError`` naming the schedule if it is not stored."""

    def __init__(self, conn: Connection, name: str) -> None:
        found = conn.execute(_LOCK, {"name": name}).one_or_none()
        if found is None:
            raise UnknownScheduleError(f"no schedule named {name!r} in the store")
        self._conn = conn
        self._stored: dict[str, Any] = dict(zip(_COLUMNS, found, strict=True))
        self.row = ScheduleValues(**self._stored)

    def touch(self, change_seq: int, now: datetime) -> None:
        """Mark the row changed: its new ``change_seq`` and ``updated_at``."""
        self.row.change_seq = change_seq
        self.row.updated_at = now

    def write(self, retry_ladder: Sequence[timedelta]) -> None:
        """Recompute the kept columns and ``UPDATE`` the columns that differ
        from the row as read (nothing when none does)."""
        row = self.row
        keep_row(row, retry_ladder)
        changed = tuple(c for c in _COLUMNS if getattr(row, c) != self._stored[c])
        if not changed:
            return
        values = {column: getattr(row, column) for column in changed}
        self._conn.execute(_update_of(changed), {"b_name": self._stored["name"], **values})
        self._stored.update(values)
