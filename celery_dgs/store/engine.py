"""Engines and transactions for the store, with SQLite made safe for several processes.

SQLite: WAL journal (readers never block the writer), a 30 s busy timeout,
foreign keys on, and SQLAlchemy (not the ``sqlite3`` module) emits ``BEGIN``.
Write transactions start with ``BEGIN IMMEDIATE`` so that they take the write
lock before their first read: a read-modify-write can then never work on data
another process changes underneath it. PostgreSQL uses row locks instead
(``SELECT ... FOR UPDATE``), and a connect gives up after
:data:`POSTGRES_CONNECT_TIMEOUT_S` unless the URL names a ``connect_timeout``.
"""

from __future__ import annotations

import sqlite3
import time
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from typing import Any

from sqlalchemy import Connection, Engine, create_engine, event
from sqlalchemy.engine import make_url
from sqlalchemy.exc import ArgumentError, NoSuchModuleError
from sqlalchemy.orm import Session
from sqlalchemy.pool import ConnectionPoolEntry, StaticPool

from ..errors import SettingsError

#: How long a SQLite writer waits for the lock before "database is locked".
SQLITE_BUSY_TIMEOUT_S = 30.0
#: How long a PostgreSQL connection may take to open (libpq's ``connect_timeout``,
#: seconds) unless the URL or the engine options say otherwise: an unreachable
#: server fails a connect in this time instead of the operating system's TCP
#: timeout of minutes.
POSTGRES_CONNECT_TIMEOUT_S = 10
#: The PostgreSQL drivers that take libpq's ``connect_timeout``.
_LIBPQ_DRIVERS = ("psycopg", "psycopg2")
_WRITE_OPTION = "dgs_write"


#: The databases the store runs on (its migrations' triggers and bulk writes
#: are written for these two).
SUPPORTED_BACKENDS = ("sqlite", "postgresql")
#: The pip package that provides a missing database driver module.
DRIVER_PACKAGES = {
    "psycopg": "psycopg[binary]",
    "psycopg2": "psycopg2-binary",
    "pg8000": "pg8000",
}


def masked_url(url: str) -> str:
    """``url`` with its password replaced by ``***`` (``<not a URL>`` if unparseable)."""
    try:
        return make_url(url).render_as_string(hide_password=True)
    except (ArgumentError, ValueError, TypeError):
        return "<not a URL>"


def make_engine(url: str, engine_options: Mapping[str, Any] | None = None) -> Engine:
    """An engine for ``url`` (``sqlite:///path`` or ``postgresql+psycopg://...``).

    A URL that cannot be parsed, names an unknown dialect or a driver that is
    not installed raises :class:`~celery_dgs.errors.SettingsError`: one line
    naming ``dgs_database_url`` (password masked) and, for a missing driver,
    the package to install."""
    try:
        _check_supported(url)
        return _make_engine(url, engine_options)
    except ModuleNotFoundError as exc:
        module = exc.name or "?"
        package = DRIVER_PACKAGES.get(module.split(".")[0], module)
        raise SettingsError(
            f"dgs_database_url {masked_url(url)!r}: its database driver {module!r} is not "
            f"installed; install it (pip install '{package}') or name an installed "
            "driver in the URL (dialect+driver://...)"
        ) from None
    except NoSuchModuleError:
        raise SettingsError(
            f"dgs_database_url {masked_url(url)!r}: unknown database dialect "
            f"{url.partition(':')[0]!r} (use sqlite:///path or postgresql+psycopg://...)"
        ) from None
    except ArgumentError as exc:
        raise SettingsError(
            f"dgs_database_url {masked_url(url)!r}: not a database URL ({exc}); "
            "use sqlite:///path or postgresql+psycopg://user:password@host/db"
        ) from None


def _check_supported(url: str) -> None:
    """Refuse a database the store does not run on (an unknown dialect is
    left to SQLAlchemy's own error)."""
    parsed = make_url(url)
    backend = parsed.get_backend_name()
    if backend in SUPPORTED_BACKENDS:
        return
    parsed.get_dialect()  # NoSuchModuleError: not a dialect at all
    raise SettingsError(
        f"dgs_database_url {masked_url(url)!r}: celery-dgs keeps its schedules in SQLite "
        f"or PostgreSQL, not {backend!r}; use sqlite:///path or "
        "postgresql+psycopg://user:password@host/db"
    )


