"""A store's identity: written once by the first process that asks, the same
for every process that opens the store, different for another store."""

from __future__ import annotations

from pathlib import Path

import pytest

from celery_dgs.store.base import ScheduleStore
from celery_dgs.store.sql import SqlScheduleStore


def test_the_id_is_written_once_and_kept(store: ScheduleStore) -> None:
    if isinstance(store, SqlScheduleStore):
        assert store.stored_store_id() is None  # nothing written by a read
    first = store.store_id()
    assert len(first) == 32
    assert store.store_id() == first
    assert store.stored_store_id() == first


def test_another_process_reads_the_same_id_and_another_store_has_its_own(
    database_url: str, tmp_path: Path
) -> None:
    one = SqlScheduleStore.open(database_url)
    two = SqlScheduleStore.open(database_url)  # another process's view: its own engine
    other = SqlScheduleStore.open(f"sqlite:///{tmp_path}/other.sqlite3")
    try:
        assert one.store_id() == two.store_id() == two.stored_store_id()
        assert other.store_id() != one.store_id()
    finally:
        one.close()
        two.close()
        other.close()


@pytest.mark.parametrize("take_over", [False, True])
def test_the_first_prefix_holds_the_store(store: ScheduleStore, take_over: bool) -> None:
    assert store.claim_declarations("alpha") is None
    assert store.claim_declarations("alpha") is None
    assert store.claim_declarations("beta", take_over=take_over) == (None if take_over else "alpha")
    holder = "beta" if take_over else "alpha"
    assert store.claim_declarations("gamma") == holder
