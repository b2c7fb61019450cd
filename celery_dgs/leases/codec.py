"""Decoding the hashes celery-dgs keeps in Redis, strictly.

Everything read back is checked: a missing field, a number that is not one or
another format version raises :class:`MalformedDataError` naming the key and
the field, never a bare ``KeyError``/``ValueError`` deep in a worker.
"""

from __future__ import annotations

import logging
import math
from collections.abc import Callable, Mapping, Sequence
from datetime import datetime, timedelta, timezone
from typing import Any, ClassVar, TypeVar

from ..errors import MalformedDataError
from ..failures import no_such_database

_R = TypeVar("_R", bound="HashRecord")

EPOCH = datetime(1970, 1, 1, tzinfo=timezone.utc)


def ms_to_datetime(ms: int) -> datetime:
    """Milliseconds since the epoch (Redis ``TIME``) as an aware UTC datetime."""
    return EPOCH + timedelta(milliseconds=ms)


def datetime_to_ms(moment: datetime) -> int:
    if moment.tzinfo is None:
        raise ValueError(f"an aware datetime is needed, got {moment!r}")
    return (moment - EPOCH) // timedelta(milliseconds=1)


def seconds_to_ms(name: str, seconds: float) -> int:
    if isinstance(seconds, bool) or not isinstance(seconds, (int, float)):
        raise ValueError(f"{name} must be a number of seconds, got {seconds!r}")
    if not math.isfinite(seconds) or seconds < 0:
        raise ValueError(f"{name} must be a finite number of seconds >= 0, got {seconds!r}")
    return round(seconds * 1000)


def pairs(flat: Sequence[Any]) -> dict[bytes, bytes]:
    """``[f1, v1, f2, v2, ...]`` (a Lua HGETALL) as a dict."""
    return {bytes(flat[i]): bytes(flat[i + 1]) for i in range(0, len(flat) - 1, 2)}


def text(value: Any) -> str:
    return value.decode("utf-8", "replace") if isinstance(value, bytes) else str(value)


class HashReader:
    """Typed access to one hash; every failure names ``key`` and the field."""

    def __init__(self, key: str, data: Mapping[bytes, bytes], *, format_version: int) -> None:
        self.key = key
        self._data = data
        found = data.get(b"format")
        if found != str(format_version).encode():
            shown = "missing" if found is None else repr(text(found))
            raise self.error(f"format version is {shown}, expected {format_version}")

    def error(self, what: str) -> MalformedDataError:
        return MalformedDataError(f"Redis key {self.key!r}: {what}")

    def _raw(self, field: str) -> bytes:
        value = self._data.get(field.encode())
        if value is None:
            raise self.error(f"field {field!r} is missing")
        return value

    def get_str(self, field: str) -> str:
        try:
            return self._raw(field).decode("utf-8")
        except UnicodeDecodeError as exc:
            raise self.error(f"field {field!r} is not UTF-8") from exc

    def opt_str(self, field: str) -> str | None:
        """``None`` when the field is absent or empty."""
        return (self.get_str(field) or None) if field.encode() in self._data else None

    def get_int(self, field: str) -> int:
        raw = self._raw(field)
        try:
            return int(raw)
        except ValueError as exc:
            raise self.error(f"field {field!r} is not an integer: {text(raw)!r}") from exc

    def get_time(self, field: str) -> datetime:
        return ms_to_datetime(self.get_int(field))

    def opt_time(self, field: str) -> datetime | None:
        return self.get_time(field) if self._data.get(field.encode()) else None

    def opt_float(self, field: str) -> float | None:
        raw = self._data.get(field.encode())
        if not raw:
            return None
        try:
            value = float(raw)
        except ValueError as exc:
            raise self.error(f"field {field!r} is not a number: {text(raw)!r}") from exc
        if not math.isfinite(value):
            raise self.error(f"field {field!r} is not finite: {text(raw)!r}")
        return value

    def flag(self, field: str) -> bool:
        raw = self._raw(field)
        if raw not in (b"0", b"1"):
            raise self.error(f"field {field!r} is not 0 or 1: {text(raw)!r}")
        return raw == b"1"


class HashRecord:
    """Base of the values stored as one Redis hash each (a lease, a dispatch
    record, a worker registration).

    :meth:`from_hash` is the one way to read one: it checks that there are
    fields, the ``format`` version and that the hash is ``name``'s, then
    :meth:`from_fields` reads the rest. Every failure is a
    :class:`MalformedDataError` naming the key (and the field).
    """

    #: The ``format`` field the hash must have.
    FORMAT_VERSION: ClassVar[int]
    #: What one hash holds, for errors ("no lease fields", "skipping a lease").
    KIND: ClassVar[str]
    #: The field holding the name the hash belongs to (it must equal ``name``);
    #: ``None``: no such field.
    NAME_FIELD: ClassVar[str | None] = None
    #: Whether :attr:`NAME_FIELD` must be there (``False``: checked when present).
    NAME_REQUIRED: ClassVar[bool] = True

    @classmethod
    def from_hash(cls: type[_R], key: str, name: str, data: Mapping[bytes, bytes]) -> _R:
        """Parse the hash stored at ``key`` for ``name``."""
        if not data:
            raise MalformedDataError(f"Redis key {key!r}: no {cls.KIND} fields")
        r = HashReader(key, data, format_version=cls.FORMAT_VERSION)
        field = cls.NAME_FIELD
        if field is not None:
            stored = r.get_str(field) if cls.NAME_REQUIRED else r.opt_str(field)
            if stored is not None and stored != name:
                raise r.error(f"field {field!r} is {stored!r}, expected {name!r}")
        return cls.from_fields(r, name)

    @classmethod
    def from_fields(cls: type[_R], r: HashReader, name: str) -> _R:
        """The value from its checked hash (every subclass defines it)."""
        raise NotImplementedError(f"{cls.__name__} does not define from_fields")


def hash_reply(key: str, reply: object) -> Mapping[bytes, bytes]:
    """A hash as Redis returned it: a flat ``[f1, v1, ...]`` list (from a script)
    or a dict (``HGETALL`` in a pipeline). A reply that is an error instead (a
    pipeline's exception, a script's reason string) raises
    :class:`MalformedDataError` naming ``key``."""
    if isinstance(reply, Mapping):
        return reply
    if isinstance(reply, list):
        return pairs(reply)
    if isinstance(reply, BaseException) and no_such_database(reply):
        raise reply  # the server's configuration, not the key's data
    raise MalformedDataError(f"Redis key {key!r}: {text(reply)}")


def records_from_reply(
    record: type[_R], flat: Sequence[Any], key_of: Callable[[str], str], log: logging.Logger
) -> list[_R]:
    """A script's flat ``[name, hash-or-error, ...]`` reply as ``record`` values, in
    order; an entry holding foreign data is logged at error level and skipped."""
    out: list[_R] = []
    for i in range(0, len(flat) - 1, 2):
        name = text(flat[i])
        key = key_of(name)
        try:
            out.append(record.from_hash(key, name, hash_reply(key, flat[i + 1])))
        except MalformedDataError as exc:
            log.error("skipping a %s: %s", record.KIND, exc)
    return out
