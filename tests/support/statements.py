"""The SQL statements a store sends meanwhile, caught on its engine."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

from sqlalchemy import Engine, event


@contextmanager
def statements_sent(engine: Engine, *starts: str) -> Iterator[list[tuple[str, Any]]]:
    """The statements (and their parameters) ``engine`` sends meanwhile whose
    text starts with one of ``starts`` (case-insensitive)."""
    sent: list[tuple[str, Any]] = []
    wanted = tuple(start.upper() for start in starts)

    def catch(_conn: Any, _cursor: Any, statement: str, parameters: Any, *_: Any) -> None:
        if statement.lstrip().upper().startswith(wanted):
            sent.append((statement, parameters))

    event.listen(engine, "before_cursor_execute", catch)
    try:
        yield sent
    finally:
        event.remove(engine, "before_cursor_execute", catch)
