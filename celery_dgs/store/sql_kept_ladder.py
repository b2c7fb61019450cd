"""The SQL store adopting a retry ladder (:mod:`.kept_ladder`).

``dgs_kept_settings`` holds the fingerprint of the ladder the kept columns
were written with. :func:`adopt_ladder` compares it with the given ladder;
when it differs (or none is recorded) it rewrites the kept columns of every
row a retry step can move, the active rows with failures: the schedules,
then the deferred checks. Their names are read first, in one pass of each
part's partial index (``ix_dgs_schedules_failing``,
``ix_dgs_schedules_check_due``), then rewritten a batch of names at a time.
Each batch is one transaction, which locks those of its rows still failing
(by name), takes one new ``change_seq`` and writes it to each row with its
kept columns, so beat's change poll and window read the new times. Each row is recomputed
at its ``updated_at`` (its last write), as that write would have kept it
with the new ladder; ``updated_at`` itself is left as it is. The new
fingerprint is written last: a rewrite cut short is done again from the
start at the next call.

:func:`read_fingerprint` reads the stored fingerprint alone (one primary-key
read); :func:`read_fingerprint_at` does it on an engine of its own, closed
after the read, without upgrading the schema.
"""

from __future__ import annotations

from collections.abc import Sequence
from datetime import timedelta
from typing import cast

from sqlalchemy import Connection, Engine, Table, TextClause, bindparam, select, text
from sqlalchemy.dialects.postgresql import insert as pg_insert
from sqlalchemy.dialects.sqlite import insert as sqlite_insert

from .engine import connection_transaction, make_engine
from .kept_ladder import RETRY_LADDER_SETTING, LadderAdoption, ladder_fingerprint
from .loader import SpecCache
from .models import KeptSettingRow, ScheduleRow
from .sql_base import BUMP_COUNTER, chunks
from .sql_kept import REFRESH_CHUNK, refresh_kept
from .sql_status import FAILING_SCHEDULE

_T = cast(Table, ScheduleRow.__table__)
_SETTINGS = cast(Table, KeptSettingRow.__table__)
#: Rows per transaction of the rewrite.
REWRITE_BATCH = 2_000
#: The failing schedules, then the failing deferred checks. Written as their
#: indexes' predicates are (``active``, not ``active = 1``): SQLite reads a
#: partial index only for a query whose terms include its predicate's.
_PARTS: tuple[TextClause, ...] = (
    text(FAILING_SCHEDULE),
    text("active AND kind = 'check' AND failure_count > 0"),
)


def stored_fingerprint(conn: Connection) -> str | None:
    """The retry ladder's fingerprint the store holds; ``None``: none."""
    query = select(_SETTINGS.c.value).where(_SETTINGS.c.key == RETRY_LADDER_SETTING)
    return conn.execute(query).scalar_one_or_none()


def read_fingerprint(engine: Engine) -> str | None:
    """:func:`stored_fingerprint` in a read transaction of its own."""
    with connection_transaction(engine, write=False) as conn:
        return stored_fingerprint(conn)


def read_fingerprint_at(url: str) -> str | None:
    """:func:`read_fingerprint` of the store at ``url`` on a new engine,
    disposed after the read: a process about to fork keeps no pooled
    connection its children would share. A store not migrated to 0015
    raises the database's error (no table)."""
    engine = make_engine(url)
    try:
        return read_fingerprint(engine)
    finally:
        engine.dispose()


def _store_fingerprint(conn: Connection, fingerprint: str) -> None:
    insert = pg_insert if conn.dialect.name == "postgresql" else sqlite_insert
    statement = insert(_SETTINGS).values(key=RETRY_LADDER_SETTING, value=fingerprint)
    conn.execute(
        statement.on_conflict_do_update(index_elements=["key"], set_={"value": fingerprint})
    )


def _failing_names(conn: Connection, part: TextClause) -> list[str]:
    """The names of ``part``'s rows, by name: one read of its partial index."""
    return sorted(conn.execute(select(_T.c.name).where(part)).scalars())


def _rewrite_batch(
    conn: Connection,
    part: TextClause,
    names: Sequence[str],
    ladder: Sequence[timedelta],
    specs: SpecCache,
) -> int:
    """Rewrite the rows ``names`` that are still in ``part`` (locked, by
    name); how many."""
    query = (
        select(_T.c.name)
        .where(_T.c.name.in_(bindparam("names", expanding=True)), part)
        .order_by(_T.c.name)
        .with_for_update(key_share=True)
    )
    locked: list[str] = []
    for chunk in chunks(names, REFRESH_CHUNK):
        locked += conn.execute(query, {"names": list(chunk)}).scalars()
    if locked:
        seq = int(conn.execute(BUMP_COUNTER).scalar_one())
        refresh_kept(conn, locked, None, retry_ladder=ladder, specs=specs, change_seq=seq)
    return len(locked)


def adopt_ladder(
    engine: Engine,
    ladder: tuple[timedelta, ...],
    *,
    specs: SpecCache,
    batch: int = REWRITE_BATCH,
) -> LadderAdoption:
    """Make the kept columns of ``engine``'s store those of ``ladder``: nothing
    when the stored fingerprint is ``ladder``'s; else every failing active
    row rewritten (see the module docstring), then the fingerprint stored."""
    fingerprint = ladder_fingerprint(ladder)
    previous = read_fingerprint(engine)
    if previous == fingerprint:
        return LadderAdoption(ladder, previous, None)
    rewritten = 0
    for part in _PARTS:
        with connection_transaction(engine, write=False) as conn:
            names = _failing_names(conn, part)
        for lot in chunks(names, batch):
            with connection_transaction(engine, write=True) as conn:
                rewritten += _rewrite_batch(conn, part, lot, ladder, specs)
    with connection_transaction(engine, write=True) as conn:
        _store_fingerprint(conn, fingerprint)
    return LadderAdoption(ladder, previous, rewritten)
