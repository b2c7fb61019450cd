"""Dispatch records: which dispatch of a schedule is current, until it starts.

Beat writes a record per dispatch *before* publishing the message; the lease
acquire script consumes it when the run starts (see ``leases/scripts/acquire.lua``):

- the message's ``dispatch_id`` matches the record: the run may start and the
  record is deleted in the same atomic step;
- the record is for another dispatch, or there is none (taken back, or already
  started by an earlier delivery of the same message): the message is stale
  and the worker drops it.

A dispatch that has not started by ``expires_at`` is taken back by beat
(:meth:`DispatchRecords.take_back`), which makes the schedule eligible again.
Layout: one hash per schedule at ``KeySpace.dispatch(name)`` and a sorted set
``KeySpace.dispatch_index()`` of schedule -> expires_at (ms).

:class:`DispatchBackend` is the interface beat and the workers use;
:class:`DispatchRecords` is the Redis implementation.
"""

from __future__ import annotations

import logging
from abc import ABC, abstractmethod
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from datetime import datetime
from typing import Any, ClassVar

import redis
from redis.client import Pipeline

from .errors import LeaseError, MalformedDataError, NotLeaderError
from .keys import KeySpace
from .leases.codec import (
    HashReader,
    HashRecord,
    datetime_to_ms,
    ms_to_datetime,
    records_from_reply,
    seconds_to_ms,
    text,
)
from .leases.leader import BEAT_ROLE, LEADER_FORMAT_VERSION, LeaderFence
from .leases.lua import SCRIPTS, call_script
from .leases.types import DISPATCH_FORMAT_VERSION

log = logging.getLogger(__name__)

#: Dispatches written per script call; a batch of more is several calls in one round trip.
ADD_CHUNK = 1000
_FMT = str(DISPATCH_FORMAT_VERSION)


@dataclass(frozen=True, kw_only=True)
class DispatchRecord(HashRecord):
    """One dispatch. ``dispatched_at``/``expires_at`` are Redis time, set when it is stored."""

    schedule: str
    dispatch_id: str
    worker: str
    dispatched_at: datetime | None = None
    expires_at: datetime | None = None

    FORMAT_VERSION: ClassVar[int] = DISPATCH_FORMAT_VERSION
    KIND: ClassVar[str] = "dispatch record"
    NAME_FIELD: ClassVar[str | None] = "schedule"

    @classmethod
    def from_fields(cls, r: HashReader, name: str) -> DispatchRecord:
        return cls(
            schedule=name,
            dispatch_id=r.get_str("dispatch_id"),
            worker=r.get_str("worker"),
            dispatched_at=r.get_time("dispatched_at"),
            expires_at=r.get_time("expires_at"),
        )


class DispatchBackend(ABC):
    """The dispatch records interface: which dispatch of each schedule is
    current, from beat's decision until the run starts (the lease acquire
    consumes the record) or beat takes it back."""

    @abstractmethod
    def add_many(
        self, records: Iterable[DispatchRecord], *, ttl: float, fence: LeaderFence | None = None
    ) -> datetime | None:
        """Store ``records`` (each replaces its schedule's previous record),
        expiring in ``ttl`` seconds, before their messages are published; returns
        the backend time stored as ``dispatched_at`` (``None``: nothing stored).
        ``fence``: the beat leadership they were decided under; if it is over,
        :class:`~celery_dgs.errors.NotLeaderError` is raised."""

    @abstractmethod
    def current(self, schedule: str) -> DispatchRecord | None:
        """The schedule's pending dispatch, if any."""

    @abstractmethod
    def pending_names(self) -> set[str]:
        """The schedules with a pending dispatch."""

    def pending_count(self) -> int:
        """How many dispatches are pending."""
        return len(self.pending_names())

    @abstractmethod
    def expired(self, now: datetime | None = None, *, limit: int = 10_000) -> list[DispatchRecord]:
        """Records whose ``expires_at`` <= ``now`` (default: the backend's time),
        oldest first; foreign data is logged and skipped."""

    @abstractmethod
    def take_back(self, schedule: str, dispatch_id: str) -> bool:
        """Remove the record if it is still ``dispatch_id``; True if removed."""


def _check_leader(reply: list[Any], fence: LeaderFence | None) -> None:
    if reply and reply[0] == b"NOT_LEADER":
        holder = text(reply[3]) or "nobody"
        token = text(reply[2]) or "-"
        raise NotLeaderError(
            f"dispatch refused: this beat's leadership (token {fence.token if fence else '-'}) "
            f"is over; the beat leader is now {holder} (token {token})"
        )


