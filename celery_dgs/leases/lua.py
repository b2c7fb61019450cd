"""The Lua scripts of ``scripts/``, registered once per Redis client, and the
call of one script with its failures mapped to celery-dgs errors."""

from __future__ import annotations

import weakref
from collections.abc import Sequence
from functools import cache
from importlib import resources
from typing import Any

import redis
from redis.commands.core import Script
from redis.exceptions import RedisClusterException

from ..errors import LeaseError, MalformedDataError
from ..failures import cluster_misconfiguration


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
    cluster slots fail with the settings that fix it
    (:func:`~celery_dgs.failures.cluster_misconfiguration`).
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


SCRIPTS = ScriptSet("celery_dgs.leases", "scripts", prelude="_prelude.lua")
