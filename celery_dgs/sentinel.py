"""Clients of a Redis primary found through its Sentinels.

A ``sentinel://`` URL names the Redis Sentinels of a primary (the format of
Celery's result backend and kombu's broker: ``sentinel://[:password@]host:port[/db]``,
several separated by ``;``) and the client is redis-py's
:meth:`Sentinel.master_for <redis.sentinel.Sentinel.master_for>` of the
primary's name: each new connection asks every sentinel where the primary
is (the answer with the newest configuration epoch wins), and a connection to
a server that refuses writes (``READONLY``: demoted; ``NOREPLICAS``: cut off
from its replicas under ``min-replicas-to-write``) is dropped, so after a
fail-over the next call reaches the new primary.

:func:`min_replicas_warning` reads the primary's ``min-replicas-to-write``,
which docs/guarantees.md requires to be at least 1: the worker and beat log
its line at start-up, and ``celery dgs check`` prints it.
"""

from __future__ import annotations

import logging
from collections.abc import Mapping
from typing import Any, cast

import redis
from redis.backoff import NoBackoff
from redis.retry import Retry
from redis.sentinel import MasterNotFoundError, Sentinel, SentinelManagedConnection

from .errors import SettingsError
from .failures import redact_url

#: The port of a ``sentinel://`` URL that names none (Redis Sentinel's own).
DEFAULT_SENTINEL_PORT = 26379
#: The longest socket timeout of a connection to a sentinel (seconds), unless
#: ``sentinel_kwargs`` names one: a silent sentinel delays the search for the
#: primary by that much before the next sentinel is asked.
SENTINEL_SOCKET_TIMEOUT_S = 2.0
#: Where the documentation says why a Sentinel primary needs ``min-replicas-to-write 1``.
MIN_REPLICAS_DOC = "docs/guarantees.md#redis-sentinel-fail-over"


def parse_sentinel_url(url: str) -> tuple[list[tuple[str, int]], dict[str, Any]]:
    """``(sentinels, primary options)`` of ``sentinel://[[user]:password@]host[:port]
    [/db][?options][;sentinel://host[:port]...]``, as Celery and kombu read it:
    the addresses of every part (port 26379 when none is given), and the user,
    password, database and query options of the first part, which are the
    primary's. ``ssl=true`` in the query: TLS to the primary (``ssl_*`` options
    need it). Raises :class:`SettingsError` naming what is wrong."""
    from redis.connection import parse_url

    sentinels: list[tuple[str, int]] = []
    primary: dict[str, Any] = {}
    for i, part in enumerate(p.strip() for p in url.split(";")):
        scheme, sep, rest = part.partition("://")
        if not sep or scheme.lower() != "sentinel":
            raise SettingsError(
                f"dgs_redis_url part {i + 1} ({redact_url(part) or 'empty'}) is not a "
                "sentinel://host:port URL: list every sentinel as sentinel://host:port, "
                "separated by ';'"
            )
        try:
            parsed = parse_url("redis://" + rest)  # type: ignore[no-untyped-call]
        except ValueError as exc:
            raise SettingsError(f"dgs_redis_url part {i + 1} ({redact_url(part)}): {exc}") from None
        host = parsed.pop("host", None)
        if not host:
            raise SettingsError(f"dgs_redis_url part {i + 1} ({redact_url(part)}) names no host")
        sentinels.append((host, int(parsed.pop("port", DEFAULT_SENTINEL_PORT))))
        if i == 0:
            primary = parsed
    ssl = str(primary.pop("ssl", "false")).lower()
    if ssl not in ("true", "1", "yes", "false", "0", "no"):
        raise SettingsError(f"dgs_redis_url: ssl={ssl!r} is not a boolean (true or false)")
    ssl_options = sorted(k for k in primary if k.startswith("ssl_"))
    if ssl in ("true", "1", "yes"):
        primary["ssl"] = True
    elif ssl_options:
        raise SettingsError(
            f"dgs_redis_url: TLS options {', '.join(ssl_options)} need ssl=true in the "
            "sentinel:// URL"
        )
    return sentinels, primary


def _refuses_writes(exc: redis.ResponseError) -> bool:
    return str(exc).startswith(("NOREPLICAS", "READONLY"))