def _make_engine(url: str, engine_options: Mapping[str, Any] | None) -> Engine:
    options: dict[str, Any] = dict(engine_options or {})
    parsed = make_url(url)
    if parsed.get_backend_name() != "sqlite":
        options.setdefault("pool_pre_ping", True)
        if (
            parsed.get_backend_name() == "postgresql"
            and parsed.get_driver_name() in _LIBPQ_DRIVERS
            and "connect_timeout" not in parsed.query
        ):
            connect_args = dict(options.pop("connect_args", {}))
            connect_args.setdefault("connect_timeout", POSTGRES_CONNECT_TIMEOUT_S)
            options["connect_args"] = connect_args
        return create_engine(url, **options)
    memory = parsed.database in (None, "", ":memory:")
    connect_args = dict(options.pop("connect_args", {}))
    connect_args.setdefault("timeout", SQLITE_BUSY_TIMEOUT_S)
    if memory:
        connect_args.setdefault("check_same_thread", False)
        options.setdefault("poolclass", StaticPool)
    engine = create_engine(url, connect_args=connect_args, **options)
    _install_sqlite_hooks(engine, wal=not memory)
    return engine


def _install_sqlite_hooks(engine: Engine, *, wal: bool) -> None:
    @event.listens_for(engine, "connect")
    def _on_connect(dbapi_connection: Any, _record: ConnectionPoolEntry) -> None:
        dbapi_connection.isolation_level = None  # we emit BEGIN ourselves
        cursor = dbapi_connection.cursor()
        try:
            cursor.execute(f"PRAGMA busy_timeout = {int(SQLITE_BUSY_TIMEOUT_S * 1000)}")
            if wal:
                _enable_wal(cursor)
                cursor.execute("PRAGMA synchronous = NORMAL")
            cursor.execute("PRAGMA foreign_keys = ON")
            # A statement on a table with triggers (the condition tally's)
            # keeps a statement journal: in a temporary file it costs about
            # 90 µs a statement, in memory a few.
            cursor.execute("PRAGMA temp_store = MEMORY")
        finally:
            cursor.close()

    @event.listens_for(engine, "begin")
    def _on_begin(conn: Connection) -> None:
        write = conn.get_execution_options().get(_WRITE_OPTION, False)
        conn.exec_driver_sql("BEGIN IMMEDIATE" if write else "BEGIN")


def _enable_wal(cursor: Any) -> None:
    """Switch to WAL. Changing a database's journal mode needs an exclusive lock
    and SQLite does not call the busy handler for it: several processes opening
    a new database at once get "database is locked" at once. Retried, with a
    growing pause, until the busy timeout (a database already in WAL answers
    at once)."""
    deadline = time.monotonic() + SQLITE_BUSY_TIMEOUT_S
    pause = 0.005
    while True:
        try:
            cursor.execute("PRAGMA journal_mode = WAL")
            return
        except sqlite3.OperationalError as exc:
            if "locked" not in str(exc) or time.monotonic() >= deadline:
                raise
            time.sleep(pause)
            pause = min(pause * 2, 0.2)


@contextmanager
def connection_transaction(engine: Engine, *, write: bool) -> Iterator[Connection]:
    """A connection inside one transaction, committed on success, rolled back on error.

    ``write=True`` takes SQLite's write lock at ``BEGIN``.
    """
    with engine.connect() as conn:
        if write:
            conn.execution_options(**{_WRITE_OPTION: True})
        with conn.begin():
            yield conn


@contextmanager
def session_transaction(engine: Engine, *, write: bool) -> Iterator[Session]:
    """An ORM session inside :func:`connection_transaction`; flushed before commit."""
    with (
        connection_transaction(engine, write=write) as conn,
        Session(bind=conn, autoflush=True, expire_on_commit=False) as session,
    ):
        yield session
        session.flush()
