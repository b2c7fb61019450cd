"""The worker registry: which workers are alive, their queues, pool and slots.

Each worker keeps a hash at ``KeySpace.worker(name)`` (with a Redis TTL) and an
entry in the sorted set ``KeySpace.worker_index()`` scored by its expiry (ms).
A worker that stops refreshing (``register`` or ``heartbeat``) within ``ttl``
seconds is no longer live. Every call is one round trip.

:class:`RegistryBackend` is the interface beat and the worker hooks use;
:class:`WorkerRegistry` is the Redis implementation.
"""

from __future__ import annotations

import functools
import json
import logging
from abc import ABC, abstractmethod
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import Any, ClassVar

import redis

from .errors import LeaseError
from .keys import KeySpace
from .leases.codec import (
    HashReader,
    HashRecord,
    datetime_to_ms,
    ms_to_datetime,
    records_from_reply,
    seconds_to_ms,
)
from .leases.lua import SCRIPTS, call_script

log = logging.getLogger(__name__)

#: The suffix of a worker's direct queue after its name (Celery's
#: ``WORKER_DIRECT_QUEUE_FORMAT``, ``{hostname}.dq2``).
DIRECT_QUEUE_SUFFIX = ".dq2"
#: Written as ``format`` in every worker hash.
WORKER_FORMAT_VERSION = 1
_FMT = str(WORKER_FORMAT_VERSION)


@dataclass(frozen=True, kw_only=True)
class WorkerInfo(HashRecord):
    """A worker as registered. ``name`` is Celery's hostname (``celery@host``)."""

    name: str
    node: str
    queues: tuple[str, ...]
    slots: int
    pool: str
    pid: int
    #: None when registering: Redis time of the first registration of this pid.
    started_at: datetime | None = None
    #: Set by the registry: Redis time of this instance's first registration (an
    #: instance is a pid and a ``started_at``; a new one under the same name, as
    #: after a restart, gets a new time). ``None`` for a hash written without it.
    registered_at: datetime | None = None
    #: Set by the registry (Redis time + ttl).
    expires_at: datetime | None = None
    #: The id of the schedule store the worker serves (``None``: not given,
    #: or written by an older version).
    store: str | None = None
    #: The names of the tasks the worker has (``None``: not given, or written
    #: by an older version: taken as any task). Beat places a run only on a
    #: worker that has its task.
    tasks: frozenset[str] | None = None

    FORMAT_VERSION: ClassVar[int] = WORKER_FORMAT_VERSION
    KIND: ClassVar[str] = "worker registration"

    @property
    def pools(self) -> tuple[str, ...]:
        """Its queues but its own direct queue (``worker_direct``: Celery's
        ``{hostname}.dq2``, where beat sends its runs): the pools it serves."""
        own = f"{self.name}{DIRECT_QUEUE_SUFFIX}"
        return tuple(q for q in self.queues if q != own)

    @classmethod
    def from_fields(cls, r: HashReader, name: str) -> WorkerInfo:
        try:
            queues = json.loads(r.get_str("queues"))
        except ValueError as exc:
            raise r.error("field 'queues' is not JSON") from exc
        if not isinstance(queues, list) or not all(isinstance(q, str) for q in queues):
            raise r.error("field 'queues' is not a JSON list of strings")
        return cls(
            name=name,
            node=r.get_str("node"),
            queues=tuple(queues),
            slots=r.get_int("slots"),
            pool=r.get_str("pool"),
            pid=r.get_int("pid"),
            started_at=r.get_time("started_at"),
            registered_at=r.opt_time("registered_at"),
            expires_at=r.get_time("expires_at"),
            store=r.opt_str("store"),
            tasks=_task_names(r),
        )

    def has_task(self, task: str) -> bool:
        """Whether the worker has ``task`` (any, when it did not say)."""
        return self.tasks is None or task in self.tasks


def _task_names(r: HashReader) -> frozenset[str] | None:
    """The ``tasks`` field: ``None`` when absent or empty."""
    raw = r.opt_str("tasks")
    if raw is None:
        return None
    try:
        return _parsed_tasks(raw)
    except ValueError as exc:
        raise r.error(f"field 'tasks' is not a JSON list of strings: {exc}") from exc


@functools.lru_cache(maxsize=256)
def _parsed_tasks(raw: str) -> frozenset[str]:
    """A ``tasks`` field's names, parsed once per distinct text (workers
    running the same code share it, and beat reads it again each second)."""
    names = json.loads(raw)
    if not isinstance(names, list) or not all(isinstance(n, str) for n in names):
        raise ValueError("not a list of strings")
    return frozenset(names)


def serves_another_store(worker: WorkerInfo, store: str | None) -> bool:
    """Whether ``worker`` registered with a store id other than ``store``
    (a worker without one, an older version's, is taken as this store's)."""
    return bool(worker.store) and bool(store) and worker.store != store


def split_by_store(
    workers: list[WorkerInfo], store: str | None
) -> tuple[list[WorkerInfo], list[WorkerInfo]]:
    """``workers`` as those of ``store`` (with no store named: of this one)
    and those of another store (:func:`serves_another_store`), in one pass."""
    own: list[WorkerInfo] = []
    foreign: list[WorkerInfo] = []
    for w in workers:
        (foreign if serves_another_store(w, store) else own).append(w)
    return own, foreign


