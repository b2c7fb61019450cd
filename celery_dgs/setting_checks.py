"""The check of each ``dgs_*`` setting's own value, declared on its field.

A field of :class:`~celery_dgs.settings.DgsSettings` names its check in its
metadata (``field(metadata=SECONDS)``, ``field(metadata=setting(flag))``, ...).
:func:`checked_fields` lists them in field order; each check takes the setting's
name (``dgs_...``) and value, and returns the value to keep (a duration as a
float of seconds, the backoff delays as a tuple) or raises a
:class:`~celery_dgs.errors.SettingsError` naming the setting. Checks that
relate several settings are methods of ``DgsSettings`` and run after these.
"""

from __future__ import annotations

import dataclasses
import ipaddress
import math
import re
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from datetime import timedelta
from typing import Any
from urllib.parse import urlsplit

from .core.durations import parse_duration
from .core.fewest_errors import OVERLOAD_GOALS
from .core.items import check_threshold
from .core.overload import OVERLOAD_POLICIES
from .core.timing import validate_cooldown_fraction
from .errors import SettingsError

#: The longest duration setting, in seconds (100 years): longer ones overflow
#: sleeps and Redis expiries.
MAX_SETTING_SECONDS = 100 * 365 * 86400.0
#: The largest batch a ``*_batch_size`` setting may ask the database for.
MAX_BATCH_SIZE = 1_000_000
#: The shortest ``dgs_web_token`` accepted: a short token is guessable.
MIN_WEB_TOKEN_LENGTH = 16

#: The metadata key of a field's :class:`FieldCheck`.
CHECK_KEY = "dgs_check"


@dataclass(frozen=True)
class FieldCheck:
    """How one setting's value is checked. ``optional``: ``None`` is a value
    (off, or no value), kept as it is; in ``app.conf`` it is then not "use
    the default"."""

    check: Callable[[str, Any], Any]
    optional: bool = False

    def __call__(self, name: str, value: Any) -> Any:
        if value is None and self.optional:
            return None
        return self.check(name, value)


def setting(check: Callable[[str, Any], Any], *, optional: bool = False) -> dict[str, FieldCheck]:
    """The field metadata that names ``check`` as the setting's check."""
    return {CHECK_KEY: FieldCheck(check, optional)}


def checked_fields(cls: type) -> tuple[tuple[str, FieldCheck], ...]:
    """``(field name, check)`` of every field of dataclass ``cls`` that declares
    one, in field order."""
    return tuple(
        (f.name, f.metadata[CHECK_KEY]) for f in dataclasses.fields(cls) if CHECK_KEY in f.metadata
    )


def redacted(url: str) -> str:
    """``url`` with the password of its user part replaced by ``**``."""
    scheme, sep, rest = url.partition("://")
    auth, at, host = rest.rpartition("@")
    if not at or ":" not in auth:
        return url
    return f"{scheme}{sep}{auth.split(':', 1)[0]}:**@{host}"


def seconds(name: str, value: Any, *, allow_zero: bool = False) -> float:
    """A duration (a number of seconds, a timedelta, or text as the command
    line takes it: ``"30d"``, ``"1h30m"``) > 0, or >= 0 with ``allow_zero``,
    at most :data:`MAX_SETTING_SECONDS`."""
    if isinstance(value, str):
        try:
            value = parse_duration(value)
        except ValueError as exc:
            raise SettingsError(f"{name}: {exc}") from None
    if isinstance(value, timedelta):
        value = value.total_seconds()
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        raise SettingsError(
            f"{name} must be a number of seconds, a timedelta or a duration such as '30d', "
            f"got {value!r}"
        )
    if not math.isfinite(value) or value < 0 or (value == 0 and not allow_zero):
        raise SettingsError(f"{name} must be {'>= 0' if allow_zero else '> 0'}, got {value!r}")
    if value > MAX_SETTING_SECONDS:
        raise SettingsError(
            f"{name} must be at most {MAX_SETTING_SECONDS:.0f} seconds (100 years), got {value!r}"
        )
    return float(value)


def seconds_or_zero(name: str, value: Any) -> float:
    return seconds(name, value, allow_zero=True)


def delays(name: str, value: Any) -> tuple[float, ...]:
    """A non-empty list of durations, as a tuple of seconds."""
    if not isinstance(value, (list, tuple)):
        raise SettingsError(
            f"{name} must be a list of delays in seconds, e.g. [300, 3600], got {value!r}"
        )
    found = tuple(seconds(name, v) for v in value)
    if not found:
        raise SettingsError(f"{name} must list at least one delay")
    return found


def positive_int(name: str, value: Any) -> int:
    if isinstance(value, bool) or not isinstance(value, int) or value < 1:
        raise SettingsError(f"{name} must be a positive integer, got {value!r}")
    return value


