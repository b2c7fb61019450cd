"""Redis clients from URLs.

URLs: ``redis://[:password@]host[:port][/db]``, ``rediss://`` (TLS),
``unix://`` and ``sentinel://`` (:mod:`celery_dgs.sentinel`). TLS options
(``ssl_cert_reqs``, ``ssl_ca_certs``, ``ssl_certfile``, ``ssl_keyfile``, ...)
are passed through to redis-py (``ssl_cert_reqs`` also as ``CERT_REQUIRED``
and the other ``ssl`` module names kombu accepts); they are rejected on a non-TLS URL, where
redis-py would only fail at the first command. The TLS handshake must end
within the connect timeout, and at most :data:`TLS_HANDSHAKE_TIMEOUT_S`: a
server that does not speak TLS never answers one, and the client then fails
with one line saying so instead of waiting out its read timeout.

With ``cluster=True`` the URL names one node of a Redis Cluster and the client
is redis-py's :class:`~redis.cluster.RedisCluster`, which finds the other nodes
and sends each command (a script: by the slot of its KEYS) to the node serving
its slot. celery-dgs calls only what both clients provide (plain commands,
registered scripts, pipelines with or without MULTI, all keys in one slot
thanks to the hash tag), so it is typed as :class:`redis.Redis`.

Replies are bytes (``decode_responses=False``): the code that reads them decodes
what it expects and reports anything else as :class:`~celery_dgs.errors.MalformedDataError`.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, cast
from urllib.parse import parse_qsl, urlencode, urlsplit, urlunsplit

import redis
from redis.cluster import RedisCluster
from redis.exceptions import RedisClusterException

from .errors import SettingsError
from .failures import redact_url
from .sentinel import sentinel_client
from .setting_checks import url_string

#: The longest a TLS handshake with Redis may take (the connect timeout when
#: it is shorter).
TLS_HANDSHAKE_TIMEOUT_S = 10.0


class HandshakeTimedSSLConnection(redis.SSLConnection):
    """redis-py's TLS connection, whose handshake is bounded by the connect
    timeout (at most :data:`TLS_HANDSHAKE_TIMEOUT_S`) instead of the read
    timeout; a handshake that does not finish is a connection error naming TLS."""

    def _handshake_limit(self) -> float:
        return min(self.socket_connect_timeout or TLS_HANDSHAKE_TIMEOUT_S, TLS_HANDSHAKE_TIMEOUT_S)

    @staticmethod
    def _no_handshake(limit: float) -> OSError:
        # redis-py words it "Error <first> connecting to <host:port>. <second>."
        return OSError(
            "in the TLS handshake",
            f"No answer within {limit:g} s: is the server serving TLS on this port "
            "(rediss:// needs a TLS port, redis:// a plain one)",
        )

    def _wrap_socket_with_ssl(self, sock: Any) -> Any:
        """The handshake alone (the hook newer redis-py releases call)."""
        limit = self._handshake_limit()
        sock.settimeout(limit)
        try:
            wrapped = super()._wrap_socket_with_ssl(sock)  # type: ignore[no-untyped-call]
        except TimeoutError:
            raise self._no_handshake(limit) from None
        wrapped.settimeout(self.socket_timeout)
        return wrapped

    def _connect(self) -> Any:
        """The connection; before redis-py has the handshake hook, the whole
        connect and handshake are bounded by the handshake's limit."""
        if hasattr(redis.SSLConnection, "_wrap_socket_with_ssl"):
            return super()._connect()  # type: ignore[no-untyped-call]
        limit, read_timeout = self._handshake_limit(), self.socket_timeout
        self.socket_timeout = limit
        try:
            sock = super()._connect()  # type: ignore[no-untyped-call]
        except TimeoutError:
            raise self._no_handshake(limit) from None
        finally:
            self.socket_timeout = read_timeout
        sock.settimeout(read_timeout)
        return sock


#: ``ssl_cert_reqs`` as redis-py reads it in a URL, by each spelling accepted:
#: redis-py's own, and the ``ssl`` module's names that Celery's docs and kombu use.
_CERT_REQS = {
    "none": "none",
    "optional": "optional",
    "required": "required",
    "cert_none": "none",
    "cert_optional": "optional",
    "cert_required": "required",
}


def cert_reqs_spelt_for_redis_py(url: str) -> str:
    """``url`` with its ``ssl_cert_reqs`` query value as redis-py spells it
    (``CERT_REQUIRED`` -> ``required``, as kombu accepts it); a value neither
    spells is a :class:`SettingsError` naming it."""
    parts = urlsplit(url)
    if "ssl_cert_reqs" not in parts.query:
        return url
    query = parse_qsl(parts.query, keep_blank_values=True)
    spelt = []
    for key, value in query:
        if key == "ssl_cert_reqs":
            known = _CERT_REQS.get(value.lower())
            if known is None:
                raise SettingsError(
                    f"the Redis URL's ssl_cert_reqs={value!r} is not one of none, optional, "
                    "required (or CERT_NONE, CERT_OPTIONAL, CERT_REQUIRED)"
                )
            value = known
        spelt.append((key, value))
    return urlunsplit(parts._replace(query=urlencode(spelt, safe="/:")))


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
    sentinels' (see :func:`~celery_dgs.sentinel.sentinel_client`).

    ``decode_responses`` is always ``False``; passing ``True`` is an error.
    """
    url_string("the Redis URL", url)
    scheme = url.split("://", 1)[0].lower()
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
    url = cert_reqs_spelt_for_redis_py(url)
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
            if "can only be 0 in cluster mode" in str(exc):
                raise SettingsError(
                    f"dgs_redis_cluster is on, and a Redis Cluster has only database 0: drop "
                    f"the database number from {redact_url(url)}"
                ) from None
            if "cluster mode is not enabled" in str(exc).lower():
                raise SettingsError(
                    f"dgs_redis_cluster is on, but the Redis at {redact_url(url)} runs "
                    "without cluster mode: set dgs_redis_cluster = False"
                ) from None
            # Not a RedisError: raised as one, so that an unreachable cluster is
            # handled like an unreachable server (runs skipped until it answers).
            raise redis.ConnectionError(f"Redis Cluster at {redact_url(url)}: {exc}") from exc
        return cast(redis.Redis, client)
    if scheme == "rediss":
        options.setdefault("connection_class", HandshakeTimedSSLConnection)
    return redis.Redis.from_url(url, **options)
