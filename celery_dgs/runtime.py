"""The clients one process needs (Redis leases, registry, dispatch records, the
store), built lazily from the settings and rebuilt after a fork. Each is
typed by its interface (:class:`~celery_dgs.leases.base.LeaseBackend`,
:class:`~celery_dgs.registry.RegistryBackend`,
:class:`~celery_dgs.store.base.ScheduleStore`); this is the one place that
picks the implementations.

Beat, worker processes and the CLI each get their own; a prefork child must
not reuse its parent's sockets, so the bundle remembers the PID it was built in.
"""

from __future__ import annotations

import os
import threading
import weakref
from collections.abc import Mapping
from functools import cached_property
from typing import Any

import redis

from .connection import cert_reqs_spelt_for_redis_py, redis_from_url
from .dispatches import DispatchRecords
from .errors import SettingsError
from .leases.base import LeaseBackend
from .leases.redis import RedisLeases
from .outcome_spool import OutcomeSpool
from .registry import RegistryBackend, WorkerRegistry
from .settings import DgsSettings
from .store.base import ScheduleStore
from .store.sql import SqlScheduleStore
from .wake import BeatWake


class Runtime:
    def __init__(
        self,
        settings: DgsSettings,
        *,
        broker_url: str | None = None,
        broker_use_ssl: Any = None,
    ) -> None:
        self.settings = settings
        self.redis_url = settings.resolved_redis_url(broker_url)
        if self.redis_url is None:
            raise SettingsError(
                "celery-dgs needs Redis: set dgs_redis_url, or use a redis:// broker_url"
            )
        #: TLS options of the Redis client: Celery's ``broker_use_ssl`` when the
        #: URL is the broker's (kombu connects the broker with them).
        self.redis_tls: dict[str, Any] = {}
        if not settings.redis_url and isinstance(broker_use_ssl, Mapping) and broker_use_ssl:
            self.redis_tls = {k: v for k, v in broker_use_ssl.items() if k.startswith("ssl_")}
            if self.redis_url.startswith("redis://"):  # kombu speaks TLS with them too
                self.redis_url = "rediss://" + self.redis_url.removeprefix("redis://")
        try:
            cert_reqs_spelt_for_redis_py(self.redis_url)
        except SettingsError as exc:
            raise SettingsError(f"{settings.redis_url_setting}: {exc}") from None
        self.keys = settings.keyspace()

    @cached_property
    def redis(self) -> redis.Redis:
        timeout = self.settings.redis_socket_timeout
        return redis_from_url(
            self.redis_url or "",
            cluster=self.settings.redis_cluster,
            sentinel_master=self.settings.redis_master_name,
            sentinel_kwargs=self.settings.redis_sentinel_kwargs,
            socket_timeout=timeout,
            socket_connect_timeout=timeout,
            **self.redis_tls,
        )

    @cached_property
    def leases(self) -> LeaseBackend:
        return RedisLeases(
            self.redis,
            self.keys,
            ping_timeout=self.settings.ping_timeout,
            steal_delay=self.settings.steal_delay,
        )

    @cached_property
    def registry(self) -> RegistryBackend:
        return WorkerRegistry(self.redis, self.keys, ttl=self.settings.worker_ttl)

    @cached_property
    def outcome_spool(self) -> OutcomeSpool:
        """Run outcomes a worker could not store; the leading beat stores them."""
        return OutcomeSpool(self.redis, self.keys)

    @cached_property
    def wake(self) -> BeatWake:
        """Workers signal a free slot on it; the leading beat waits on it."""
        return BeatWake(
            self.redis, self.keys, max_block_s=max(0.05, self.settings.redis_socket_timeout / 2)
        )

    @cached_property
    def dispatches(self) -> DispatchRecords:
        # The Redis class, not DispatchBackend: a leaving worker's give-back
        # (worker.shutdown) pipelines its reads of the records on its client.
        return DispatchRecords(self.redis, self.keys)

    @cached_property
    def store(self) -> ScheduleStore:
        store = SqlScheduleStore.open(self.settings.database_url)
        store.retry_ladder = self.settings.retry_ladder
        return store

    def close(self) -> None:
        if "store" in self.__dict__:
            self.store.close()
        if "redis" in self.__dict__:
            self.redis.close()
        for name in ("redis", "leases", "registry", "dispatches", "store"):
            self.__dict__.pop(name, None)


_by_app: weakref.WeakKeyDictionary[Any, tuple[int, Runtime]] = weakref.WeakKeyDictionary()
_lock = threading.Lock()


def runtime_of_app(app: Any, settings: DgsSettings) -> Runtime:
    """A new Runtime for ``app``: its Redis falls back to the broker's URL
    and TLS options (``broker_url``, ``broker_use_ssl``)."""
    conf = app.conf
    return Runtime(settings, broker_url=conf.broker_url, broker_use_ssl=conf.broker_use_ssl)


def runtime_for(app: Any, settings: DgsSettings) -> Runtime:
    """This process's Runtime for ``app`` (a new one after a fork). Keyed by the
    app object itself (weakly), so a new app never inherits a dead app's clients."""
    pid = os.getpid()
    with _lock:
        entry = _by_app.get(app)
        if entry is None or entry[0] != pid:
            entry = (pid, runtime_of_app(app, settings))
            _by_app[app] = entry
        return entry[1]