class _PrimaryConnection(SentinelManagedConnection):
    """A connection to the primary the sentinels named, dropped when that server
    refuses writes: ``READONLY`` (it has become a replica; redis-py's own rule)
    or ``NOREPLICAS`` (``min-replicas-to-write`` is set and its replicas stopped
    acknowledging: it has been cut off, or another server was promoted). The
    caller gets a :class:`redis.ConnectionError`, and the next connection asks
    the sentinels again, so the client moves to a new primary as soon as the
    old one stops taking writes, not only once the sentinels demote it."""

    def read_response(self, *args: Any, **kwargs: Any) -> Any:
        try:
            return super().read_response(*args, **kwargs)
        except redis.ResponseError as exc:
            if not _refuses_writes(exc):
                raise
            self.disconnect()  # type: ignore[no-untyped-call]
            raise redis.ConnectionError(f"the primary refuses writes ({exc})") from exc


class _PrimarySSLConnection(_PrimaryConnection, redis.SSLConnection):
    pass


def _refused(exc: redis.RedisError) -> bool:
    """A sentinel turned the connection's credentials down (or wants some)."""
    text = str(exc).upper()
    return isinstance(exc, redis.AuthenticationError) or text.startswith(("NOAUTH", "WRONGPASS"))


class _Sentinel(Sentinel):
    """redis-py's :class:`~redis.sentinel.Sentinel`, but the primary is the one
    named by the sentinel with the newest configuration epoch among all that
    answer (redis-py takes the first answer; a sentinel that has not heard of
    a fail-over yet would keep naming the old primary), and a failure to find
    it says in one line why: no sentinel answered, none monitors that name, or
    the ones that do see it down (a fail-over in progress)."""

    def discover_master(self, service_name: str) -> tuple[str, int]:
        unreachable: list[str] = []
        refused: list[str] = []
        known: set[str] = set()
        down = 0
        best: tuple[int, tuple[str, int]] | None = None
        for sentinel in self.sentinels:
            kwargs = sentinel.connection_pool.connection_kwargs
            try:
                masters = cast("dict[str, Any]", sentinel.sentinel_masters())
            except redis.RedisError as exc:
                where = f"{kwargs.get('host')}:{kwargs.get('port')}"
                failed = refused if _refused(exc) else unreachable
                failed.append(f"{where} ({type(exc).__name__}: {exc})")
                continue
            known.update(str(name) for name in masters)
            state = masters.get(service_name)
            if state is None:
                continue
            if not self.check_master_state(state, service_name):  # type: ignore[no-untyped-call]
                down += 1
                continue
            epoch = int(state.get("config-epoch", 0) or 0)
            if best is None or epoch > best[0]:
                best = (epoch, (str(state["ip"]), int(state["port"])))
        if best is not None:
            return best[1]
        total = len(self.sentinels)
        if refused and len(refused) + len(unreachable) == total:
            why = (
                f"{len(refused)} of the {total} sentinels refused the credentials "
                f"({refused[0]}): set their password in dgs_redis_sentinel_kwargs, "
                "e.g. {'password': '...'} (the password in dgs_redis_url is the primary's)"
            )
        elif len(unreachable) == total:
            why = f"none of the {total} sentinels answered: " + "; ".join(unreachable)
        elif down:
            why = (
                f"{down} of {total} sentinels monitor it but see it down or below "
                "min_other_sentinels (a fail-over may be in progress)"
            )
        else:
            names = ", ".join(sorted(known)) or "nothing"
            why = (
                f"the sentinels that answered monitor no primary of that name (they "
                f"monitor {names}): check dgs_redis_master_name"
            )
        raise MasterNotFoundError(f"no Redis primary {service_name!r} found: {why}")


