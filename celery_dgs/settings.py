"""The ``dgs_*`` settings, read from ``app.conf``.

Every setting has a default named here with its unit. Unknown ``dgs_*`` keys
are rejected with the list of valid ones (a typo must not silently fall back to
a default).
"""

from __future__ import annotations

import dataclasses
import difflib
import functools
import math
from collections.abc import Mapping
from dataclasses import dataclass, field
from datetime import timedelta
from typing import Any
from urllib.parse import urlsplit

from .core.laxity import DEFAULT_LAXITY_FLOOR_S
from .core.overload import (
    DEFAULT_OVERLOAD_POLICY,
    DEFAULT_RESTORE_AGING,
    DEFAULT_SHED_HORIZON_S,
    OVERLOAD_POLICIES,
)
from .core.priority import DEFAULT_ELEVATOR_INTERVAL_S
from .core.ranking import OrderPolicy
from .core.timing import DEFAULT_COOLDOWN_FRACTION, validate_cooldown_fraction
from .errors import SettingsError
from .keys import KeySpace

#: Deferred checks: how far ahead beat holds pending checks, how many at most,
#: and how long an ended check's history is kept (30 days).
DEFAULT_CHECK_WINDOW_S = 600.0
DEFAULT_CHECK_WINDOW_SIZE = 10_000
DEFAULT_CHECK_RETENTION_S = 30 * 86400.0

DEFAULT_DATABASE_URL = "sqlite:///dgs.sqlite3"
DEFAULT_KEY_PREFIX = "dgs"
#: Redis Cluster: wrap the key prefix in a hash tag (``{dgs}:...``) so every key
#: hashes to one slot, which the multi-key Lua scripts need (celery_dgs/keys.py).
DEFAULT_REDIS_CLUSTER_HASH_TAG = False
#: Redis Cluster: dgs_redis_url names one node of a cluster, reached through
#: redis-py's cluster client (it finds the other nodes and follows the slots).
DEFAULT_REDIS_CLUSTER = False
DEFAULT_PING_INTERVAL_S = 30.0  # seed 000: every 30 seconds
DEFAULT_PING_TIMEOUT_S = 90.0  # three missed pings before a steal may start
DEFAULT_STEAL_DELAY_S = 60.0  # grace after steal_start_at for the owner to ping again
DEFAULT_DISPATCH_TIMEOUT_S = 300.0  # a dispatch not started by then is taken back
DEFAULT_WORKER_TTL_S = 60.0  # a worker registration expires unless refreshed
#: Workers register (node, queues, slots) so beat places each run on one of
#: them; False: an anonymous pool, admitted up to dgs_capacity runs at a time.
DEFAULT_WORKER_REGISTER = True
DEFAULT_EWMA_ALPHA = 0.37
DEFAULT_RETRY_BACKOFF_S = (300.0, 3600.0, 14400.0)  # 5 min, 1 h, 4 h
DEFAULT_RUN_RETENTION_S = 30 * 24 * 3600.0  # 30 days of run history
DEFAULT_PRUNE_BATCH_SIZE = 1000
#: Beat's run reaper (celery_dgs/beat/reaper.py): how often the leader looks at
#: the runs still marked running (seconds), and how many it reads per look.
DEFAULT_REAP_INTERVAL_S = 60.0
DEFAULT_REAP_BATCH_SIZE = 500
DEFAULT_TERMINATION_GRACE_S = 10.0  # after interrupting a run, before killing its process
DEFAULT_STORE_POLL_INTERVAL_S = 2.0  # beat reads store changes at most this often
DEFAULT_MAX_DISPATCHES_PER_TICK = 5000
# Beat high availability (docs/beat-ha.md): a beat leader that has not renewed
# its lease for this long is replaced by a standby beat. The leader renews every
# third of it; standbys check every min(third, store_poll_interval).
DEFAULT_BEAT_LEADER_TIMEOUT_S = 30.0
MIN_BEAT_LEADER_TIMEOUT_S = 0.3  # a third of it must fit a Redis round trip and a tick
# -- fencing --
#: Default self-fencing margin as a fraction of ping_timeout: an owner with no
#: successful ping for ping_timeout - margin stops its run (defaults: 90 s - 22.5 s
#: = 67.5 s, 2.25 ping intervals), capped at half of ping_timeout - ping_interval
#: so that a slow but healthy ping cycle never fences.
DEFAULT_SELF_FENCE_MARGIN_FRACTION = 0.25


