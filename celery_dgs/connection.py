"""Redis clients from URLs, and Lua scripts registered once per client.

URLs: ``redis://[:password@]host[:port][/db]``, ``rediss://`` (TLS) and
``unix://``. TLS options (``ssl_cert_reqs``, ``ssl_ca_certs``, ``ssl_certfile``,
``ssl_keyfile``, ...) are passed through to redis-py; they are rejected on a
non-TLS URL, where redis-py would only fail at the first command.

With ``cluster=True`` the URL names one node of a Redis Cluster and the client
is redis-py's :class:`~redis.cluster.RedisCluster`, which finds the other nodes
and sends each command (a script: by the slot of its KEYS) to the node serving
its slot. celery-dgs calls only what both clients provide (plain commands,
registered scripts, pipelines with or without MULTI, all keys in one slot
thanks to the hash tag), so it is typed as :class:`redis.Redis`.

A ``sentinel://`` URL names the Redis Sentinels of a primary (the format of
Celery's result backend and kombu's broker: ``sentinel://[:password@]host:port[/db]``,
several separated by ``;``) and the client is redis-py's
:meth:`Sentinel.master_for <redis.sentinel.Sentinel.master_for>` of
``sentinel_master``: each new connection asks every sentinel where the primary
is (the answer with the newest configuration epoch wins), and a connection to
a server that refuses writes (``READONLY``: demoted; ``NOREPLICAS``: cut off
from its replicas under ``min-replicas-to-write``) is dropped, so after a
fail-over the next call reaches the new primary.

Replies are bytes (``decode_responses=False``): the code that reads them decodes
what it expects and reports anything else as :class:`~celery_dgs.errors.MalformedDataError`.
"""

from __future__ import annotations

import logging
import weakref
from collections.abc import Mapping, Sequence
from functools import cache
from importlib import resources
from typing import Any, cast

import redis
from redis.backoff import NoBackoff
from redis.cluster import RedisCluster
from redis.commands.core import Script
from redis.exceptions import ClusterCrossSlotError, MovedError, RedisClusterException
from redis.retry import Retry
from redis.sentinel import MasterNotFoundError, Sentinel, SentinelManagedConnection

from .errors import LeaseError, MalformedDataError, SettingsError

_SCHEMES = ("redis", "rediss", "unix", "sentinel")
#: The port of a ``sentinel://`` URL that names none (Redis Sentinel's own).
DEFAULT_SENTINEL_PORT = 26379
#: The longest socket timeout of a connection to a sentinel (seconds), unless
#: ``sentinel_kwargs`` names one: a silent sentinel delays the search for the
#: primary by that much before the next sentinel is asked.
SENTINEL_SOCKET_TIMEOUT_S = 2.0


def redis_from_url(
    url: str,
    *,
    cluster: bool = False,
    sentinel_master: str | None = None,
    sentinel_kwargs: Mapping[str, Any] | None = None,
    **options: Any,
) -> redis.Redis:
    """A :class:`redis.Redis` for ``url``; ``options`` go to ``redis.Redis.from_url``
    (``RedisCluster.from_url`` with ``cluster=True``; ``unix://`` is refused there,
    and so is a server without cluster mode, with a :class:`SettingsError`).

    A ``sentinel://`` URL needs ``sentinel_master``, the name the sentinels
    monitor; ``options`` then apply to the primary's connections and
    ``sentinel_kwargs`` (plus the socket timeouts of ``options``) to the
    sentinels' (see :func:`sentinel_client`).

    ``decode_responses`` is always ``False``; passing ``True`` is an error.
    """
    scheme = url.split("://", 1)[0].lower() if "://" in url else ""
    if scheme not in _SCHEMES:
        # The URL itself is not repeated: without a scheme it may be all password.
        found = f"scheme {scheme!r}" if scheme else "no scheme"
        raise SettingsError(
            f"unsupported Redis URL ({found}): use one of " + ", ".join(f"{s}://" for s in _SCHEMES)
        )
    if options.get("decode_responses"):
        raise SettingsError("celery-dgs needs decode_responses=False on its Redis client")
    options["decode_responses"] = False
    if scheme == "sentinel" or sentinel_master is not None:
        if cluster:
            raise SettingsError(
                "dgs_redis_cluster and Redis Sentinel exclude each other: a Sentinel "
                "primary is a single server"
            )
        return sentinel_client(url, sentinel_master, sentinel_kwargs, **options)
    ssl_options = sorted(k for k in options if k.startswith("ssl_"))
    if ssl_options and scheme != "rediss":
        raise SettingsError(
            f"TLS options {', '.join(ssl_options)} need a rediss:// URL, not {scheme}://"
        )
    if cluster:
        if scheme == "unix":
            raise SettingsError("dgs_redis_cluster needs a redis:// or rediss:// node URL")
        try:
            # The cluster client reads the slot map from the node at once.
            client = RedisCluster.from_url(url, **options)
        except RedisClusterException as exc:
            if "cluster mode is not enabled" in str(exc).lower():
                raise SettingsError(
                    f"dgs_redis_cluster is on, but the Redis at {redact_url(url)} runs "
                    "without cluster mode: set dgs_redis_cluster = False"
                ) from None
            # Not a RedisError: raised as one, so that an unreachable cluster is
            # handled like an unreachable server (runs skipped until it answers).
            raise redis.ConnectionError(f"Redis Cluster at {redact_url(url)}: {exc}") from exc
        return cast(redis.Redis, client)
    return redis.Redis.from_url(url, **options)


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


