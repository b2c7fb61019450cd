"""copy_binary's values are the bytes psycopg's own binary dumpers give,
length-prefixed as ``COPY``'s binary format wants them (no server needed;
test_runtime_bulk writes them through a real ``COPY`` on PostgreSQL)."""

from __future__ import annotations

import struct
from datetime import datetime, timedelta, timezone
from typing import Any

import pytest
from sqlalchemy import text

from celery_dgs.store import SqlScheduleStore, copy_binary, sql_bulk

# Compared with psycopg's own dumpers: psycopg comes with the postgres extra.
pytest.importorskip("psycopg", reason="psycopg (celery-dgs[postgres]) is not installed")

from psycopg.types.bool import BoolBinaryDumper
from psycopg.types.datetime import DatetimeBinaryDumper
from psycopg.types.numeric import Int4BinaryDumper, Int8BinaryDumper
from psycopg.types.string import StrBinaryDumper

UTC = timezone.utc
#: The PostgreSQL column types each encoder writes.
WRITES: dict[Any, tuple[str, ...]] = {
    copy_binary.text_bytes: ("text", "character varying"),
    copy_binary.int4_bytes: ("integer",),
    copy_binary.int8_bytes: ("bigint",),
    copy_binary.boolean_bytes: ("boolean",),
    copy_binary.timestamptz_bytes: ("timestamp with time zone",),
}


def psycopg_bytes(dumper: Any, cls: type, value: Any) -> bytes:
    data = bytes(dumper(cls).dump(value))
    return struct.pack(">i", len(data)) + data


@pytest.mark.parametrize(
    "value",
    [
        datetime(2026, 3, 1, 12, 0, tzinfo=UTC),
        datetime(2026, 3, 1, 12, 0, 0, 250001, tzinfo=UTC),
        datetime(1999, 12, 31, 23, 59, 59, 999999, tzinfo=UTC),  # before the epoch
        datetime(1, 1, 1, tzinfo=UTC),
        datetime(9999, 12, 31, 23, 59, 59, 999999, tzinfo=UTC),
        datetime(2026, 3, 1, 13, 0, tzinfo=timezone(timedelta(hours=1))),
    ],
)
def test_timestamptz(value: datetime) -> None:
    assert copy_binary.timestamptz_bytes(value) == psycopg_bytes(
        DatetimeBinaryDumper, datetime, value
    )


def test_a_naive_datetime_is_refused() -> None:
    with pytest.raises(TypeError):
        copy_binary.timestamptz_bytes(datetime(2026, 3, 1))


@pytest.mark.parametrize("value", ["", "abc", "tab\t\\N\n", "é 雪 \U0001f600", "x" * 70_000])
def test_text(value: str) -> None:
    assert copy_binary.text_bytes(value) == psycopg_bytes(StrBinaryDumper, str, value)


@pytest.mark.parametrize("value", [0, 1, -1, 2**31 - 1, -(2**31)])
def test_int4(value: int) -> None:
    assert copy_binary.int4_bytes(value) == psycopg_bytes(Int4BinaryDumper, int, value)


@pytest.mark.parametrize("value", [0, 7, -7, 2**63 - 1, -(2**63)])
def test_int8(value: int) -> None:
    assert copy_binary.int8_bytes(value) == psycopg_bytes(Int8BinaryDumper, int, value)


@pytest.mark.parametrize("value", [True, False])
def test_boolean(value: bool) -> None:
    assert copy_binary.boolean_bytes(value) == psycopg_bytes(BoolBinaryDumper, bool, value)


def test_null_and_a_row() -> None:
    encoders = (
        copy_binary.text_bytes,
        copy_binary.int4_bytes,
        copy_binary.int8_bytes,
        copy_binary.boolean_bytes,
    )
    for encode in (*encoders, copy_binary.timestamptz_bytes):
        assert encode(None) == b"\xff\xff\xff\xff"
    row = copy_binary.row_header(4) + copy_binary.values_bytes(encoders, ("a", None, 2, True))
    assert row == (
        b"\x00\x04"
        + b"\x00\x00\x00\x01a"
        + b"\xff\xff\xff\xff"
        + b"\x00\x00\x00\x08"
        + (2).to_bytes(8, "big")
        + b"\x00\x00\x00\x01\x01"
    )
    with pytest.raises(ValueError, match="zip"):
        copy_binary.values_bytes(encoders, ("a", None))


@pytest.mark.postgres
def test_the_new_rows_encoders_fit_the_tables_columns(pg_store: SqlScheduleStore) -> None:
    """Each column ``COPY`` writes for a new row has the type its encoder writes."""
    with pg_store.engine.connect() as conn:
        types = dict(
            conn.execute(
                text(
                    "SELECT column_name, data_type FROM information_schema.columns "
                    "WHERE table_name = 'dgs_schedules'"
                )
            ).all()
        )
    assert len(sql_bulk.INSERT_ENCODERS) == len(sql_bulk.INSERT_COLUMNS)
    for column, encoder in zip(sql_bulk.INSERT_COLUMNS, sql_bulk.INSERT_ENCODERS, strict=True):
        assert types[column] in WRITES[encoder], column