def worker_names(workers: Sequence[WorkerInfo], shown: int = 3) -> str:
    """The first ``shown`` workers' names, then ``...`` for the others."""
    names = ", ".join(w.name for w in workers[:shown])
    return names + (", ..." if len(workers) > shown else "")


def foreign_workers_text(workers: list[WorkerInfo], prefix: str) -> str:
    """What an operator is told about ``workers`` (at least one)."""
    names = worker_names(workers)
    return (
        f"{len(workers)} live worker(s) ({names}) serve another schedule store: two "
        f"projects share this Redis database and key prefix {prefix!r}, or those workers "
        "open another database than this process (a relative SQLite path in "
        "dgs_database_url is read from each process's working directory); beat places no "
        "run on them. Give each project its own dgs_key_prefix or Redis database, and "
        "every process of a project the same dgs_database_url"
    )


class RegistryBackend(ABC):
    """The worker registry interface: which workers are alive, their queues,
    pool and slots. A registration lives ``ttl`` seconds unless refreshed
    (:meth:`register` again, or :meth:`heartbeat`)."""

    #: The registration's time to live in milliseconds.
    ttl_ms: int

    @abstractmethod
    def register(self, info: WorkerInfo) -> WorkerInfo:
        """Register (or re-register) ``info``; returns it with ``started_at``,
        ``registered_at`` and ``expires_at`` set."""

    @abstractmethod
    def heartbeat(self, name: str) -> bool:
        """Extend the registration by ``ttl``. False when it has expired: register again."""

    @abstractmethod
    def deregister(self, name: str) -> bool:
        """Remove the registration (worker shutdown). True if it was there."""

    @abstractmethod
    def live_workers(self) -> list[WorkerInfo]:
        """Registrations not yet expired; foreign data is logged and skipped."""

    def total_slots(self) -> int:
        """Slots of all live workers."""
        return sum(w.slots for w in self.live_workers())

    def is_registered(self, name: str) -> bool:
        """Whether ``name`` is registered (it has not left)."""
        return any(w.name == name for w in self.live_workers())


class WorkerRegistry(RegistryBackend):
    """Live workers in Redis; a registration lives ``ttl`` seconds unless refreshed."""

    def __init__(
        self,
        client: redis.Redis,
        keys: KeySpace,
        *,
        ttl: float,
        clock_ms: Callable[[], int] | None = None,
    ) -> None:
        self.client = client
        self.keys = keys
        self.ttl_ms = seconds_to_ms("ttl", ttl)
        if self.ttl_ms <= 0:
            raise ValueError(f"ttl must be > 0, got {ttl!r}")
        self._clock_ms = clock_ms

    def _now_arg(self) -> str:
        return "" if self._clock_ms is None else str(int(self._clock_ms()))

    def _call(self, name: str, keys: list[str], args: list[str | int | bytes]) -> list[Any]:
        return call_script(SCRIPTS, self.client, name, keys, args)

    def register(self, info: WorkerInfo) -> WorkerInfo:
        """Register (or re-register) ``info``; returns it with ``started_at``,
        ``registered_at`` and ``expires_at`` set."""
        if info.slots < 0:
            raise ValueError(f"worker {info.name!r}: slots must be >= 0, got {info.slots}")
        started = "" if info.started_at is None else str(datetime_to_ms(info.started_at))
        reply = self._call(
            "worker_register.lua",
            [self.keys.worker(info.name), self.keys.worker_index()],
            [
                self._now_arg(),
                _FMT,
                self.ttl_ms,
                info.name,
                info.node,
                json.dumps(list(info.queues)),
                info.slots,
                info.pool,
                info.pid,
                started,
                info.store or "",
                "" if info.tasks is None else json.dumps(sorted(info.tasks)),
            ],
        )
        return WorkerInfo(
            name=info.name,
            node=info.node,
            queues=tuple(info.queues),
            slots=info.slots,
            pool=info.pool,
            pid=info.pid,
            started_at=ms_to_datetime(int(reply[0])),
            registered_at=ms_to_datetime(int(reply[2])),
            expires_at=ms_to_datetime(int(reply[1])),
            store=info.store,
            tasks=info.tasks,
        )

    def heartbeat(self, name: str) -> bool:
        """Extend the registration by ``ttl``. False when it has expired: register again."""
        reply = self._call(
            "worker_heartbeat.lua",
            [self.keys.worker(name), self.keys.worker_index()],
            [self._now_arg(), _FMT, self.ttl_ms, name],
        )
        return bool(int(reply[0]))

    def is_registered(self, name: str) -> bool:
        """Whether ``name`` is in the worker index (one ``ZSCORE``): a worker
        that left (deregistered) is not; one whose registration expired is,
        until a read of the live workers sweeps it."""
        try:
            return self.client.zscore(self.keys.worker_index(), name) is not None
        except redis.RedisError as exc:
            raise LeaseError(f"reading {self.keys.worker_index()!r} failed: {exc}") from exc

    def deregister(self, name: str) -> bool:
        """Remove the registration (worker shutdown). True if it was there."""
        keys = [self.keys.worker(name), self.keys.worker_index()]
        return bool(int(self._call("worker_deregister.lua", keys, [name])[0]))

    def live_workers(self) -> list[WorkerInfo]:
        """Registrations not yet expired (expired ones are removed); foreign data is logged."""
        reply = self._call(
            "worker_live.lua",
            [self.keys.worker_index()],
            [self._now_arg(), self.keys.worker_prefix()],
        )
        return records_from_reply(WorkerInfo, reply[1], self.keys.worker, log)
