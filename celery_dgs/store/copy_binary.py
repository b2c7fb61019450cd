"""Column values in PostgreSQL ``COPY``'s binary format, for bulk writers
that build their rows' bytes themselves: a value's bytes are its length
(4 bytes, big-endian; -1 for NULL) and its binary form, a row's bytes the
number of its columns (2 bytes) and its values' bytes, in column order.

The server reads these without parsing text (a ``timestamptz`` is a whole
number of microseconds), and a value needs no escaping. The data starts
with :data:`SIGNATURE` and ends with :data:`TRAILER`."""

from __future__ import annotations

import struct
from collections.abc import Callable
from datetime import datetime, timedelta, timezone
from typing import Any

#: The start of a binary ``COPY``'s data: its signature, no flags, no header extension.
SIGNATURE = b"PGCOPY\n\xff\r\n\x00" + bytes(8)
#: The end of a binary ``COPY``'s data.
TRAILER = b"\xff\xff"
#: A NULL value.
NULL = b"\xff\xff\xff\xff"
#: ``timestamptz``'s zero: microseconds are counted from it.
PG_EPOCH = datetime(2000, 1, 1, tzinfo=timezone.utc)

_MICROSECOND = timedelta(microseconds=1)
_INT2 = struct.Struct(">h").pack
_INT4 = struct.Struct(">i").pack
_WITH_INT4 = struct.Struct(">ii").pack
_WITH_INT8 = struct.Struct(">iq").pack
_TRUE, _FALSE = b"\x00\x00\x00\x01\x01", b"\x00\x00\x00\x01\x00"

#: A column's encoder: a value (or None) to its bytes.
Encoder = Callable[[Any], bytes]


def row_header(columns: int) -> bytes:
    """The bytes a row of ``columns`` values starts with."""
    return _INT2(columns)


def text_bytes(value: str | None) -> bytes:
    """A ``text`` or ``varchar`` value (UTF-8)."""
    if value is None:
        return NULL
    data = value.encode()
    return _INT4(len(data)) + data


def int4_bytes(value: int | None) -> bytes:
    """An ``integer`` value."""
    return NULL if value is None else _WITH_INT4(4, value)


def int8_bytes(value: int | None) -> bytes:
    """A ``bigint`` value."""
    return NULL if value is None else _WITH_INT8(8, value)


def boolean_bytes(value: bool | None) -> bytes:
    """A ``boolean`` value."""
    if value is None:
        return NULL
    return _TRUE if value else _FALSE


def timestamptz_bytes(value: datetime | None) -> bytes:
    """A ``timestamptz`` value of an aware datetime (``TypeError`` for a naive one)."""
    if value is None:
        return NULL
    return _WITH_INT8(8, (value - PG_EPOCH) // _MICROSECOND)


def values_bytes(encoders: tuple[Encoder, ...], row: tuple[Any, ...]) -> bytes:
    """The bytes of ``row``'s values, each by its column's encoder."""
    return b"".join([encode(value) for encode, value in zip(encoders, row, strict=True)])