#: What a multi-key call's failure means when the keys span cluster slots.
CROSSSLOT_ADVICE = (
    "CROSSSLOT: its keys {keys} hash to different Redis Cluster slots, and a script "
    "or transaction may only touch one slot; set dgs_redis_cluster_hash_tag = True "
    "(with dgs_redis_cluster = True) so every celery-dgs key shares the slot of its "
    "prefix"
)


def cluster_misconfiguration(exc: BaseException, keys: Sequence[str]) -> str | None:
    """The one-line explanation of ``exc`` when it comes from using a Redis Cluster
    without the settings it needs, else ``None``: keys in several slots (the
    server's CROSSSLOT, or the cluster client's refusal to send such a call), or
    a plain client talking to a cluster node (MOVED)."""
    if isinstance(exc, ClusterCrossSlotError) or (
        isinstance(exc, RedisClusterException) and "same key slot" in str(exc)
    ):
        return CROSSSLOT_ADVICE.format(keys=list(keys))
    if isinstance(exc, MovedError):
        return (
            f"MOVED ({exc}): this Redis is a node of a Redis Cluster; set "
            "dgs_redis_cluster = True and dgs_redis_cluster_hash_tag = True"
        )
    return None


@cache
def _read_source(package: str, directory: str, name: str, prelude: str | None) -> str:
    root = resources.files(package).joinpath(directory)
    body = root.joinpath(name).read_text(encoding="utf-8")
    if prelude is None:
        return body
    return root.joinpath(prelude).read_text(encoding="utf-8") + "\n" + body


class ScriptSet:
    """The Lua files in ``directory`` of ``package``, registered once per client.

    ``prelude`` (a file in the same directory) is prepended to every script, so
    shared helpers are written once. ``get(client, name)`` returns a redis-py
    :class:`~redis.commands.core.Script`: EVALSHA, loading the script again by
    itself after a server restart emptied the script cache.
    """

    def __init__(self, package: str, directory: str, *, prelude: str | None = None) -> None:
        self.package = package
        self.directory = directory
        self.prelude = prelude
        self._registered: weakref.WeakKeyDictionary[redis.Redis, dict[str, Script]] = (
            weakref.WeakKeyDictionary()
        )

    def source(self, name: str) -> str:
        """The full text of script ``name`` (prelude included)."""
        return _read_source(self.package, self.directory, name, self.prelude)

    def get(self, client: redis.Redis, name: str) -> Script:
        scripts = self._registered.setdefault(client, {})
        script = scripts.get(name)
        if script is None:
            script = scripts[name] = client.register_script(self.source(name))
        return script


def call_script(
    scripts: ScriptSet,
    client: redis.Redis,
    name: str,
    keys: Sequence[str],
    args: Sequence[str | int | bytes],
) -> list[Any]:
    """Run script ``name`` (one round trip) and map failures to celery-dgs errors.

    Scripts report foreign data as ``{"MALFORMED", key, reason}``; that, and a
    ``WRONGTYPE`` reply, become :class:`MalformedDataError`. Keys spread over
    cluster slots fail with the settings that fix it (:func:`cluster_misconfiguration`).
    Any other Redis failure (unreachable, read-only replica, out of memory) is a
    :class:`LeaseError`.
    """
    try:
        reply = scripts.get(client, name)(keys=keys, args=args)
    except (redis.ResponseError, RedisClusterException) as exc:
        advice = cluster_misconfiguration(exc, keys)
        if advice is not None:
            raise LeaseError(f"{name} failed: {advice}") from exc
        if str(exc).startswith("WRONGTYPE"):
            raise MalformedDataError(f"{name}: foreign data under {list(keys)}: {exc}") from exc
        raise LeaseError(f"{name} failed: {exc}") from exc
    except redis.RedisError as exc:
        raise LeaseError(f"{name} failed: {type(exc).__name__}: {exc}") from exc
    if not isinstance(reply, list):
        raise LeaseError(f"{name} returned {reply!r}, expected a list")
    if reply and reply[0] == b"MALFORMED":
        key, reason = (_text(part) for part in reply[1:3])
        raise MalformedDataError(f"Redis key {key!r}: {reason}")
    return reply