def batch_size(name: str, value: Any) -> int:
    """A positive integer of at most :data:`MAX_BATCH_SIZE` rows."""
    size = positive_int(name, value)
    if size > MAX_BATCH_SIZE:
        raise SettingsError(f"{name} must be at most {MAX_BATCH_SIZE}, got {value!r}")
    return size


def weight(name: str, value: Any) -> Any:
    """A number in (0, 1]."""
    if not 0.0 < value <= 1.0:
        raise SettingsError(f"{name} must be in (0, 1], got {value!r}")
    return value


def item_share(name: str, value: Any) -> float:
    """A share of a run's items in (0, 1] (:func:`~celery_dgs.core.items.check_threshold`)."""
    try:
        return check_threshold(value)
    except ValueError as exc:
        raise SettingsError(f"{name} {exc}") from None


def non_negative(name: str, value: Any) -> Any:
    """A finite number >= 0."""
    if (
        isinstance(value, bool)
        or not isinstance(value, (int, float))
        or not 0.0 <= value < math.inf
    ):
        raise SettingsError(f"{name} must be a finite number >= 0, got {value!r}")
    return value


def flag(name: str, value: Any) -> bool:
    if not isinstance(value, bool):
        raise SettingsError(f"{name} must be True or False, got {value!r}")
    return value


def tcp_port(name: str, value: Any) -> int:
    if isinstance(value, bool) or not isinstance(value, int) or not 0 < value < 65536:
        raise SettingsError(f"{name} must be a TCP port, got {value!r}")
    return value


def policy_name(name: str, value: Any) -> Any:
    if value not in OVERLOAD_POLICIES:
        raise SettingsError(f"{name} must be one of {', '.join(OVERLOAD_POLICIES)}, got {value!r}")
    return value


def overload_goal(name: str, value: Any) -> Any:
    if value not in OVERLOAD_GOALS:
        raise SettingsError(f"{name} must be one of {', '.join(OVERLOAD_GOALS)}, got {value!r}")
    return value


def periods_at_least_one(name: str, value: Any) -> float:
    if (
        isinstance(value, bool)
        or not isinstance(value, (int, float))
        or not math.isfinite(value)
        or value < 1
    ):
        raise SettingsError(f"{name} must be a number of periods >= 1, got {value!r}")
    return float(value)


def cooldown_fraction(name: str, value: Any) -> float:
    try:
        return validate_cooldown_fraction(value)
    except ValueError:
        raise SettingsError(
            f"{name} must be a fraction of the period in [0, 1), got {value!r}"
        ) from None


def text(what: str) -> Callable[[str, Any], str]:
    """The check of a non-empty string, described as ``what`` when it is not one."""

    def check(name: str, value: Any) -> str:
        if not isinstance(value, str) or not value:
            raise SettingsError(f"{name} must be {what}, got {value!r}")
        return value

    return check


def non_empty_string(name: str, value: Any) -> str:
    if not isinstance(value, str) or not value:
        raise SettingsError(f"{name} must be a non-empty string")
    return value


#: The schemes of a Redis URL celery-dgs connects to.
REDIS_SCHEMES = ("redis", "rediss", "unix", "sentinel")


def url_string(name: str, value: Any) -> str:
    """A Redis URL string with a scheme of :data:`REDIS_SCHEMES` whose port (if
    any) parses; a ``sentinel://`` URL (several URLs) is read part by part with
    the Sentinel settings."""
    if not isinstance(value, str):
        raise SettingsError(f"{name} must be a redis:// URL string, got {value!r}")
    scheme = value.split("://", 1)[0].lower() if "://" in value else ""
    if scheme not in REDIS_SCHEMES:
        # The URL itself is not repeated: without a scheme it may be all password.
        found = f"scheme {scheme!r}" if scheme else "no scheme"
        raise SettingsError(
            f"{name} is not a Redis URL ({found}): use one of "
            + ", ".join(f"{s}://" for s in REDIS_SCHEMES)
        )
    if scheme == "sentinel":
        return value
    if scheme != "unix" and "@" in urlsplit(value).path:
        # The URL itself is not repeated: part of its password would show.
        raise SettingsError(
            f"{name} has an '@' past its host: a password holding '@', '/', ':', '?' or "
            "'#' must be percent-encoded (%40, %2F, %3A, %3F, %23)"
        )
    try:
        urlsplit(value).port  # noqa: B018 - parsing the port is the check
    except ValueError as exc:
        masked = urlsplit(value)._replace(netloc=urlsplit(value).netloc.rpartition("@")[2])
        raise SettingsError(f"{name} {masked.geturl()!r}: {exc}") from None
    return value


def master_name(name: str, value: Any) -> str:
    if not isinstance(value, str) or not value.strip():
        raise SettingsError(
            f"{name} must be the primary's name the sentinels monitor, got {value!r}"
        )
    return value