#: The longest duration setting, in seconds (100 years): longer ones overflow
#: sleeps and Redis expiries.
MAX_SETTING_SECONDS = 100 * 365 * 86400.0
#: The largest batch a ``*_batch_size`` setting may ask the database for.
MAX_BATCH_SIZE = 1_000_000


def _redacted(url: str) -> str:
    """``url`` with the password of its user part replaced by ``**``."""
    scheme, sep, rest = url.partition("://")
    auth, at, host = rest.rpartition("@")
    if not at or ":" not in auth:
        return url
    return f"{scheme}{sep}{auth.split(':', 1)[0]}:**@{host}"


def _seconds(name: str, value: Any, *, allow_zero: bool = False) -> float:
    if isinstance(value, timedelta):
        value = value.total_seconds()
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        raise SettingsError(f"{name} must be a number of seconds or a timedelta, got {value!r}")
    if not math.isfinite(value) or value < 0 or (value == 0 and not allow_zero):
        raise SettingsError(f"{name} must be {'>= 0' if allow_zero else '> 0'}, got {value!r}")
    if value > MAX_SETTING_SECONDS:
        raise SettingsError(
            f"{name} must be at most {MAX_SETTING_SECONDS:.0f} seconds (100 years), got {value!r}"
        )
    return float(value)


#: Settings where ``None`` in app.conf is a value (off), not "use the default".
_NONE_MEANS_OFF = ("redis_url", "capacity", "metrics_port", "laxity_floor", "elevator_interval")


#: The shortest ``dgs_web_token`` accepted: a short token is guessable.
MIN_WEB_TOKEN_LENGTH = 16


