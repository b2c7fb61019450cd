"""A schedule row changed by Core statements (a run's start and end): one
``UPDATE`` of exactly the columns that changed, its kept columns those the
ORM writes keep, nothing written when nothing changed."""

from __future__ import annotations

from contextlib import AbstractContextManager
from datetime import timedelta
from typing import Any

import pytest

from celery_dgs.core.timing import DEFAULT_RETRY_LADDER
from celery_dgs.errors import UnknownScheduleError
from celery_dgs.store import SqlScheduleStore
from celery_dgs.store.engine import connection_transaction
from celery_dgs.store.kept import KEPT_COLUMNS
from celery_dgs.store.sql_kept import refresh_kept
from celery_dgs.store.sql_row_edit import RowEdit
from tests.support.statements import statements_sent

from .conftest import T0, periodic


def updates_of(store: SqlScheduleStore) -> AbstractContextManager[list[tuple[str, Any]]]:
    """The ``UPDATE`` statements of schedule rows issued meanwhile, with their parameters."""
    return statements_sent(store.engine, "UPDATE DGS_SCHEDULES")


def test_nothing_changed_writes_nothing(sql_store: SqlScheduleStore) -> None:
    sql_store.sync([periodic("a")], T0)
    with updates_of(sql_store) as seen, connection_transaction(sql_store.engine, write=True) as c:
        RowEdit(c, "a").write(DEFAULT_RETRY_LADDER)
    assert seen == []


def test_a_change_writes_its_columns_and_the_kept_ones_it_moves(
    sql_store: SqlScheduleStore,
) -> None:
    sql_store.sync([periodic("a", hours=1)], T0)
    before = sql_store.get("a")
    ended = T0 + timedelta(minutes=5)
    with updates_of(sql_store) as seen, connection_transaction(sql_store.engine, write=True) as c:
        edit = RowEdit(c, "a")
        edit.row.last_good_start_at = edit.row.last_start_at = T0
        edit.row.last_good_end_at = edit.row.last_end_at = ended
        edit.touch(before.change_seq + 1, ended)
        edit.write(DEFAULT_RETRY_LADDER)
    assert len(seen) == 1
    statement = seen[0][0]
    set_part = statement.split(" SET ", 1)[1].split(" WHERE ", 1)[0]
    written = {part.split("=")[0].strip() for part in set_part.split(",")}
    stats = {"last_good_start_at", "last_start_at", "last_good_end_at", "last_end_at"}
    assert stats | {"change_seq", "updated_at", "next_can_start_at"} <= written
    assert written - stats - {"change_seq", "updated_at"} <= set(KEPT_COLUMNS)
    after = sql_store.get("a")
    assert after.stats.last_good_end_at == ended
    assert after.change_seq == before.change_seq + 1
    kept = sql_store.kept_times("a")
    with connection_transaction(sql_store.engine, write=True) as conn:
        refresh_kept(conn, ["a"], None)  # the set-based computation, at the row's updated_at
    assert sql_store.kept_times("a") == kept


def test_an_unknown_schedule_is_named(sql_store: SqlScheduleStore) -> None:
    with (
        pytest.raises(UnknownScheduleError, match="'nope'"),
        connection_transaction(sql_store.engine, write=True) as conn,
    ):
        RowEdit(conn, "nope")
