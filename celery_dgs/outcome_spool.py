"""Run outcomes a worker could not store, kept in Redis until beat stores them.

A worker retries a run's outcome for ``dgs_ping_timeout`` (a database
restarting), its lease pinged meanwhile. Past that it releases the slot, and
the outcome would be lost: the row stays ``running`` until beat's reaper ends
it ``lost``. Instead the worker appends the outcome to one Redis list
(``KeySpace.outcome_spool()``, one JSON object each) and the leading beat,
at each reaper look before any row is judged lost, stores the oldest ones
with the same ``record_run_end`` call the worker makes, and removes each it
stored (or that the store refuses for good: a run it does not know, an
outcome fenced by a newer run, malformed data). While the database does not
answer, the entries wait and the reaper ends no row.
"""

from __future__ import annotations

import json
import math
from dataclasses import dataclass
from datetime import datetime, timezone
from typing import Any, cast

import redis

from .core.items import ItemCounts
from .errors import LeaseError, MalformedDataError
from .keys import KeySpace

#: Written as ``format`` in each entry; bump it when the layout changes.
SPOOL_FORMAT_VERSION = 1


@dataclass(frozen=True, kw_only=True)
class SpooledOutcome:
    """The arguments of one ``record_run_end`` call, and the schedule's name."""

    schedule: str
    run_id: str
    outcome: str
    ended_at: datetime
    error: str | None = None
    progress: float | None = None
    duration_s: float | None = None
    eventful: bool | None = None
    #: A deferred check's verdict: its task's return value (JSON, as Celery
    #: serialises it).
    verdict: Any = None
    items: ItemCounts | None = None

    def to_json(self) -> str:
        return json.dumps(
            {
                "format": SPOOL_FORMAT_VERSION,
                "schedule": self.schedule,
                "run_id": self.run_id,
                "outcome": self.outcome,
                "ended_at": self.ended_at.astimezone(timezone.utc).isoformat(),
                "error": self.error,
                "progress": self.progress,
                "duration_s": self.duration_s,
                "eventful": self.eventful,
                "verdict": self.verdict,
                "items": None if self.items is None else [self.items.ok, self.items.failed],
            },
            allow_nan=False,
            default=str,  # a verdict JSON cannot hold is kept as its text
        )

    @classmethod
    def from_json(cls, key: str, raw: bytes) -> SpooledOutcome:
        """One entry; :class:`MalformedDataError` naming ``key`` and the field."""
        try:
            data = json.loads(raw)
        except (ValueError, RecursionError) as exc:
            raise MalformedDataError(f"Redis key {key!r}: an entry is not JSON ({exc})") from None
        if not isinstance(data, dict):
            raise MalformedDataError(f"Redis key {key!r}: an entry is not a JSON object")
        if data.get("format") != SPOOL_FORMAT_VERSION:
            raise MalformedDataError(
                f"Redis key {key!r}: entry format {data.get('format')!r}, expected "
                f"{SPOOL_FORMAT_VERSION}"
            )
        field = ""
        try:
            field = "ended_at"
            ended_at = datetime.fromisoformat(data["ended_at"])
            if ended_at.tzinfo is None:
                raise ValueError("no time zone")
            field = "items"
            items = data.get("items")
            counts = None if items is None else ItemCounts(ok=int(items[0]), failed=int(items[1]))
            entry = cls(
                schedule=_text(data, "schedule"),
                run_id=_text(data, "run_id"),
                outcome=_text(data, "outcome"),
                ended_at=ended_at,
                error=_opt_text(data, "error"),
                progress=_opt_number(data, "progress"),
                duration_s=_opt_number(data, "duration_s"),
                eventful=_opt_bool(data, "eventful"),
                verdict=data.get("verdict"),
                items=counts,
            )
        except _FieldError as exc:
            raise MalformedDataError(f"Redis key {key!r}: entry field {exc}") from None
        except (KeyError, TypeError, ValueError, IndexError) as exc:
            raise MalformedDataError(f"Redis key {key!r}: entry field {field!r}: {exc}") from None
        return entry


class _FieldError(ValueError):
    pass


def _text(data: dict[str, Any], name: str) -> str:
    value = data.get(name)
    if not isinstance(value, str) or not value:
        raise _FieldError(f"{name!r}: expected a non-empty string, got {value!r}")
    return value


def _opt_text(data: dict[str, Any], name: str) -> str | None:
    value = data.get(name)
    if value is not None and not isinstance(value, str):
        raise _FieldError(f"{name!r}: expected a string or null, got {value!r}")
    return value


def _opt_number(data: dict[str, Any], name: str) -> float | None:
    value = data.get(name)
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, int | float) or not math.isfinite(value):
        raise _FieldError(f"{name!r}: expected a number or null, got {value!r}")
    return float(value)


def _opt_bool(data: dict[str, Any], name: str) -> bool | None:
    value = data.get(name)
    if value is not None and not isinstance(value, bool):
        raise _FieldError(f"{name!r}: expected true, false or null, got {value!r}")
    return value


class OutcomeSpool:
    """The Redis list of :class:`SpooledOutcome` entries, oldest first. Every
    method is one round trip; a Redis error is a :class:`LeaseError`."""

    def __init__(self, client: redis.Redis, keys: KeySpace) -> None:
        self.client = client
        self.key = keys.outcome_spool()
        #: Entries the store refused while it answered otherwise, for a human.
        self.refused_key = keys.outcome_spool_refused()

    def put(self, entry: SpooledOutcome) -> int:
        """Append ``entry``; returns how many entries wait now."""
        return int(self._do("appending to", lambda: self.client.rpush(self.key, entry.to_json())))

    def oldest(self, limit: int) -> list[tuple[bytes, SpooledOutcome | MalformedDataError]]:
        """Up to ``limit`` entries, oldest first, each with its raw form (what
        :meth:`remove` takes) or the error that it is malformed."""
        raws = cast(
            "list[bytes]",
            self._do("reading", lambda: self.client.lrange(self.key, 0, max(limit, 1) - 1)),
        )
        found: list[tuple[bytes, SpooledOutcome | MalformedDataError]] = []
        for raw in raws:
            try:
                found.append((raw, SpooledOutcome.from_json(self.key, raw)))
            except MalformedDataError as exc:
                found.append((raw, exc))
        return found

    def remove(self, raw: bytes) -> None:
        """Remove the entry ``raw`` (stored, or refused for good)."""
        self._do("removing from", lambda: self.client.lrem(self.key, 1, raw))  # type: ignore[arg-type]

    def set_aside(self, raw: bytes) -> None:
        """Move the entry ``raw`` to :attr:`refused_key` (one transaction)."""

        def move() -> Any:
            pipe = self.client.pipeline(transaction=True)
            pipe.rpush(self.refused_key, raw)
            pipe.lrem(self.key, 1, raw)  # type: ignore[arg-type]
            return pipe.execute()

        self._do("setting aside from", move)

    def count(self) -> int:
        return int(self._do("reading", lambda: self.client.llen(self.key)))

    def _do(self, what: str, call: Any) -> Any:
        try:
            return call()
        except redis.ResponseError as exc:
            raise MalformedDataError(f"Redis key {self.key!r}: {exc}") from exc
        except redis.RedisError as exc:
            raise LeaseError(f"{what} {self.key!r} failed: {exc}") from exc