@dataclass(frozen=True, kw_only=True)
class DgsSettings:
    """Validated settings. Build with :meth:`from_conf` (``app.conf``) or directly."""

    database_url: str = DEFAULT_DATABASE_URL
    #: Redis for leases, registry and dispatch records; ``None``: the broker URL
    #: when it is a Redis URL.
    redis_url: str | None = None
    key_prefix: str = DEFAULT_KEY_PREFIX
    #: Wrap the prefix in ``{...}`` (a Redis Cluster hash tag): every key of
    #: celery-dgs then lives in one slot. Required on Redis Cluster.
    redis_cluster_hash_tag: bool = DEFAULT_REDIS_CLUSTER_HASH_TAG
    #: ``dgs_redis_url`` is a node of a Redis Cluster (needs the hash tag, and
    #: an explicit ``dgs_redis_url``: the Celery broker cannot be a cluster).
    redis_cluster: bool = DEFAULT_REDIS_CLUSTER
    #: Redis Sentinel: the name of the primary the sentinels monitor (Celery's
    #: ``master_name`` transport option); needed with a ``sentinel://`` dgs_redis_url.
    redis_master_name: str | None = None
    #: Redis Sentinel: options of the connections to the sentinels themselves
    #: (e.g. ``{"password": ...}``; Celery's ``sentinel_kwargs`` transport option).
    redis_sentinel_kwargs: Mapping[str, Any] | None = None
    ping_interval: float = DEFAULT_PING_INTERVAL_S
    ping_timeout: float = DEFAULT_PING_TIMEOUT_S
    steal_delay: float = DEFAULT_STEAL_DELAY_S
    dispatch_timeout: float = DEFAULT_DISPATCH_TIMEOUT_S
    worker_ttl: float = DEFAULT_WORKER_TTL_S
    ewma_alpha: float = DEFAULT_EWMA_ALPHA
    retry_backoff: tuple[float, ...] = DEFAULT_RETRY_BACKOFF_S
    #: Fixed worker-slot capacity used when no worker has registered: beat then
    #: runs at most this many at a time and publishes to each schedule's pool queue.
    capacity: int | None = None
    #: Workers: register in Redis at start (beat places runs on registered
    #: workers). False: this worker stays anonymous (fixed-capacity mode).
    worker_register: bool = DEFAULT_WORKER_REGISTER
    run_retention: float = DEFAULT_RUN_RETENTION_S
    prune_batch_size: int = DEFAULT_PRUNE_BATCH_SIZE
    #: Seconds between two looks of beat's reaper at the runs still marked running.
    reap_interval: float = DEFAULT_REAP_INTERVAL_S
    #: Runs the reaper reads per look (it pages through them across looks).
    reap_batch_size: int = DEFAULT_REAP_BATCH_SIZE
    termination_grace: float = DEFAULT_TERMINATION_GRACE_S
    store_poll_interval: float = DEFAULT_STORE_POLL_INTERVAL_S
    max_dispatches_per_tick: int = DEFAULT_MAX_DISPATCHES_PER_TICK
    #: Seconds without a renewal after which a standby beat takes the leader lease.
    beat_leader_timeout: float = DEFAULT_BEAT_LEADER_TIMEOUT_S
    #: Port for the Prometheus endpoint served by beat (``/metrics``); ``None``: disabled.
    metrics_port: int | None = None
    #: Address the metrics endpoint binds to.
    metrics_addr: str = "0.0.0.0"
    #: What beat does when demand exceeds capacity: ``"greedy"`` (lowest
    #: should_start_by first), ``"shed"`` or ``"restore"`` (late schedules
    #: shortest run first, with aging; see celery_dgs/core/overload.py).
    overload_policy: str = DEFAULT_OVERLOAD_POLICY
    #: ``shed``: on-time schedules whose should_start_by is within this many
    #: seconds go before late ones.
    shed_horizon: float = DEFAULT_SHED_HORIZON_S
    #: ``restore``: a late schedule's key is ``should_start_by + restore_aging *
    #: expected run time``: seconds of lateness per second of run time (>= 0).
    restore_aging: float = DEFAULT_RESTORE_AGING
    #: ``restore``: on-time schedules go in relative-laxity order, least
    #: ``(error_at - now) / (margin + laxity_floor)`` first (seconds, >= 0;
    #: celery_dgs/core/laxity.py); ``None``: lowest should_start_by first.
    laxity_floor: float | None = DEFAULT_LAXITY_FLOOR_S
    #: Seconds between two steps of the priority elevator: each due schedule
    #: moves up to the next class with due work (celery_dgs/core/priority.py);
    #: ``None``: no elevator (strict priority among due schedules).
    elevator_interval: float | None = DEFAULT_ELEVATOR_INTERVAL_S
    #: Deferred checks: beat holds the pending checks due within this many
    #: seconds (and those overdue), at most ``check_window_size`` of them, and
    #: reads the next ones from the store as the window moves on or empties.
    check_window: float = DEFAULT_CHECK_WINDOW_S
    check_window_size: int = DEFAULT_CHECK_WINDOW_SIZE
    #: Seconds the history of an ended deferred check is kept (beat prunes it).
    check_retention: float = DEFAULT_CHECK_RETENTION_S
    #: Look-ahead admission: hold a long run back while it would leave the much
    #: shorter schedules too few slots during its run (celery_dgs/core/lookahead.py).
    lookahead: bool = False
    #: Self-fencing, seconds: a run whose owner has had no successful ping for
    #: ``ping_timeout - self_fence_margin`` (its monotonic clock) stops on its own,
    #: and its process is gone by ``ping_timeout``, before anyone may steal
    #: (``ping_timeout + steal_delay``). ``None``: see DEFAULT_SELF_FENCE_MARGIN_FRACTION.
    self_fence_margin: float | None = None
    #: A periodic schedule declared without a cooldown waits this fraction (a
    #: number in [0, 1)) of the time from its last good end to its should_start_by
    #: (at most fraction x period) before it may run again; 0: at once (seed 000's
    #: rule, which re-runs it whenever a slot is free). core/timing.py.
    default_cooldown_fraction: float = DEFAULT_COOLDOWN_FRACTION
    #: The status page's operator token: actions (pause, resume, run, cancel)
    #: need it; ``None``: the page is read-only.
    web_token: str | None = None
    #: Schedules declared in configuration: ``{name: {"kind": ..., fields}}``.
    schedules: Mapping[str, Mapping[str, Any]] = field(default_factory=dict)

    def __post_init__(self) -> None:
        for name in (
            "ping_interval",
            "ping_timeout",
            "steal_delay",
            "dispatch_timeout",
            "worker_ttl",
            "run_retention",
            "termination_grace",
            "store_poll_interval",
            "beat_leader_timeout",
            "shed_horizon",
            "reap_interval",
            "check_window",
            "check_retention",
        ):
            object.__setattr__(self, name, _seconds(f"dgs_{name}", getattr(self, name)))
        if self.ping_timeout <= self.ping_interval:
            raise SettingsError(
                f"dgs_ping_timeout ({self.ping_timeout}s) must be longer than "
                f"dgs_ping_interval ({self.ping_interval}s)"
            )
        if self.beat_leader_timeout < MIN_BEAT_LEADER_TIMEOUT_S:
            raise SettingsError(
                f"dgs_beat_leader_timeout must be at least {MIN_BEAT_LEADER_TIMEOUT_S}s "
                f"(the leader renews every third of it), got {self.beat_leader_timeout!r}"
            )
        self._check_self_fence_margin()
        if not 0.0 < self.ewma_alpha <= 1.0:
            raise SettingsError(f"dgs_ewma_alpha must be in (0, 1], got {self.ewma_alpha!r}")
        if not isinstance(self.retry_backoff, (list, tuple)):
            raise SettingsError(
                f"dgs_retry_backoff must be a list of delays in seconds, e.g. [300, 3600], "
                f"got {self.retry_backoff!r}"
            )
        backoff = tuple(_seconds("dgs_retry_backoff", v) for v in self.retry_backoff)
        if not backoff:
            raise SettingsError("dgs_retry_backoff must list at least one delay")
        object.__setattr__(self, "retry_backoff", backoff)
        if self.capacity is not None and (
            isinstance(self.capacity, bool)
            or not isinstance(self.capacity, int)
            or self.capacity < 1
        ):
            raise SettingsError(f"dgs_capacity must be a positive integer, got {self.capacity!r}")
        for name in (
            "prune_batch_size",
            "max_dispatches_per_tick",
            "reap_batch_size",
            "check_window_size",
        ):
            value = getattr(self, name)
            if isinstance(value, bool) or not isinstance(value, int) or value < 1:
                raise SettingsError(f"dgs_{name} must be a positive integer, got {value!r}")
            if name.endswith("batch_size") and value > MAX_BATCH_SIZE:
                raise SettingsError(f"dgs_{name} must be at most {MAX_BATCH_SIZE}, got {value!r}")
        if self.metrics_port is not None and (
            isinstance(self.metrics_port, bool)
            or not isinstance(self.metrics_port, int)
            or not 0 < self.metrics_port < 65536
        ):
            raise SettingsError(f"dgs_metrics_port must be a TCP port, got {self.metrics_port!r}")
        if self.overload_policy not in OVERLOAD_POLICIES:
            raise SettingsError(
                f"dgs_overload_policy must be one of {', '.join(OVERLOAD_POLICIES)}, "
                f"got {self.overload_policy!r}"
            )
        aging = self.restore_aging
        if (
            isinstance(aging, bool)
            or not isinstance(aging, (int, float))
            or not (0.0 <= aging < float("inf"))
        ):
            raise SettingsError(f"dgs_restore_aging must be a finite number >= 0, got {aging!r}")
        if self.laxity_floor is not None:
            floor = _seconds("dgs_laxity_floor", self.laxity_floor, allow_zero=True)
            object.__setattr__(self, "laxity_floor", floor)
        if self.elevator_interval is not None:
            interval = _seconds("dgs_elevator_interval", self.elevator_interval)
            object.__setattr__(self, "elevator_interval", interval)
        self._check_urls()
        if not isinstance(self.metrics_addr, str) or not self.metrics_addr:
            raise SettingsError(
                f"dgs_metrics_addr must be an address to bind to, got {self.metrics_addr!r}"
            )
        if not isinstance(self.key_prefix, str) or not self.key_prefix:
            raise SettingsError("dgs_key_prefix must be a non-empty string")
        if not isinstance(self.worker_register, bool):
            raise SettingsError(
                f"dgs_worker_register must be True or False, got {self.worker_register!r}"
            )
        if not isinstance(self.lookahead, bool):
            raise SettingsError(f"dgs_lookahead must be True or False, got {self.lookahead!r}")
        if not isinstance(self.redis_cluster_hash_tag, bool):
            raise SettingsError(
                f"dgs_redis_cluster_hash_tag must be True or False, "
                f"got {self.redis_cluster_hash_tag!r}"
            )
        self._check_cluster()
        self._check_sentinel()
        if self.redis_cluster_hash_tag and ("{" in self.key_prefix or "}" in self.key_prefix):
            raise SettingsError(
                f"dgs_key_prefix {self.key_prefix!r} must not contain braces when "
                "dgs_redis_cluster_hash_tag is on (the prefix becomes the hash tag)"
            )
        try:
            fraction = validate_cooldown_fraction(self.default_cooldown_fraction)
        except ValueError:
            raise SettingsError(
                "dgs_default_cooldown_fraction must be a fraction of the period in [0, 1), "
                f"got {self.default_cooldown_fraction!r}"
            ) from None
        object.__setattr__(self, "default_cooldown_fraction", fraction)
        if self.web_token is not None and (
            not isinstance(self.web_token, str) or len(self.web_token) < MIN_WEB_TOKEN_LENGTH
        ):
            raise SettingsError(
                f"dgs_web_token must be a string of at least {MIN_WEB_TOKEN_LENGTH} characters "
                "(or None: the status page is read-only)"
            )
        if not isinstance(self.schedules, Mapping):
            raise SettingsError("dgs_schedules must be a mapping of schedule name to fields")

    def _check_urls(self) -> None:
        if not isinstance(self.database_url, str) or not self.database_url:
            raise SettingsError(
                f"dgs_database_url must be a database URL string, got {self.database_url!r}"
            )
        url = self.redis_url
        if url is None:
            return
        if not isinstance(url, str):
            raise SettingsError(f"dgs_redis_url must be a redis:// URL string, got {url!r}")
        if url.split("://", 1)[0].lower() == "sentinel":
            return  # several URLs: _check_sentinel reads each
        try:
            urlsplit(url).port  # noqa: B018 - parsing the port is the check
        except ValueError as exc:
            masked = urlsplit(url)._replace(netloc=urlsplit(url).netloc.rpartition("@")[2])
            raise SettingsError(f"dgs_redis_url {masked.geturl()!r}: {exc}") from None

    def _check_cluster(self) -> None:
        if not isinstance(self.redis_cluster, bool):
            raise SettingsError(
                f"dgs_redis_cluster must be True or False, got {self.redis_cluster!r}"
            )
        if not self.redis_cluster:
            return
        if not self.redis_cluster_hash_tag:
            raise SettingsError(
                "dgs_redis_cluster needs dgs_redis_cluster_hash_tag = True: the lease "
                "scripts touch several keys at once, which a cluster only allows in one "
                "slot (otherwise every call fails with CROSSSLOT)"
            )
        if not self.redis_url:
            raise SettingsError(
                "dgs_redis_cluster needs dgs_redis_url (a node of the cluster): the Celery "
                "broker cannot be a Redis Cluster, so its URL is no fallback"
            )

    def _check_sentinel(self) -> None:
        url, name, kwargs = self.redis_url, self.redis_master_name, self.redis_sentinel_kwargs
        is_sentinel = isinstance(url, str) and url.split("://", 1)[0].lower() == "sentinel"
        if name is not None and (not isinstance(name, str) or not name.strip()):
            raise SettingsError(
                f"dgs_redis_master_name must be the primary's name the sentinels monitor, "
                f"got {name!r}"
            )
        if kwargs is not None and (
            not isinstance(kwargs, Mapping) or not all(isinstance(k, str) for k in kwargs)
        ):
            raise SettingsError(
                "dgs_redis_sentinel_kwargs must be a mapping of connection options for the "
                f"sentinels, e.g. {{'password': '...'}}, got {type(kwargs).__name__}"
            )
        if not is_sentinel:
            for setting, value in (("master_name", name), ("sentinel_kwargs", kwargs)):
                if value is not None:
                    raise SettingsError(
                        f"dgs_redis_{setting} is set, but dgs_redis_url is not a "
                        "sentinel://host:port URL (list the sentinels there, separated by ';')"
                    )
            return
        if name is None:
            raise SettingsError(
                "dgs_redis_url is a sentinel:// URL: set dgs_redis_master_name to the "
                "primary's name the sentinels monitor (SENTINEL MONITOR <name> ...)"
            )
        if self.redis_cluster:
            raise SettingsError(
                "dgs_redis_cluster and a sentinel:// dgs_redis_url exclude each other"
            )
        for i, part in enumerate(p.strip() for p in str(url).split(";")):
            where = f"dgs_redis_url part {i + 1} ({_redacted(part) or 'empty'})"
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

    def _check_self_fence_margin(self) -> None:
        slack = self.ping_timeout - self.ping_interval
        if self.self_fence_margin is None:
            margin = min(self.ping_timeout * DEFAULT_SELF_FENCE_MARGIN_FRACTION, slack / 2)
        else:
            margin = _seconds("dgs_self_fence_margin", self.self_fence_margin)
            if margin >= slack:
                raise SettingsError(
                    f"dgs_self_fence_margin ({margin}s) must be shorter than dgs_ping_timeout "
                    f"- dgs_ping_interval ({slack}s), or a healthy owner would fence itself "
                    "between two pings"
                )
        object.__setattr__(self, "self_fence_margin", margin)

    @property
    def fence_after(self) -> float:
        """Seconds without a successful ping after which an owner stops its run."""
        return self.ping_timeout - (self.self_fence_margin or 0.0)

    @property
    def redis_socket_timeout(self) -> float:
        """Seconds a Redis call may take (``fence_after``): a call that hangs on a
        dead connection must fail, not block the worker beyond self-fencing."""
        return self.fence_after

    @property
    def order_policy(self) -> OrderPolicy:
        """The settings that change beat's dispatch order, as one value."""
        return OrderPolicy(
            overload=self.overload_policy,
            shed_horizon_s=self.shed_horizon,
            restore_aging=self.restore_aging,
            laxity_floor_s=self.laxity_floor,
            elevator_interval_s=self.elevator_interval,
            lookahead=self.lookahead,
        )

    def keyspace(self) -> KeySpace:
        """The Redis key names of this deployment (prefix and cluster hash tag)."""
        return KeySpace(self.key_prefix, hash_tag=self.redis_cluster_hash_tag)

    def warnings(self) -> list[str]:
        """Valid settings that weaken a guarantee (``celery dgs check`` and the
        worker's start-up log say them): a steal delay not longer than the ping
        interval lets one forward step of the Redis host's clock take a lease
        from a healthy owner (docs/guarantees.md, assumption 5)."""
        found = []
        if self.steal_delay <= self.ping_interval:
            found.append(
                f"dgs_steal_delay ({self.steal_delay:g}s) is not longer than dgs_ping_interval "
                f"({self.ping_interval:g}s): one forward step of the Redis host's clock can "
                "then take a lease from a healthy owner before its next ping; make the steal "
                "delay longer than the ping interval plus a Redis round trip"
            )
        return found

    @functools.cached_property
    def retry_ladder(self) -> tuple[timedelta, ...]:
        """``dgs_retry_backoff`` as timedeltas (built once: beat reads it per re-index)."""
        return tuple(timedelta(seconds=s) for s in self.retry_backoff)

    @classmethod
    def valid_keys(cls) -> list[str]:
        return sorted(f"dgs_{f.name}" for f in dataclasses.fields(cls))

    @classmethod
    def from_conf(cls, conf: Mapping[str, Any]) -> DgsSettings:
        """Read every ``dgs_*`` key of a Celery ``app.conf`` (or a plain mapping)."""
        known = {f.name for f in dataclasses.fields(cls)}
        values: dict[str, Any] = {}
        for key in list(conf.keys()):
            if not isinstance(key, str) or not key.lower().startswith("dgs_"):
                continue
            short = key[4:].lower()
            if short not in known:
                close = difflib.get_close_matches(key.lower(), cls.valid_keys(), n=1)
                hint = f"did you mean {close[0]!r}? " if close else ""
                raise SettingsError(
                    f"unknown setting {key!r}; {hint}valid settings are: "
                    f"{', '.join(cls.valid_keys())}"
                )
            value = conf[key]
            if value is not None or short in _NONE_MEANS_OFF:
                values[short] = value
        return cls(**values)

    def resolved_redis_url(self, broker_url: str | None) -> str | None:
        """``dgs_redis_url``, else the broker URL when it is a Redis URL (not with
        ``dgs_redis_cluster``, which needs ``dgs_redis_url``)."""
        if self.redis_url or self.redis_cluster:
            return self.redis_url
        if broker_url and broker_url.split("://", 1)[0] in ("redis", "rediss"):
            return broker_url
        return None
