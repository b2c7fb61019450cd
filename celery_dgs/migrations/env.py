"""Alembic environment of the celery-dgs store.

Run through :mod:`celery_dgs.store.migrate`, which hands over an open
connection in ``config.attributes["connection"]``; with a plain URL
(``sqlalchemy.url``) it opens its own.
"""

from __future__ import annotations

from alembic import context
from sqlalchemy import Connection

from celery_dgs.store.engine import connection_transaction, make_engine
from celery_dgs.store.migrate import VERSION_TABLE
from celery_dgs.store.models import Base


def _run(connection: Connection) -> None:
    context.configure(
        connection=connection,
        target_metadata=Base.metadata,
        version_table=VERSION_TABLE,
        render_as_batch=True,
        compare_type=True,
    )
    with context.begin_transaction():
        context.run_migrations()


def run_migrations_offline() -> None:
    context.configure(
        url=context.config.get_main_option("sqlalchemy.url"),
        target_metadata=Base.metadata,
        version_table=VERSION_TABLE,
        literal_binds=True,
    )
    with context.begin_transaction():
        context.run_migrations()


def run_migrations_online() -> None:
    connection = context.config.attributes.get("connection")
    if connection is not None:
        _run(connection)
        return
    url = context.config.get_main_option("sqlalchemy.url")
    if not url:
        raise RuntimeError("set sqlalchemy.url or pass a connection in config.attributes")
    engine = make_engine(url)
    try:
        with connection_transaction(engine, write=True) as conn:
            _run(conn)
    finally:
        engine.dispose()


if context.is_offline_mode():
    run_migrations_offline()
else:
    run_migrations_online()