def option_mapping(name: str, value: Any) -> Mapping[str, Any]:
    if not isinstance(value, Mapping) or not all(isinstance(k, str) for k in value):
        raise SettingsError(
            f"{name} must be a mapping of connection options for the "
            f"sentinels, e.g. {{'password': '...'}}, got {type(value).__name__}"
        )
    return value


def secret_token(name: str, value: Any) -> str:
    if not isinstance(value, str) or len(value) < MIN_WEB_TOKEN_LENGTH:
        raise SettingsError(
            f"{name} must be a string of at least {MIN_WEB_TOKEN_LENGTH} characters "
            "(or None: the status page is read-only)"
        )
    return value


def _names(name: str, value: Any, what: str) -> tuple[str, ...]:
    """A list (or a comma-separated string) of non-empty strings, as a tuple."""
    if isinstance(value, str) and not value.strip():
        return ()
    items = value.split(",") if isinstance(value, str) else value
    if not isinstance(items, (list, tuple, set, frozenset)) or not all(
        isinstance(v, str) and v.strip() for v in items
    ):
        raise SettingsError(f"{name} must be a list of {what}, got {value!r}")
    return tuple(v.strip() for v in items)


#: A host name (letters, digits, ``-``, ``_``, dot-separated labels) or an IP address.
_HOST_NAME = re.compile(r"[a-z0-9_]([a-z0-9_-]*[a-z0-9_])?(\.[a-z0-9_]([a-z0-9_-]*[a-z0-9_])?)*")


def host_names(name: str, value: Any) -> tuple[str, ...]:
    """Host names or IP addresses, without a scheme or port, lower-cased."""
    found = []
    for host in _names(name, value, "host names (e.g. ['dgs.example.com'])"):
        bare = host.lower().removeprefix("[").removesuffix("]")
        try:
            ipaddress.ip_address(bare)
        except ValueError:
            if not _HOST_NAME.fullmatch(bare):
                raise SettingsError(
                    f"{name}: {host!r} is not a host name or an IP address (give the name "
                    "alone, without a scheme, port or wildcard)"
                ) from None
        found.append(bare)
    return tuple(found)


def proxy_addresses(name: str, value: Any) -> tuple[str, ...]:
    """IP addresses or networks (``10.0.0.0/8``)."""
    found = _names(name, value, "proxy addresses (e.g. ['127.0.0.1'])")
    for address in found:
        try:
            ipaddress.ip_network(address, strict=False)
        except ValueError:
            raise SettingsError(
                f"{name}: {address!r} is not an IP address or network (e.g. 10.0.0.0/8)"
            ) from None
    return found


def schedule_table(name: str, value: Any) -> Mapping[str, Any]:
    if not isinstance(value, Mapping):
        raise SettingsError(f"{name} must be a mapping of schedule name to fields")
    return value


def sentinel_settings(
    url: str | None, name: str | None, kwargs: Mapping[str, Any] | None, cluster: bool
) -> None:
    """``dgs_redis_master_name`` and ``dgs_redis_sentinel_kwargs`` go with a
    ``sentinel://`` ``dgs_redis_url`` (every part of it a sentinel), which
    needs the master's name and excludes ``dgs_redis_cluster``."""
    if url is None or url.split("://", 1)[0].lower() != "sentinel":
        for setting_name, value in (("master_name", name), ("sentinel_kwargs", kwargs)):
            if value is not None:
                raise SettingsError(
                    f"dgs_redis_{setting_name} is set, but dgs_redis_url is not a "
                    "sentinel://host:port URL (list the sentinels there, separated by ';')"
                )
        return
    if name is None:
        raise SettingsError(
            "dgs_redis_url is a sentinel:// URL: set dgs_redis_master_name to the "
            "primary's name the sentinels monitor (SENTINEL MONITOR <name> ...)"
        )
    if cluster:
        raise SettingsError("dgs_redis_cluster and a sentinel:// dgs_redis_url exclude each other")
    sentinel_parts(url)


def sentinel_parts(url: str) -> None:
    """Each ``;``-separated part of ``url`` is a ``sentinel://host[:port]`` URL."""
    for i, part in enumerate(p.strip() for p in url.split(";")):
        where = f"dgs_redis_url part {i + 1} ({redacted(part) or 'empty'})"
        if not part.lower().startswith("sentinel://"):
            raise SettingsError(
                f"{where} is not a sentinel://host:port URL: list every sentinel as "
                "sentinel://host:port, separated by ';'"
            )
        try:
            host = urlsplit(part).hostname
            urlsplit(part).port  # noqa: B018 - parsing the port is the check
        except ValueError as exc:
            raise SettingsError(f"{where}: {exc}") from None
        if not host:
            raise SettingsError(f"{where} names no host")


#: The metadata of the common kinds of setting.
SECONDS = setting(seconds)
BATCH_SIZE = setting(batch_size)
POSITIVE_INT = setting(positive_int)
OPTIONAL_POSITIVE_INT = setting(positive_int, optional=True)
FLAG = setting(flag)
