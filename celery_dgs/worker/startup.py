"""The worker's start-up check: can it supervise its scheduled tasks?

A worker that could not (an invalid ``dgs_*`` setting, no Redis URL, Redis
or the database refusing the password) would run them with no lease or no
run record, so it refuses to start: one line naming the setting, exit status
78 (``EX_CONFIG``). ``SystemExit`` passes through Celery's signal dispatch,
which swallows other exceptions. Redis or the database merely unreachable is
no reason to refuse: runs are skipped (never run unleased) until Redis
answers, and fail (given back to beat) until the database does.
"""

from __future__ import annotations

import logging
from typing import Any, NoReturn, Protocol

import redis

from ..connection import redis_from_url
from ..declarations import Declarations
from ..errors import ScheduleConfigError, SchemaTooNewError, SettingsError
from ..failures import explain_failure, redact_url
from ..runtime import Runtime, runtime_for
from ..sentinel import log_min_replicas_warning
from ..settings import DgsSettings
from ..store.sql import SqlScheduleStore

logger = logging.getLogger("celery_dgs.worker")

#: Exit status of a worker that refuses to start (``EX_CONFIG`` of sysexits.h).
EX_CONFIG = 78
#: Seconds the start-up check waits for Redis to answer (it only looks for a
#: refused password; an unreachable Redis is retried later).
STARTUP_CHECK_TIMEOUT_S = 2.0


class DgsPlugin(Protocol):
    """What the hooks use of :class:`celery_dgs.dgs.DGS` (which passes itself
    in: the worker layer does not import it)."""

    declarations: Declarations
    #: Tasks whose ``@dgs.deferred`` declaration is invalid, by task name.
    check_template_errors: dict[str, ScheduleConfigError]

    @property
    def settings(self) -> DgsSettings: ...

    def all_declarations(self, *, import_modules: bool = True) -> Declarations: ...


class StartRefused(SettingsError):
    """The worker cannot supervise its scheduled tasks; it must not start."""


def explain(rt: Runtime, exc: BaseException) -> tuple[str, bool] | None:
    return explain_failure(
        exc,
        redis_url=rt.redis_url,
        redis_setting=rt.settings.redis_url_setting,
        database_url=rt.settings.database_url,
    )


def check_before_start(app: Any, dgs: DgsPlugin) -> Runtime:
    """Raise :class:`StartRefused` (one line naming the setting) when the worker
    could not supervise its scheduled tasks: invalid ``dgs_*`` settings, no Redis
    URL, or a Redis that refuses the password. Redis merely unreachable is no
    reason to refuse: runs are skipped (never run unleased) until it answers.
    A Sentinel primary that answers has its ``min-replicas-to-write`` checked."""
    try:
        rt = runtime_for(app, dgs.settings)
    except SettingsError as exc:
        raise StartRefused(f"invalid setting: {exc}") from None
    try:
        # A cluster client (dgs_redis_cluster) reads the slot map here already.
        client = redis_from_url(
            rt.redis_url or "",
            cluster=rt.settings.redis_cluster,
            sentinel_master=rt.settings.redis_master_name,
            sentinel_kwargs=rt.settings.redis_sentinel_kwargs,
            socket_timeout=STARTUP_CHECK_TIMEOUT_S,
            socket_connect_timeout=STARTUP_CHECK_TIMEOUT_S,
            **rt.redis_tls,
        )
    except SettingsError as exc:
        raise StartRefused(f"invalid setting: {exc}") from None
    except redis.RedisError as exc:
        _unanswered(rt, exc)
        return rt
    try:
        client.ping()
        log_min_replicas_warning(client, rt.settings.redis_master_name, logger)
        _refuse_a_cluster_node(rt, client)
    except redis.RedisError as exc:
        _unanswered(rt, exc)
    finally:
        client.close()
    _check_store(rt)
    return rt


def _refuse_a_cluster_node(rt: Runtime, client: redis.Redis) -> None:
    """Refuse to start when ``dgs_redis_cluster`` is off but the server is a
    node of a Redis Cluster (a plain client gets ``MOVED`` or ``CROSSSLOT``
    for most calls); a server that does not answer ``INFO cluster`` (an ACL)
    is left to those answers."""
    if rt.settings.redis_cluster:
        return
    try:
        enabled = client.info("cluster").get("cluster_enabled")
    except redis.ResponseError:
        return
    if enabled in (1, "1"):
        where = f"Redis at {redact_url(rt.redis_url or '?')} ({rt.settings.redis_url_setting})"
        raise StartRefused(
            f"{where} is a node of a Redis Cluster: set dgs_redis_cluster = True and "
            "dgs_redis_cluster_hash_tag = True (operations.md: Redis Cluster)"
        )


def _check_store(rt: Runtime) -> None:
    """Refuse to start when the database refuses the credentials, or its
    schema is newer than this celery-dgs knows. Any other
    failure to read it (unreachable, no schema) is said when the worker
    registers, which reads the store's id. The store is opened on its own
    and closed, so a prefork child inherits no connection of it."""
    store = None
    try:
        store = SqlScheduleStore.open(rt.settings.database_url)
        store.store_id()
    except SchemaTooNewError as exc:
        raise StartRefused(str(exc)) from None
    except Exception as exc:
        explained = explain(rt, exc)
        if explained is not None and explained[1]:
            raise StartRefused(explained[0]) from None
    finally:
        if store is not None:
            store.close()


def _unanswered(rt: Runtime, exc: redis.RedisError) -> None:
    """Refuse to start on refused credentials; warn when Redis is unreachable."""
    explained = explain(rt, exc)
    if explained is not None and explained[1]:
        raise StartRefused(explained[0]) from None
    line = explained[0] if explained is not None else f"{type(exc).__name__}: {exc}"
    logger.warning("celery-dgs: %s; scheduled runs are skipped until it answers", line)


def refuse_to_start(line: str) -> NoReturn:
    logger.critical("celery-dgs: the worker refuses to start: %s", line)
    raise SystemExit(EX_CONFIG)
