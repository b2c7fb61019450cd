"""Keeping secrets out of the page.

Every free text the page shows or logs (a run's error, a condition's
message, an action's problem, the reason of a 503) goes through
:func:`scrub`: the passwords of the configured connections, the password of
any URL in it (in its user part or a ``password=`` parameter, as the logs
redact URLs) and the value after a credential-like word (``password=...``,
``api_key: ...``, ``Authorization: Bearer ...``) become ``***``. A
schedule's arguments, to a reader who has not signed in, go through
:func:`redact_value`: a value under a credential-like key is ``***``, every
string is scrubbed.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from typing import Any
from urllib.parse import parse_qsl, unquote, urlsplit

from ..ops.env import Env

#: What replaces a secret.
HIDDEN = "***"

#: A key (or a word in text) naming a credential: password, passwd, pwd,
#: secret, token, api key, access key, private key, auth(orization),
#: credential(s), cookie, session id, signature, dsn.
_CREDENTIAL = (
    r"pass(?:word|wd)?|pwd|secret|token|api[-_]?key|access[-_]?key|private[-_]?key"
    r"|auth(?:orization)?|credentials?|cookie|session[-_]?id|signature|dsn"
)
_CREDENTIAL_KEY = re.compile(rf"(?:{_CREDENTIAL})", re.IGNORECASE)
#: In text: a credential word (possibly part of a longer name, possibly quoted),
#: ``:`` or ``=``, an optional auth scheme word (``Bearer``), then the value.
_CREDENTIAL_IN_TEXT = re.compile(
    rf"(?P<key>[\w-]*(?:{_CREDENTIAL})[\w-]*[\"']?\s*[:=]\s*[\"']?(?:(?:bearer|basic|token)\s+)?)"
    r"(?P<value>[^\s\"',;&)}\]]+)",
    re.IGNORECASE,
)


#: A URL inside free text: a scheme, ``://`` and everything up to a space or quote.
_URL_IN_TEXT = re.compile(r"[A-Za-z][A-Za-z0-9+.-]*://[^\s'\"<>`]+")
#: The password of a URL's user part (``scheme://user:password@``).
_URL_USER_PASSWORD = re.compile(r"^([^/?#:@]*:)[^/?#]*(@)")
#: A ``password=`` query parameter's value.
_URL_PASSWORD_PARAM = re.compile(r"([?&;]password=)[^&#]*", re.IGNORECASE)


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
    """``text`` with each of ``secrets`` (longest first), the password of each
    URL and the value after each credential-like word replaced by ``***``."""
    for secret in sorted(secrets, key=len, reverse=True):
        text = text.replace(secret, HIDDEN)
    text = _URL_IN_TEXT.sub(_redact_url, text)
    return _CREDENTIAL_IN_TEXT.sub(lambda m: m.group("key") + HIDDEN, text)


def _redact_url(match: re.Match[str]) -> str:
    """One URL found in text with the password of each ``;``-separated part
    (its user part, a ``password=`` parameter) replaced by ``***``."""
    parts = []
    for part in match.group(0).split(";"):
        scheme, sep, rest = part.partition("://")
        if sep:
            rest = _URL_USER_PASSWORD.sub(rf"\g<1>{HIDDEN}\g<2>", rest, count=1)
        parts.append(scheme + sep + _URL_PASSWORD_PARAM.sub(rf"\g<1>{HIDDEN}", rest))
    return ";".join(parts)


def looks_secret(key: str) -> bool:
    """Whether an argument's key names a credential (``password``, ``api_key``,
    ``auth_token``, ...)."""
    return _CREDENTIAL_KEY.search(key) is not None


def redact_value(value: Any, secrets: list[str], key: str = "") -> Any:
    """``value`` (an argument, or one under ``key``) as a reader who has not
    signed in sees it: ``***`` under a credential-like key, every string
    scrubbed (:func:`scrub`), mappings and sequences item by item."""
    if key and looks_secret(key) and value not in (None, "", b""):
        return HIDDEN
    if isinstance(value, str):
        return scrub(value, secrets)
    if isinstance(value, Mapping):
        return {k: redact_value(v, secrets, str(k)) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [redact_value(v, secrets) for v in value]
    return value


class Scrubber:
    """:func:`scrub` and :func:`redact_value` with the configured passwords,
    for the templates."""

    def __init__(self, secrets: list[str]) -> None:
        self.secrets = secrets

    def text(self, text: str | None) -> str:
        return scrub(text or "", self.secrets)

    def arguments(
        self, args: Any, kwargs: Mapping[str, Any], full: bool
    ) -> tuple[list[Any], dict[str, Any]]:
        """A schedule's ``args`` and ``kwargs`` as shown: as they are to a
        signed-in operator (``full``), else redacted."""
        if full:
            return list(args), dict(kwargs)
        return list(redact_value(list(args), self.secrets)), redact_value(
            dict(kwargs), self.secrets
        )