def sentinel_client(
    url: str,
    master_name: str | None,
    sentinel_kwargs: Mapping[str, Any] | None = None,
    **options: Any,
) -> redis.Redis:
    """The client of the primary that the sentinels of ``url`` (a ``sentinel://``
    URL, see :func:`parse_sentinel_url`) know as ``master_name``.

    ``options`` (socket timeouts, ...) apply to the primary's connections, after
    the URL's own; ``sentinel_kwargs`` to the connections to the sentinels
    (e.g. their ``password``, ``ssl``), which also get the socket timeouts of
    ``options``, at most :data:`SENTINEL_SOCKET_TIMEOUT_S`, unless it names its
    own. Nothing is connected here: the first command asks the sentinels."""
    if not isinstance(master_name, str) or not master_name:
        raise SettingsError(
            f"dgs_redis_url {redact_url(url)} is a sentinel:// URL: set "
            "dgs_redis_master_name to the primary's name the sentinels monitor "
            "(SENTINEL MONITOR <name> ...)"
        )
    if url.split("://", 1)[0].lower() != "sentinel":
        raise SettingsError(
            f"dgs_redis_master_name is set, but dgs_redis_url {redact_url(url)} is not a "
            "sentinel://host:port URL"
        )
    sentinels, primary = parse_sentinel_url(url)
    # A sentinel that does not answer must not hold up the search for long: the
    # next one is asked after at most SENTINEL_SOCKET_TIMEOUT_S.
    to_sentinels: dict[str, Any] = {
        k: min(v, SENTINEL_SOCKET_TIMEOUT_S) if isinstance(v, (int, float)) else v
        for k, v in options.items()
        if k in ("socket_timeout", "socket_connect_timeout") and v is not None
    }
    # One try per sentinel and call: discover_master already moves on to the
    # next sentinel, and the primary's client retries the whole search.
    to_sentinels["retry"] = Retry(NoBackoff(), 0)
    to_sentinels.update(sentinel_kwargs or {})
    to_sentinels["decode_responses"] = False
    manager = _Sentinel(sentinels, sentinel_kwargs=to_sentinels)  # type: ignore[no-untyped-call]
    connection_kwargs = {**primary, **options}
    ssl = bool(connection_kwargs.pop("ssl", False))
    connection_kwargs["connection_class"] = _PrimarySSLConnection if ssl else _PrimaryConnection
    client = manager.master_for(master_name, **connection_kwargs)  # type: ignore[no-untyped-call]
    return cast(redis.Redis, client)


def min_replicas_warning(client: redis.Redis, master_name: str) -> str | None:
    """``None`` when the primary ``client`` reaches has ``min-replicas-to-write``
    of at least 1; otherwise one line saying that it is 0, or that it cannot be
    read (``CONFIG`` renamed or refused by an ACL, Redis not answering)."""
    try:
        reply = cast("dict[Any, Any]", client.config_get("min-replicas-to-write"))
    except redis.RedisError as exc:
        why = f"CONFIG GET failed: {type(exc).__name__}: {exc}"
    else:
        raw = reply.get(b"min-replicas-to-write", reply.get("min-replicas-to-write"))
        try:
            value = int(str(raw, "ascii") if isinstance(raw, bytes) else str(raw))
        except ValueError:
            why = f"CONFIG GET min-replicas-to-write answered {reply!r}"
        else:
            if value >= 1:
                return _few_replicas_warning(client, master_name)
            return (
                f"the Redis primary {master_name!r} has min-replicas-to-write {value}: after a "
                "fail-over the old primary takes writes until the sentinels demote it, and two "
                "runs of one schedule can then be live at once; set min-replicas-to-write 1 on "
                f"every data server ({MIN_REPLICAS_DOC})"
            )
    return (
        f"cannot read min-replicas-to-write of the Redis primary {master_name!r} ({why}): "
        "make sure it is at least 1 on every data server, or two runs of one schedule can "
        f"be live at once after a fail-over ({MIN_REPLICAS_DOC})"
    )


#: Replicas a Sentinel primary needs: with ``min-replicas-to-write 1``, a
#: primary promoted from the only replica has none and refuses writes.
MIN_REPLICAS = 2


def _few_replicas_warning(client: redis.Redis, master_name: str) -> str | None:
    """One line when the primary has fewer than :data:`MIN_REPLICAS` replicas
    connected (``INFO replication``), else ``None`` (or when unreadable)."""
    try:
        info: dict[str, Any] = client.info("replication")
        replicas = int(info.get("connected_slaves", 0))
    except (redis.RedisError, TypeError, ValueError):
        return None
    if replicas >= MIN_REPLICAS:
        return None
    return (
        f"the Redis primary {master_name!r} has {replicas} replica(s) connected: with "
        f"min-replicas-to-write 1 it needs at least {MIN_REPLICAS}, or once it is lost the "
        "promoted replica has none and refuses writes (nothing runs) until another joins "
        f"({MIN_REPLICAS_DOC})"
    )


def log_min_replicas_warning(
    client: redis.Redis, master_name: str | None, log: logging.Logger
) -> None:
    """With a Sentinel primary (``master_name`` set), log
    :func:`min_replicas_warning`'s line, if any, as a warning on ``log``."""
    if master_name is None:
        return
    warning = min_replicas_warning(client, master_name)
    if warning is not None:
        log.warning("celery-dgs: %s", warning)
