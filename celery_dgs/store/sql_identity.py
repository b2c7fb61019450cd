"""The SQL store's identity: a random id written once in
``dgs_kept_settings`` (key ``store_id``) by the first process that asks.

Beat writes it into its leader lease, and a beat, a worker or ``celery dgs
status`` that finds the leading beat serving another store knows that two
projects (two stores) share one Redis database and key prefix.
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
