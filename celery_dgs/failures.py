"""Failures explained in one line, and URLs made safe to log.

:func:`log_failure` logs an error with its traceback when it is unexpected, and
as one line naming the cause when Redis or the database could not be reached;
:func:`explain_failure` names the server (password redacted by
:func:`redact_url`) and the setting it comes from; :func:`cluster_misconfiguration`
names the settings a Redis Cluster needs when a call fails for want of them.
"""

from __future__ import annotations

import logging
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import redis
from redis.exceptions import ClusterCrossSlotError, MovedError, RedisClusterException
from redis.sentinel import MasterNotFoundError


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
    if "@" in parts.path:  # a password's '/' not percent-encoded: the rest is in the path
        return f"{parts.scheme}://**@{url.rpartition('@')[2]}"
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


#: Words of a Sentinel failure (celery_dgs.sentinel) that mean a setting is wrong.
_SENTINEL_SETTING_WORDS = ("refused the credentials", "monitor no primary of that name")

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


def no_such_database(err: BaseException) -> bool:
    """Redis's answer to a ``SELECT`` of a database number it does not have."""
    return isinstance(err, redis.ResponseError) and "db index is out of range" in str(err).lower()


def _has_password(url: str | None) -> bool:
    """Whether a Redis URL gives a password (in its user part or its query)."""
    from urllib.parse import parse_qsl, urlsplit

    if not url:
        return False
    if url.lower().startswith("sentinel"):
        return True  # the primary's password may come with the Sentinel settings
    try:
        parts = urlsplit(url)
        query = parse_qsl(parts.query)
        return parts.password is not None or any(k.lower() == "password" for k, _ in query)
    except ValueError:
        return True  # unparsable: say nothing of its password


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
    redis_where = f"Redis at {redact_url(redis_url or '?')} ({redis_setting})"
    for err in _chain(exc):
        advice = cluster_misconfiguration(err, [])
        if advice is not None:  # settings a Redis Cluster needs: no retry helps
            return f"{redis_where}: {advice}", True
        if isinstance(err, MasterNotFoundError) and any(
            words in str(err) for words in _SENTINEL_SETTING_WORDS
        ):  # the sentinels answered: their password or the primary's name is wrong
            return f"{redis_where}: {err}", True
    if any(no_such_database(err) for err in _chain(exc)):
        return (
            f"{redis_where} has no such database ({failure_summary(exc)}): fix the "
            f"database number in {redis_setting}",
            True,
        )
    failure = connection_failure(exc)
    if failure is None:
        return None
    service, refused = failure
    if service == "redis":
        where = redis_where
        if refused and not _has_password(redis_url):
            return f"{where} requires a password, and {redis_setting} gives none", True
    else:
        where = f"the database at {redact_url(database_url)} (dgs_database_url)"
    summary = failure_summary(exc)
    if service != "redis":
        missing = missing_sqlite_directory(database_url)
        if missing is not None:
            summary += f": {missing}"
    if refused:
        setting = redis_setting if service == "redis" else "dgs_database_url"
        return f"{where} refused the credentials ({summary}): fix the password in {setting}", True
    if service == "redis" and "certificate verify failed" in summary.lower():
        return (
            f"{where}: its TLS certificate is not trusted ({summary}): give the CA that signed "
            f"it, e.g. ?ssl_ca_certs=/path/ca.pem in {redis_setting}",
            True,
        )
    if service == "redis" and ("noreplicas" in summary.lower() or "readonly" in summary.lower()):
        return (
            f"{where} refuses writes for now ({summary}): a fail-over in progress, or the "
            "primary cut off from its replicas",
            False,
        )
    if (
        service == "redis"
        and (redis_url or "").lower().startswith("redis://")
        and ("connection reset by peer" in summary.lower())
    ):
        summary += "; if the server speaks only TLS, use a rediss:// URL"
    return f"{where} is unreachable ({summary})", False


def missing_sqlite_directory(url: str) -> str | None:
    """What is wrong when ``url`` names a SQLite file whose directory does not
    exist (SQLite creates the file, not its directory, and says only "unable
    to open database file"); ``None`` otherwise."""
    from sqlalchemy.engine import make_url
    from sqlalchemy.exc import ArgumentError

    try:
        parsed = make_url(url)
    except (ArgumentError, ValueError, TypeError):
        return None
    database = parsed.database
    if parsed.get_backend_name() != "sqlite" or database in (None, "", ":memory:"):
        return None
    if parsed.query.get("uri"):
        return None
    path = Path(str(database))
    directory = path if path.is_absolute() else Path.cwd() / path
    if directory.parent.is_dir():
        return None
    relative = "" if path.is_absolute() else f" (a relative path, read from {Path.cwd()})"
    return (
        f"the directory {str(directory.parent)!r} of the SQLite file does not exist"
        f"{relative}: SQLite creates the file, not its directory"
    )


def log_failure(log: logging.Logger, exc: BaseException, message: str, *args: Any) -> None:
    """Log ``message % args`` at ERROR: with the traceback for an unexpected
    error, as one line naming the cause when Redis or the database could not be
    reached (it says all there is to say, and may repeat for every run)."""
    if connection_failure(exc) is None:
        log.error(message, *args, exc_info=exc)
    else:
        log.error(message + " (%s)", *args, failure_summary(exc))


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