class DispatchRecords(DispatchBackend):
    """Dispatch records in Redis; one round trip per call."""

    def __init__(
        self, client: redis.Redis, keys: KeySpace, *, clock_ms: Callable[[], int] | None = None
    ) -> None:
        self.client = client
        self.keys = keys
        self._clock_ms = clock_ms

    def _now_arg(self) -> str:
        return "" if self._clock_ms is None else str(int(self._clock_ms()))

    def _chunk_call(
        self, chunk: list[DispatchRecord], ttl_ms: int, fence: LeaderFence | None
    ) -> tuple[list[str], list[str]]:
        keys = [self.keys.dispatch_index(), self.keys.leader(BEAT_ROLE)]
        keys += [self.keys.dispatch(r.schedule) for r in chunk]
        args = [self._now_arg(), _FMT, str(LEADER_FORMAT_VERSION)]
        args += [fence.owner_tag, str(fence.token)] if fence is not None else ["", ""]
        for r in chunk:
            if not r.dispatch_id or not r.worker:
                raise ValueError(f"dispatch of {r.schedule!r} needs a dispatch_id and a worker")
            args += [r.schedule, r.dispatch_id, r.worker, str(ttl_ms)]
        return keys, args

    def add_many(
        self,
        records: Iterable[DispatchRecord],
        *,
        ttl: float,
        pipeline: Pipeline | None = None,
        fence: LeaderFence | None = None,
    ) -> datetime | None:
        """Store ``records`` (each replaces its schedule's previous record), expiring in ``ttl`` s.

        Write them *before* publishing the messages. Without ``pipeline``: one
        round trip, returns the Redis time stored as ``dispatched_at``. With
        ``pipeline``: the writes are queued on it (plain EVAL, so the pipeline
        needs no extra round trip to load scripts), the caller executes it, and
        ``None`` is returned; each queued reply is ``[dispatched_at_ms]`` or
        ``["NOT_LEADER", ...]``.

        ``fence``: the beat leadership the dispatches were decided under. If the
        beat leader lease no longer has that owner tag and token, nothing is
        written and :class:`~celery_dgs.errors.NotLeaderError` is raised (checked
        per chunk of :data:`ADD_CHUNK`, atomically with the writes).
        """
        ttl_ms = seconds_to_ms("ttl", ttl)
        batch = list(records)
        if len({r.schedule for r in batch}) != len(batch):
            raise ValueError("add_many got two dispatches of the same schedule")
        chunks = [batch[i : i + ADD_CHUNK] for i in range(0, len(batch), ADD_CHUNK)]
        if not chunks:
            return None
        if pipeline is None and len(chunks) == 1:
            keys, args = self._chunk_call(chunks[0], ttl_ms, fence)
            reply = call_script(SCRIPTS, self.client, "dispatch_add.lua", keys, args)
            _check_leader(reply, fence)
            return ms_to_datetime(int(reply[0]))
        pipe = pipeline if pipeline is not None else self.client.pipeline(transaction=False)
        source = SCRIPTS.source("dispatch_add.lua")
        for chunk in chunks:
            keys, args = self._chunk_call(chunk, ttl_ms, fence)
            # EVAL as a raw command: redis-py's cluster pipeline has no eval()
            # method, but routes the command by the slot of its keys.
            pipe.execute_command(  # type: ignore[no-untyped-call]
                "EVAL", source, len(keys), *keys, *args
            )
        if pipeline is not None:
            return None
        try:
            replies = pipe.execute()
        except redis.RedisError as exc:
            raise LeaseError(f"storing {len(batch)} dispatch records failed: {exc}") from exc
        for reply in replies:
            if reply and reply[0] == b"MALFORMED":
                raise MalformedDataError(f"Redis key {text(reply[1])!r}: {text(reply[2])}")
        for reply in replies:  # earlier chunks may be written: the next leader adopts them
            _check_leader(reply, fence)
        return ms_to_datetime(int(replies[0][0]))

    def current(self, schedule: str) -> DispatchRecord | None:
        """The schedule's pending dispatch, if any."""
        key = self.keys.dispatch(schedule)
        data = self._read(lambda: self.client.hgetall(key), key)
        return DispatchRecord.from_hash(key, schedule, data) if data else None

    def pending_count(self) -> int:
        key = self.keys.dispatch_index()
        return int(self._read(lambda: self.client.zcard(key), key))

    def pending_names(self) -> set[str]:
        key = self.keys.dispatch_index()
        return {text(n) for n in self._read(lambda: self.client.zrange(key, 0, -1), key)}

    def expired(self, now: datetime | None = None, *, limit: int = 10_000) -> list[DispatchRecord]:
        """Records whose ``expires_at`` <= ``now`` (default: Redis time), oldest first.

        Foreign data under a record key is logged at error level and skipped.
        """
        moment = str(datetime_to_ms(now)) if now is not None else self._now_arg()
        reply = call_script(
            SCRIPTS,
            self.client,
            "dispatch_expired.lua",
            [self.keys.dispatch_index()],
            [moment, self.keys.dispatch_prefix(), str(limit)],
        )
        return records_from_reply(DispatchRecord, reply[1], self.keys.dispatch, log)

    def take_back(self, schedule: str, dispatch_id: str) -> bool:
        """Remove the record if it is still ``dispatch_id``; True if removed."""
        reply = call_script(
            SCRIPTS,
            self.client,
            "dispatch_take_back.lua",
            [self.keys.dispatch(schedule), self.keys.dispatch_index()],
            [_FMT, schedule, dispatch_id],
        )
        return bool(int(reply[0]))

    @staticmethod
    def _read(call: Callable[[], Any], key: str) -> Any:
        try:
            return call()
        except redis.ResponseError as exc:
            raise MalformedDataError(f"Redis key {key!r}: {exc}") from exc
        except redis.RedisError as exc:
            raise LeaseError(f"reading {key!r} failed: {exc}") from exc
