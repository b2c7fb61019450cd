"""Keeping the configured passwords out of the page: every error text shown
or logged is scrubbed of them."""

from __future__ import annotations

from collections.abc import Mapping
from urllib.parse import parse_qsl, unquote, urlsplit

from ..ops.env import Env


def secrets_of(env: Env) -> list[str]:
    """The passwords of the configured connections, longest first: in each
    ``;``-separated part of the URLs (Redis, broker, database), as their user
    part or a ``password=`` query parameter, and in the sentinels' options
    (``dgs_redis_sentinel_kwargs``, the broker's ``sentinel_kwargs``)."""
    settings, conf = env.settings, env.app.conf
    found: set[str] = set()
    for url in (settings.database_url, settings.redis_url, conf.broker_url):
        if isinstance(url, str):
            found.update(url_passwords(url))
    transport = conf.broker_transport_options or {}
    for options in (settings.redis_sentinel_kwargs, transport.get("sentinel_kwargs")):
        if isinstance(options, Mapping):
            found.update(str(v) for k, v in options.items() if "password" in str(k).lower() and v)
    return sorted(found, key=lambda s: (-len(s), s))


def url_passwords(url: str) -> list[str]:
    """Every password of ``url``'s ``;``-separated parts (raw and %-decoded)."""
    found = []
    for part in url.split(";"):
        try:
            parts = urlsplit(part.strip())
        except ValueError:
            continue
        userinfo = parts.netloc.rpartition("@")[0]
        if ":" in userinfo:
            found.append(userinfo.partition(":")[2])
        found += [
            v for k, v in parse_qsl(parts.query, keep_blank_values=True) if k.lower() == "password"
        ]
    decoded = [unquote(p) for p in found]
    return [p for p in dict.fromkeys(found + decoded) if p]


def scrub(text: str, secrets: list[str]) -> str:
    """``text`` with each of ``secrets`` (longest first) replaced by ``***``."""
    for secret in sorted(secrets, key=len, reverse=True):
        text = text.replace(secret, "***")
    return text
