"""Upgrade a database to the store's newest schema with the alembic scripts shipped
in ``celery_dgs/migrations`` (no ``alembic.ini`` needed).

The version is kept in ``dgs_alembic_version`` so that the application's own
alembic history in the same database is left alone. Two processes upgrading at
once are serialised: PostgreSQL by a transaction-level advisory lock, SQLite by
its write lock (``BEGIN IMMEDIATE``); DDL is transactional on both, so the
second process finds the schema at head and does nothing.

To add a revision (developers)::

    from alembic import command
    from celery_dgs.store.migrate import alembic_config
    command.revision(alembic_config(), message="what changes", rev_id="0003")

then write its ``upgrade``/``downgrade`` by hand (the models in :mod:`.models`
must match the result: ``tests/store/test_migrations.py`` compares them).
"""

from __future__ import annotations

import contextlib
import logging
from collections.abc import Iterator
from pathlib import Path
from typing import TYPE_CHECKING

from sqlalchemy import Connection, Engine, text

from ..errors import SchemaTooNewError
from .engine import connection_transaction, make_engine

if TYPE_CHECKING:  # alembic is imported only when migrating: it is slow to import
    from alembic.config import Config

logger = logging.getLogger("celery_dgs.store")

MIGRATIONS_DIR = Path(__file__).resolve().parent.parent / "migrations"
VERSION_TABLE = "dgs_alembic_version"
#: pg_advisory_xact_lock key held while migrating ("dgsmigr" in ASCII).
PG_MIGRATION_LOCK_KEY = 0x6467736D696772


def alembic_config(connection: Connection | None = None) -> Config:
    """An alembic ``Config`` for the shipped scripts, optionally bound to ``connection``."""
    from alembic.config import Config

    config = Config()
    config.set_main_option("script_location", str(MIGRATIONS_DIR))
    if connection is not None:
        config.attributes["connection"] = connection
    return config


def head_revision() -> str:
    """The newest revision of the shipped scripts."""
    with alembic_quiet():
        from alembic.script import ScriptDirectory

        head = ScriptDirectory.from_config(alembic_config()).get_current_head()
    assert head is not None, "no migration scripts found"
    return head


def known_revisions() -> frozenset[str]:
    """Every revision of the shipped scripts."""
    with alembic_quiet():
        from alembic.script import ScriptDirectory

        scripts = ScriptDirectory.from_config(alembic_config())
        return frozenset(s.revision for s in scripts.walk_revisions())


def pending_revisions(current: str | None) -> list[str]:
    """The shipped revisions an upgrade from ``current`` (``None``: a new
    database) applies, oldest first ([]: at the head). ``current`` must be a
    known revision (see :func:`known_revisions`)."""
    with alembic_quiet():
        from alembic.script import ScriptDirectory

        scripts = ScriptDirectory.from_config(alembic_config())
        ahead = scripts.iterate_revisions("heads", current or "base")
        return [s.revision for s in reversed(list(ahead)) if s.revision != current]


def schema_state(engine: Engine) -> tuple[str | None, list[str]]:
    """The database's revision and the migrations an upgrade would apply
    (oldest first), read without applying them; a revision the shipped
    scripts do not know raises :class:`SchemaTooNewError`."""
    current = current_revision(engine)
    if current is not None and current not in known_revisions():
        url = engine.url.render_as_string(hide_password=True)
        raise SchemaTooNewError(url, current, head_revision())
    return current, pending_revisions(current)


def current_revision(engine: Engine) -> str | None:
    """The database's revision (``None``: never migrated)."""
    with alembic_quiet(), engine.connect() as conn:
        from alembic.runtime.migration import MigrationContext

        context = MigrationContext.configure(conn, opts={"version_table": VERSION_TABLE})
        return context.get_current_revision()


@contextlib.contextmanager
def alembic_quiet() -> Iterator[None]:
    """alembic's own INFO lines (a "setup plugin" line per plugin when it is
    first imported, the dialect, each revision run) held back while celery-dgs
    migrates: its ``alembic`` logger is set to WARNING, unless the application
    set a level for it, and put back afterwards."""
    alembic_logger = logging.getLogger("alembic")
    if alembic_logger.level != logging.NOTSET:
        yield
        return
    alembic_logger.setLevel(logging.WARNING)
    try:
        yield
    finally:
        alembic_logger.setLevel(logging.NOTSET)


def upgrade_engine(engine: Engine, revision: str = "head") -> tuple[str | None, str | None]:
    """Upgrade (idempotently) the database behind ``engine`` to ``revision``;
    one line when the schema changed (INFO for a new schema, WARNING for an
    upgrade of an existing one; alembic's own lines are held back:
    :func:`alembic_quiet`). A schema at a revision the shipped scripts do not
    know (a newer celery-dgs upgraded it) raises :class:`SchemaTooNewError`.
    Returns the revisions before and after (``None``: never migrated)."""
    with alembic_quiet():
        from alembic import command
        from alembic.runtime.migration import MigrationContext

        with connection_transaction(engine, write=True) as conn:
            if conn.dialect.name == "postgresql":
                conn.execute(
                    text("SELECT pg_advisory_xact_lock(:key)"), {"key": PG_MIGRATION_LOCK_KEY}
                )
            opts = {"version_table": VERSION_TABLE}
            before = MigrationContext.configure(conn, opts=opts).get_current_revision()
            if before is not None and before not in known_revisions():
                url = engine.url.render_as_string(hide_password=True)
                raise SchemaTooNewError(url, before, head_revision())
            command.upgrade(alembic_config(conn), revision)
            after = MigrationContext.configure(conn, opts=opts).get_current_revision()
    if after != before and before is None:
        logger.info("celery-dgs: created the store's schema at revision %s", after)
    elif after != before:
        # WARNING: an operator must see it whichever process did it (a worker
        # before Celery configures logging, the CLI: Python's last resort
        # prints WARNING and above).
        logger.warning(
            "celery-dgs: upgraded the store's schema from revision %s to %s; processes of "
            "an older celery-dgs must stop (docs/operations.md, Upgrading)",
            before,
            after,
        )
    return before, after


def upgrade_url(url: str, revision: str = "head") -> tuple[str | None, str | None]:
    """Upgrade the database at ``url`` to ``revision`` (``head`` by default);
    the revisions before and after (equal: nothing to do)."""
    engine = make_engine(url)
    try:
        return upgrade_engine(engine, revision)
    finally:
        engine.dispose()
