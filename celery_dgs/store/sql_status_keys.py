"""The key a status read by pool or by a word of the task reads along
(:class:`~.sql_status_parts.Within`): the selected pools (the default one
also as NULL, the kept ``pool`` of a spec without one), or the tasks whose
name contains the word.

The task names are read as distinct values of ``ix_dgs_schedules_task_kept_level``
by a loose index scan (one probe per name, in a recursive query), and the
word is looked for in them here, case-sensitive: a fleet has few tasks for
its schedules. With both a pool and a word, the key holding fewer schedules
leads and the other filters the rows read along it (a look-up of each);
each key's schedules are counted no further than :data:`KEY_COUNT_BOUND`
(past it, either key is a large read: the tasks lead).
"""

from __future__ import annotations

from sqlalchemy import Connection, text

from .selection import Selection
from .sql_status_parts import ALL_LEVELS, Within, count_up_to

_TASK_INDEX = "ix_dgs_schedules_task_kept_level"
#: How far each key's schedules are counted to choose the one leading.
KEY_COUNT_BOUND = 100_000


def task_names(conn: Connection) -> list[str]:
    """The distinct tasks of the active schedules (not the deferred checks),
    in order: one probe of the task index per name."""
    table = "dgs_schedules"
    if conn.dialect.name == "sqlite":
        table += f" INDEXED BY {_TASK_INDEX}"
    first = f"SELECT task FROM {table} WHERE active AND kind <> 'check'"
    sql = (
        f"WITH RECURSIVE found(t) AS (SELECT ({first} ORDER BY task LIMIT 1) "
        f"UNION ALL SELECT ({first} AND task > found.t ORDER BY task LIMIT 1) "
        "FROM found WHERE found.t IS NOT NULL) SELECT t FROM found WHERE t IS NOT NULL"
    )
    return [name for (name,) in conn.execute(text(sql))]


def keyed(selection: Selection) -> bool:
    """Whether ``selection`` is read along a key: by pool or by a word of the
    task, without a name pattern or names (those read their names' rows)."""
    return bool(
        (selection.pools or selection.task_word)
        and not selection.patterns
        and selection.names is None
    )


def within_of(conn: Connection, selection: Selection) -> Within:
    """The key of a :func:`keyed` selection: its pools or its tasks (no value
    when no task contains the word); with both, the one holding fewer
    schedules (index-only counts, each up to :data:`KEY_COUNT_BOUND`) leads,
    the other filters."""
    pools: tuple[str | None, ...] = ()
    if selection.pools:
        pools = (*sorted(set(selection.pools)),)
        if selection.default_pool in selection.pools:
            pools += (None,)
    if not selection.task_word:
        return Within("pool", pools)
    tasks: tuple[str | None, ...] = tuple(t for t in task_names(conn) if selection.task_word in t)
    if not tasks or not pools:
        return Within("task", tasks)
    by_task, by_pool = (
        count_up_to(conn, {}, ALL_LEVELS, KEY_COUNT_BOUND, Within(column, values))
        for column, values in (("task", tasks), ("pool", pools))
    )
    if by_task <= by_pool:
        return Within("task", tasks, ("pool", pools))
    return Within("pool", pools, ("task", tasks))
