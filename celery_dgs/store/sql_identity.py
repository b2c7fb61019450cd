"""The SQL store's identity: a random id written once in
``dgs_kept_settings`` (key ``store_id``) by the first process that asks.

Beat writes it into its leader lease, and a beat, a worker or ``celery dgs
status`` that finds the leading beat serving another store knows that two
projects (two stores) share one Redis database and key prefix.

The other way round, two projects (two key prefixes) sharing one database:
the first ``sync`` records its key prefix (key ``declared_by``); a sync of
another prefix would deactivate that project's declared schedules, so it
is refused (:func:`claim_declarations`) unless it takes the store over.
"""

from __future__ import annotations

import uuid
from typing import cast

from sqlalchemy import Engine, Table, select
from sqlalchemy.dialects.postgresql import insert as pg_insert
from sqlalchemy.dialects.sqlite import insert as sqlite_insert

from .engine import connection_transaction
from .models import KeptSettingRow

#: The key of the store's id in ``dgs_kept_settings``.
STORE_ID_SETTING = "store_id"
#: The key of the key prefix whose declarations the store holds.
DECLARED_BY_SETTING = "declared_by"
_SETTINGS = cast(Table, KeptSettingRow.__table__)
_READ = select(_SETTINGS.c.value).where(_SETTINGS.c.key == STORE_ID_SETTING)


def read_store_id(engine: Engine) -> str | None:
    """The stored id; ``None``: none written yet."""
    with connection_transaction(engine, write=False) as conn:
        found = conn.execute(_READ).scalar_one_or_none()
    return None if found is None else str(found)


def read_or_create_store_id(engine: Engine) -> str:
    """The stored id; written first (a new random one) when there is none.
    Two processes racing both read the one that was inserted."""
    found = read_store_id(engine)
    if found is not None:
        return found
    with connection_transaction(engine, write=True) as conn:
        insert = pg_insert if conn.dialect.name == "postgresql" else sqlite_insert
        conn.execute(
            insert(_SETTINGS)
            .values(key=STORE_ID_SETTING, value=uuid.uuid4().hex)
            .on_conflict_do_nothing(index_elements=["key"])
        )
        return str(conn.execute(_READ).scalar_one())


def read_declared_by(engine: Engine) -> str | None:
    """The project (key prefix) recorded as holding the store's
    declarations; ``None``: none yet. Writes nothing."""
    read = select(_SETTINGS.c.value).where(_SETTINGS.c.key == DECLARED_BY_SETTING)
    with connection_transaction(engine, write=False) as conn:
        found = conn.execute(read).scalar_one_or_none()
    return None if found is None else str(found)


def claim_declarations(engine: Engine, owner: str, *, take_over: bool = False) -> str | None:
    """Record ``owner`` (a key prefix) as the project whose declarations the
    store holds, if none is recorded (or with ``take_over``); the other
    owner recorded (nothing written), or ``None`` once ``owner`` holds it."""
    read = select(_SETTINGS.c.value).where(_SETTINGS.c.key == DECLARED_BY_SETTING)
    with connection_transaction(engine, write=True) as conn:
        insert = pg_insert if conn.dialect.name == "postgresql" else sqlite_insert
        statement = insert(_SETTINGS).values(key=DECLARED_BY_SETTING, value=owner)
        if take_over:
            statement = statement.on_conflict_do_update(
                index_elements=["key"], set_={"value": owner}
            )
        else:
            statement = statement.on_conflict_do_nothing(index_elements=["key"])
        conn.execute(statement)
        found = str(conn.execute(read).scalar_one())
    return None if found == owner else found