def _text(value: Any) -> str:
    return value.decode("utf-8", "replace") if isinstance(value, bytes) else str(value)


def redact_url(url: str) -> str:
    """``url`` with any password replaced by ``**`` (safe to log): the one in
    the user part and a ``password=`` query parameter (redis-py takes both).
    Each ``;``-separated part of a ``sentinel://`` URL is redacted."""
    from urllib.parse import parse_qsl, urlencode, urlsplit, urlunsplit

    if ";" in url and url.split("://", 1)[0].lower() == "sentinel":
        return ";".join(redact_url(part) for part in url.split(";"))

    try:
        parts = urlsplit(url)
        password, port = parts.password, parts.port
    except ValueError:
        return "<unparsable URL>"
    if password is not None:
        user = parts.username or ""
        host = parts.hostname or ""
        if ":" in host:  # IPv6
            host = f"[{host}]"
        netloc = f"{user}:**@{host}" + (f":{port}" if port is not None else "")
        parts = parts._replace(netloc=netloc)
    query = parse_qsl(parts.query, keep_blank_values=True)
    in_query = any(key.lower() == "password" for key, _ in query)
    if in_query:
        masked = [(k, "**" if k.lower() == "password" else v) for k, v in query]
        parts = parts._replace(query=urlencode(masked, safe="*"))
    return urlunsplit(parts) if password is not None or in_query else url


def _chain(exc: BaseException) -> list[BaseException]:
    """``exc`` and the exceptions it was raised from or during, outermost first."""
    seen: list[BaseException] = []
    current: BaseException | None = exc
    while current is not None and all(current is not s for s in seen):
        seen.append(current)
        current = current.__cause__ or current.__context__
    return seen


#: Words of a database driver's message that mean its credentials were refused.
_DB_AUTH_WORDS = ("password authentication failed", "authentication failed", "access denied")


def connection_failure(exc: BaseException) -> tuple[str, bool] | None:
    """What ``exc`` says about reaching Redis or the database, or ``None`` when it
    is not a connection failure (a bug, bad data).

    Returns ``(service, refused)``: ``service`` is ``"redis"`` or ``"database"``;
    ``refused`` is True when the server answered but refused the credentials (a
    configuration error: retrying cannot help), False when it could not be
    reached or timed out (it may come back)."""
    from sqlalchemy import exc as sa_exc

    for err in _chain(exc):
        if isinstance(err, redis.AuthenticationError):
            return "redis", True
        if isinstance(err, (redis.ConnectionError, redis.TimeoutError)):
            return "redis", False
        if isinstance(err, (sa_exc.OperationalError, sa_exc.InterfaceError)) or (
            isinstance(err, sa_exc.DBAPIError) and err.connection_invalidated
        ):
            text = str(err.orig if isinstance(err, sa_exc.DBAPIError) else err).lower()
            return "database", any(word in text for word in _DB_AUTH_WORDS)
    return None


def failure_summary(exc: BaseException) -> str:
    """One line saying what failed (no traceback): the Redis client's error, or
    the database driver's, when ``exc`` wraps one."""
    from sqlalchemy import exc as sa_exc

    shown: BaseException = exc
    for err in _chain(exc):
        if isinstance(err, redis.RedisError):
            shown = err
            break
        if isinstance(err, sa_exc.DBAPIError):
            # The driver's own message; SQLAlchemy appends the statement and a link.
            shown = err.orig if isinstance(err.orig, BaseException) else err
            break
    text = " ".join(str(shown).split()) or type(shown).__name__
    return f"{type(shown).__name__}: {text}"


def explain_failure(
    exc: BaseException, *, redis_url: str | None, redis_setting: str, database_url: str
) -> tuple[str, bool] | None:
    """``(one line, refused)`` for a failure to reach Redis or the database, naming
    the server (password redacted) and the setting it comes from; ``None`` when
    ``exc`` is no connection failure. ``refused``: wrong credentials."""
    failure = connection_failure(exc)
    if failure is None:
        return None
    service, refused = failure
    if service == "redis":
        where = f"Redis at {redact_url(redis_url or '?')} ({redis_setting})"
    else:
        where = f"the database at {redact_url(database_url)} (dgs_database_url)"
    summary = failure_summary(exc)
    if refused:
        setting = redis_setting if service == "redis" else "dgs_database_url"
        return f"{where} refused the credentials ({summary}): fix the password in {setting}", True
    return f"{where} is unreachable ({summary})", False


def log_failure(log: logging.Logger, exc: BaseException, message: str, *args: Any) -> None:
    """Log ``message % args`` at ERROR: with the traceback for an unexpected
    error, as one line naming the cause when Redis or the database could not be
    reached (it says all there is to say, and may repeat for every run)."""
    if connection_failure(exc) is None:
        log.error(message, *args, exc_info=exc)
    else:
        log.error(message + " (%s)", *args, failure_summary(exc))
