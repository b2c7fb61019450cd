"""The driver-level writes of a runtime-schedule batch: a million rows a call.

Through SQLAlchemy, each row's values go through the column types' bind
processing and each ``IN (...)`` list is compiled as one bound parameter per
name; at a million rows that alone costs more than the database's work.
Here the values are handed to the driver as they are (the constant
``now`` converted once):

* **PostgreSQL**: the stored rows of the batch are read with ``name =
  ANY(%s)`` (one array parameter per 100,000 names) and only those that
  change are locked; new rows go in with ``COPY`` in its binary format
  (:mod:`.copy_binary`; each row's bytes built here: its own columns
  encoded, the columns it shares with the other rows of its shape encoded
  once); changed rows are copied
  into a temporary table and written by one ``UPDATE ... FROM``. All on the
  SQLAlchemy connection's own psycopg connection, inside its transaction.
* **SQLite**: new rows in one driver ``executemany`` ``INSERT``, changed
  rows in one driver ``executemany`` ``UPDATE``.

What is written is exactly what the set-based SQLAlchemy statements wrote
(``celery_dgs.store.sql_runtime`` decides which rows and holds the locks).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from datetime import datetime
from typing import Any, cast

from sqlalchemy import Connection, Table

from ..core.spec import SPEC_FORMAT_VERSION, ScheduleSpec
from .copy_binary import (
    SIGNATURE,
    TRAILER,
    boolean_bytes,
    int4_bytes,
    int8_bytes,
    row_header,
    text_bytes,
    timestamptz_bytes,
    values_bytes,
)
from .kept import KEPT_COLUMNS, NewRowTimes
from .models import ScheduleRow
from .records import OWNER_RUNTIME
from .sql_base import PG_SYNC_LOCK_KEY, chunks

_T = cast(Table, ScheduleRow.__table__)
#: Names per ``name = ANY(%s)`` array parameter (PostgreSQL).
PG_NAMES_PER_QUERY = 100_000

#: A row of the batch: its name, its spec, the spec's canonical JSON text and
#: the lister's ``last_modified`` of an adaptive schedule (``None``: keep the
#: stored one).
Prepared = tuple[str, ScheduleSpec, str, datetime | None]
#: A stored row's ``(spec, spec_format, active, owner, disabled_reason,
#: upstream_modified_at)``.
StoredState = tuple[str, int, bool, str, str | None, datetime | None]

INSERT_COLUMNS = (
    "name",
    "task",
    "configuration",
    "kind",
    "spec",
    "spec_format",
    "active",
    "paused",
    "registered_at",
    "change_seq",
    "updated_at",
    "owner",
    "upstream_modified_at",
    *KEPT_COLUMNS,
)
_SQLITE_INSERT = (
    f"INSERT INTO dgs_schedules ({', '.join(INSERT_COLUMNS)}) "
    f"VALUES ({', '.join('?' for _ in INSERT_COLUMNS)})"
)
_SQLITE_UPDATE = (
    "UPDATE dgs_schedules SET task = ?, configuration = ?, kind = ?, spec = ?, "
    f"spec_format = {SPEC_FORMAT_VERSION}, active = 1, declaration_error = NULL, "
    f"owner = '{OWNER_RUNTIME}', change_seq = ?, updated_at = ?, disabled_reason = NULL, "
    "upstream_modified_at = COALESCE(?, upstream_modified_at), "
    f"{', '.join(f'{c} = ?' for c in KEPT_COLUMNS)} WHERE name = ?"
)
_PG_READ = (
    "SELECT name, spec, spec_format, active, owner, disabled_reason, upstream_modified_at "
    "FROM dgs_schedules WHERE name = ANY(%s)"
)
_PG_LOCK = "SELECT name FROM dgs_schedules WHERE name = ANY(%s) ORDER BY name FOR NO KEY UPDATE"
_PG_COPY_NEW = f"COPY dgs_schedules ({', '.join(INSERT_COLUMNS)}) FROM STDIN (FORMAT binary)"
#: The SQL types of :data:`~.kept.KEPT_COLUMNS` (the batch table's columns).
_KEPT_TYPES = (
    "timestamptz",
    "timestamptz",
    "integer",
    "text",
    "timestamptz",
    "text",
    "timestamptz",
    "text",
    "text",
    "integer",
)
_PG_BATCH_TABLE = (
    "CREATE TEMPORARY TABLE dgs_runtime_batch (name text, task text, configuration text, "
    "kind text, spec text, hint timestamptz, "
    f"{', '.join(f'{c} {t}' for c, t in zip(KEPT_COLUMNS, _KEPT_TYPES, strict=True))}) "
    "ON COMMIT DROP"
)
_PG_UPDATE_FROM_BATCH = (
    "UPDATE dgs_schedules AS s SET task = b.task, configuration = b.configuration, "
    f"kind = b.kind, spec = b.spec, spec_format = {SPEC_FORMAT_VERSION}, active = true, "
    f"declaration_error = NULL, owner = '{OWNER_RUNTIME}', change_seq = %s, updated_at = %s, "
    "disabled_reason = NULL, upstream_modified_at = COALESCE(b.hint, s.upstream_modified_at), "
    f"{', '.join(f'{c} = b.{c}' for c in KEPT_COLUMNS)} "
    "FROM dgs_runtime_batch AS b WHERE s.name = b.name"
)


#: Rows of new schedules per ``COPY`` data message (PostgreSQL).
COPY_ROWS_PER_WRITE = 5_000


def _driver(conn: Connection) -> Any:
    """The psycopg connection under ``conn`` (in ``conn``'s transaction)."""
    return conn.connection.driver_connection


def pg_read_rows(conn: Connection, names: Sequence[str]) -> dict[str, StoredState]:
    """PostgreSQL: ``sync``'s advisory lock, then the stored rows among ``names``.

    The rows are read without row locks: every writer of the columns read here
    (``spec``, ``spec_format``, ``active``, ``owner``: ``sync``,
    ``insert_if_missing``, the runtime upsert and removal) holds the advisory
    lock, so they cannot change before the commit. Locking them all would
    write every row of a million-row batch that changes nothing; the rows that
    do change are locked by :func:`pg_lock_rows` before the counter."""
    stored: dict[str, StoredState] = {}
    with _driver(conn).cursor() as cur:
        cur.execute("SELECT pg_advisory_xact_lock(%s)", (PG_SYNC_LOCK_KEY,))
        for chunk in chunks(names, PG_NAMES_PER_QUERY):
            cur.execute(_PG_READ, (list(chunk),))
            for name, spec, spec_format, active, owner, disabled, hint in cur:
                stored[name] = (spec, spec_format, bool(active), owner, disabled, hint)
    return stored


def pg_lock_rows(conn: Connection, names: Sequence[str]) -> None:
    """PostgreSQL: lock the stored rows ``names`` (sorted) ``FOR NO KEY UPDATE``,
    in name order: the store's lock order is schedule rows, then the counter."""
    with _driver(conn).cursor() as cur:
        for chunk in chunks(names, PG_NAMES_PER_QUERY):
            cur.execute(_PG_LOCK, (list(chunk),))


def insert_new(
    conn: Connection, rows: Sequence[Prepared], now: datetime, seq: int, kept: NewRowTimes
) -> None:
    """Insert ``rows`` as new, active runtime schedules (``registered_at`` and
    ``updated_at`` ``now``, ``change_seq`` ``seq``), with their kept columns
    (``kept``)."""
    if conn.dialect.name == "postgresql":
        encoded = _CopyRows((SPEC_FORMAT_VERSION, True, False, now, seq, now, OWNER_RUNTIME), kept)
        with _driver(conn).cursor() as cur, cur.copy(_PG_COPY_NEW) as copy:
            copy.write(SIGNATURE)
            for at in range(0, len(rows), COPY_ROWS_PER_WRITE):
                copy.write(b"".join(map(encoded.row, rows[at : at + COPY_ROWS_PER_WRITE])))
            copy.write(TRAILER)
        return
    at = _bound_moment(conn, now)
    bound: dict[int, tuple[Any, ...]] = {}
    conn.exec_driver_sql(
        _SQLITE_INSERT,
        [
            (
                name,
                spec.task,
                spec.configuration,
                spec.kind,
                text,
                SPEC_FORMAT_VERSION,
                True,
                False,
                at,
                seq,
                at,
                OWNER_RUNTIME,
                _bound_moment(conn, hint),
                *_bound_kept(conn, kept.row(spec), bound),
            )
            for name, spec, text, hint in rows
        ],
    )


#: The encoders of ``INSERT_COLUMNS`` from ``spec_format`` to ``owner``.
_CONSTANT_ENCODERS = (
    int4_bytes,
    boolean_bytes,
    boolean_bytes,
    timestamptz_bytes,
    int8_bytes,
    timestamptz_bytes,
    text_bytes,
)
#: The encoders of :data:`~.kept.KEPT_COLUMNS`.
_KEPT_ENCODERS = (
    timestamptz_bytes,
    timestamptz_bytes,
    int4_bytes,
    text_bytes,
    timestamptz_bytes,
    text_bytes,
    timestamptz_bytes,
    text_bytes,
    text_bytes,
    int4_bytes,
)
_ROW_HEADER = row_header(len(INSERT_COLUMNS))
#: The encoder of each of ``INSERT_COLUMNS``, in their order.
INSERT_ENCODERS = (
    *(text_bytes,) * 5,
    *_CONSTANT_ENCODERS,
    timestamptz_bytes,
    *_KEPT_ENCODERS,
)


class _CopyRows:
    """New rows (``INSERT_COLUMNS``) in ``COPY``'s binary format:
    ``constants`` (the columns from ``spec_format`` to ``owner``) encoded
    once, each distinct tuple of kept values (:class:`NewRowTimes` shares
    one per shape) once, and each row's own columns (its name, task,
    configuration, kind, spec text, and ``last_modified`` hint)."""

    def __init__(self, constants: tuple[Any, ...], kept: NewRowTimes) -> None:
        self._constants = values_bytes(_CONSTANT_ENCODERS, constants)
        self._kept = kept
        self._kept_bytes: dict[int, tuple[tuple[Any, ...], bytes]] = {}

    def row(self, row: Prepared) -> bytes:
        name, spec, text, hint = row
        encode = text_bytes
        return b"".join(
            (
                _ROW_HEADER,
                encode(name),
                encode(spec.task),
                encode(spec.configuration),
                encode(spec.kind),
                encode(text),
                self._constants,
                timestamptz_bytes(hint),
                self._kept_values(spec),
            )
        )

    def _kept_values(self, spec: ScheduleSpec) -> bytes:
        values = self._kept.row(spec)
        found = self._kept_bytes.get(id(values))
        if found is None or found[0] is not values:
            found = (values, values_bytes(_KEPT_ENCODERS, values))
            self._kept_bytes[id(values)] = found
        return found[1]


def _bound_kept(
    conn: Connection, values: tuple[Any, ...], bound: dict[int, tuple[Any, ...]]
) -> tuple[Any, ...]:
    """``values`` (of ``KEPT_COLUMNS``) with their moments bound for SQLite,
    remembered by identity (:class:`NewRowTimes` shares one tuple per shape)."""
    found = bound.get(id(values))
    if found is None or found[0] is not values:
        converted = tuple(_bound_moment(conn, v) if isinstance(v, datetime) else v for v in values)
        bound[id(values)] = (values, converted)
        return converted
    return cast(tuple[Any, ...], found[1])


def update_changed(
    conn: Connection,
    rows: Sequence[Prepared],
    now: datetime,
    seq: int,
    kept: Mapping[str, tuple[Any, ...]],
) -> None:
    """Write ``rows`` over their stored rows as active runtime schedules (their
    statistics, ``paused`` and run requests untouched), enabled again
    (``disabled_reason`` cleared), with the row's ``last_modified`` hint when
    one is given, and its ``kept`` columns
    (:func:`~.sql_kept.kept_after_update`), in one statement."""
    if conn.dialect.name == "postgresql":
        with _driver(conn).cursor() as cur:
            cur.execute(_PG_BATCH_TABLE)
            with cur.copy("COPY dgs_runtime_batch FROM STDIN") as copy:
                for name, spec, text, hint in rows:
                    copy.write_row(
                        (name, spec.task, spec.configuration, spec.kind, text, hint, *kept[name])
                    )
            cur.execute("ANALYZE dgs_runtime_batch")
            cur.execute(_PG_UPDATE_FROM_BATCH, (seq, now))
        return
    at, bind = _bound_moment(conn, now), _moment_binder(conn)
    conn.exec_driver_sql(
        _SQLITE_UPDATE,
        [
            (
                spec.task,
                spec.configuration,
                spec.kind,
                text,
                seq,
                at,
                _bound_moment(conn, hint),
                *(bind(v) if isinstance(v, datetime) else v for v in kept[name]),
                name,
            )
            for name, spec, text, hint in rows
        ],
    )


def _bound_moment(conn: Connection, moment: datetime | None) -> Any:
    """``moment`` as a ``UTCDateTime`` column's type hands it to the driver: on
    SQLite the dialect's text form (the ``sqlite3`` module's own datetime
    adapter is deprecated from Python 3.12 on)."""
    return _moment_binder(conn)(moment)


def _moment_binder(conn: Connection) -> Callable[[datetime | None], Any]:
    """What :func:`_bound_moment` does to a moment, looked up once."""
    column_type = _T.c.updated_at.type
    process = column_type.dialect_impl(conn.dialect).bind_processor(conn.dialect)
    return (lambda moment: moment) if process is None else process
