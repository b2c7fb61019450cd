"""Streaming a large query result from PostgreSQL, for start-up's load.

A server-side cursor (``FETCH`` of a batch, process it, ``FETCH`` the next)
makes the server and beat take turns: while beat converts a batch the server
is idle, and while the server produces the next one beat waits. On a machine
where both share the cores that doubled start-up's wall time. Here psycopg's
``Cursor.stream`` in chunked-rows mode (libpq 17 or newer) sends the query
once and the server writes rows while beat converts the ones already
received; beat still holds at most one chunk of rows (plus what the socket
buffers). The rows come in the binary format: no text parsing of numbers and
timestamps on beat's side. The values are the ones the text format gives:
``str``, ``int``, ``float``, ``bool``, ``None``, and ``datetime`` in the
session's time zone (the caller sets it to UTC).
"""

from __future__ import annotations

from collections.abc import Generator, Sequence
from typing import Any

from sqlalchemy import Connection

#: libpq's chunked-rows mode (``PQsetChunkedRowsMode``) came with version 17.
MIN_LIBPQ_VERSION = 170000


def streamed_rows(
    conn: Connection, sql: str, size: int
) -> Generator[Sequence[Any], None, None] | None:
    """The rows of ``sql`` (no parameters), streamed in chunks of ``size`` rows
    on ``conn``'s psycopg connection inside its open transaction; ``None``
    when that is not possible (not psycopg on PostgreSQL, or libpq too old):
    the caller then fetches as it would otherwise.

    The query is sent when the first row is asked for. The generator holds
    the connection until it ends: the caller closes it before it ends the
    transaction (closing it early cancels the rest of the query)."""
    if conn.dialect.name != "postgresql" or conn.dialect.driver != "psycopg":
        return None
    from psycopg import pq

    if pq.version() < MIN_LIBPQ_VERSION:
        return None
    driver: Any = conn.connection.driver_connection
    return _rows(driver, sql, size)


def _rows(driver: Any, sql: str, size: int) -> Generator[Sequence[Any], None, None]:
    with driver.cursor(binary=True) as cursor:
        yield from cursor.stream(sql, size=size)
