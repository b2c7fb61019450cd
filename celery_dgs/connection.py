"""Redis clients from URLs, and Lua scripts registered once per client.

URLs: ``redis://[:password@]host[:port][/db]``, ``rediss://`` (TLS) and
``unix://``. TLS options (``ssl_cert_reqs``, ``ssl_ca_certs``, ``ssl_certfile``,
``ssl_keyfile``, ...) are passed through to redis-py; they are rejected on a
non-TLS URL, where redis-py would only fail at the first command.

Replies are bytes (``decode_responses=False``): the code that reads them decodes
what it expects and reports anything else as :class:`~celery_dgs.errors.MalformedDataError`.
"""

from __future__ import annotations

import weakref
from collections.abc import Sequence
from functools import cache
from importlib import resources
from typing import Any

import redis
from redis.commands.core import Script

from .errors import LeaseError, MalformedDataError, SettingsError

_SCHEMES = ("redis", "rediss", "unix")


def redis_from_url(url: str, **options: Any) -> redis.Redis:
    """A :class:`redis.Redis` for ``url``; ``options`` go to ``redis.Redis.from_url``.

    ``decode_responses`` is always ``False``; passing ``True`` is an error.
    """
    scheme = url.split("://", 1)[0].lower() if "://" in url else ""
    if scheme not in _SCHEMES:
        raise SettingsError(
            f"unsupported Redis URL scheme {scheme or url!r}: use one of "
            + ", ".join(f"{s}://" for s in _SCHEMES)
        )
    if options.get("decode_responses"):
        raise SettingsError("celery-dgs needs decode_responses=False on its Redis client")
    options["decode_responses"] = False
    ssl_options = sorted(k for k in options if k.startswith("ssl_"))
    if ssl_options and scheme != "rediss":
        raise SettingsError(
            f"TLS options {', '.join(ssl_options)} need a rediss:// URL, not {scheme}://"
        )
    return redis.Redis.from_url(url, **options)


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
    ``WRONGTYPE`` reply, become :class:`MalformedDataError`. Any other Redis
    failure (unreachable, read-only replica, out of memory) is a :class:`LeaseError`.
    """
    try:
        reply = scripts.get(client, name)(keys=keys, args=args)
    except redis.ResponseError as exc:
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
