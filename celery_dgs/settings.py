"""The ``dgs_*`` settings, read from ``app.conf``.

Every setting has a default named here with its unit. Unknown ``dgs_*`` keys
are rejected with the list of valid ones (a typo must not silently fall back to
a default).
"""

from __future__ import annotations

import dataclasses
import difflib
import functools
from collections.abc import Mapping
from dataclasses import dataclass, field
from datetime import timedelta
from typing import Any

from .core.fewest_errors import DEFAULT_FLOOR_PERIODS, DEFAULT_OVERLOAD_GOAL
from .core.items import DEFAULT_PARTIAL_FAILURE_THRESHOLD
from .core.laxity import DEFAULT_LAXITY_FLOOR_S
from .core.overload import DEFAULT_OVERLOAD_POLICY, DEFAULT_RESTORE_AGING, DEFAULT_SHED_HORIZON_S
from .core.priority import DEFAULT_ELEVATOR_INTERVAL_S
from .core.ranking import OrderPolicy
from .core.revisit_groups import DEFAULT_GROUP_SHARES, GroupShares, parse_group_shares
from .core.spec_values import DEFAULT_MAX_ARGUMENT_BYTES
from .core.timing import DEFAULT_COOLDOWN_FRACTION, DEFAULT_RETRY_DURATION_FRACTION, RetryLadder
from .core.window import DEFAULT_SCHEDULE_WINDOW_S, DEFAULT_WINDOW_READ_ON
from .errors import SettingsError
from .keys import KeySpace
from .setting_checks import (
    BATCH_SIZE,
    FLAG,
    OPTIONAL_POSITIVE_INT,
    POSITIVE_INT,
    SECONDS,
    checked_fields,
    cooldown_fraction,
    delays,
    flag,
    host_names,
    item_share,
    master_name,
    non_empty_string,
    non_negative,
    option_mapping,
    overload_goal,
    periods_at_least_one,
    policy_name,
    proxy_addresses,
    schedule_table,
    seconds,
    seconds_or_zero,
    secret_token,
    sentinel_settings,
    setting,
    tcp_port,
    text,
    url_string,
    weight,
)

#: Deferred checks: how far ahead beat holds pending checks, how many at most,
#: and how long an ended check's history is kept (30 days).
DEFAULT_CHECK_WINDOW_S = 600.0
DEFAULT_CHECK_WINDOW_SIZE = 10_000
DEFAULT_CHECK_RETENTION_S = 30 * 86400.0

#: How long a status page session lasts (8 hours).
DEFAULT_WEB_SESSION_LIFETIME_S = 8 * 3600.0

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


def group_shares(name: str, value: Any) -> GroupShares:
    """The revisit groups' shares (:func:`~celery_dgs.core.revisit_groups.parse_group_shares`)."""
    try:
        return parse_group_shares(value)
    except ValueError as exc:
        raise SettingsError(f"{name}: {exc}") from None


@dataclass(frozen=True, kw_only=True)
class DgsSettings:
    """Validated settings. Build with :meth:`from_conf` (``app.conf``) or directly."""

    database_url: str = field(
        default=DEFAULT_DATABASE_URL, metadata=setting(text("a database URL string"))
    )
    #: Redis for leases, registry and dispatch records; ``None``: the broker URL
    #: when it is a Redis URL.
    redis_url: str | None = field(default=None, metadata=setting(url_string, optional=True))
    key_prefix: str = field(default=DEFAULT_KEY_PREFIX, metadata=setting(non_empty_string))
    #: Wrap the prefix in ``{...}`` (a Redis Cluster hash tag): every key of
    #: celery-dgs then lives in one slot. Required on Redis Cluster.
    redis_cluster_hash_tag: bool = field(default=DEFAULT_REDIS_CLUSTER_HASH_TAG, metadata=FLAG)
    #: ``dgs_redis_url`` is a node of a Redis Cluster (needs the hash tag, and
    #: an explicit ``dgs_redis_url``: the Celery broker cannot be a cluster).
    redis_cluster: bool = field(default=DEFAULT_REDIS_CLUSTER, metadata=FLAG)
    #: Redis Sentinel: the name of the primary the sentinels monitor (Celery's
    #: ``master_name`` transport option); needed with a ``sentinel://`` dgs_redis_url.
    redis_master_name: str | None = field(
        default=None, metadata=setting(master_name, optional=True)
    )
    #: Redis Sentinel: options of the connections to the sentinels themselves
    #: (e.g. ``{"password": ...}``; Celery's ``sentinel_kwargs`` transport option).
    redis_sentinel_kwargs: Mapping[str, Any] | None = field(
        default=None, metadata=setting(option_mapping, optional=True)
    )
    ping_interval: float = field(default=DEFAULT_PING_INTERVAL_S, metadata=SECONDS)
    ping_timeout: float = field(default=DEFAULT_PING_TIMEOUT_S, metadata=SECONDS)
    steal_delay: float = field(default=DEFAULT_STEAL_DELAY_S, metadata=SECONDS)
    dispatch_timeout: float = field(default=DEFAULT_DISPATCH_TIMEOUT_S, metadata=SECONDS)
    worker_ttl: float = field(default=DEFAULT_WORKER_TTL_S, metadata=SECONDS)
    ewma_alpha: float = field(default=DEFAULT_EWMA_ALPHA, metadata=setting(weight))
    retry_backoff: tuple[float, ...] = field(
        default=DEFAULT_RETRY_BACKOFF_S, metadata=setting(delays)
    )
    #: A retry waits at least this fraction (a number >= 0) of the failed run's
    #: duration, at most the schedule's period; 0: the ladder's step alone
    #: (seed 000's rule). core/timing.py, ``retry_delay``.
    retry_duration_fraction: float = field(
        default=DEFAULT_RETRY_DURATION_FRACTION, metadata=setting(non_negative)
    )
    #: A run that reports its items (``celery_dgs.report_items``) has failed when
    #: the failed share of them is above this (a number in (0, 1]); a schedule's
    #: ``partial_failure_threshold`` overrides it. core/items.py.
    partial_failure_threshold: float = field(
        default=DEFAULT_PARTIAL_FAILURE_THRESHOLD, metadata=setting(item_share)
    )
    #: Fixed worker-slot capacity used when no worker has registered: beat then
    #: runs at most this many at a time and publishes to each schedule's pool queue.
    capacity: int | None = field(default=None, metadata=OPTIONAL_POSITIVE_INT)
    #: Workers: register in Redis at start (beat places runs on registered
    #: workers). False: this worker stays anonymous (fixed-capacity mode).
    worker_register: bool = field(default=DEFAULT_WORKER_REGISTER, metadata=FLAG)
    run_retention: float = field(default=DEFAULT_RUN_RETENTION_S, metadata=SECONDS)
    prune_batch_size: int = field(default=DEFAULT_PRUNE_BATCH_SIZE, metadata=BATCH_SIZE)
    #: Seconds between two looks of beat's reaper at the runs still marked running.
    reap_interval: float = field(default=DEFAULT_REAP_INTERVAL_S, metadata=SECONDS)
    #: Runs the reaper reads per look (it pages through them across looks).
    reap_batch_size: int = field(default=DEFAULT_REAP_BATCH_SIZE, metadata=BATCH_SIZE)
    termination_grace: float = field(default=DEFAULT_TERMINATION_GRACE_S, metadata=SECONDS)
    store_poll_interval: float = field(default=DEFAULT_STORE_POLL_INTERVAL_S, metadata=SECONDS)
    max_dispatches_per_tick: int = field(
        default=DEFAULT_MAX_DISPATCHES_PER_TICK, metadata=POSITIVE_INT
    )
    #: Seconds without a renewal after which a standby beat takes the leader lease.
    beat_leader_timeout: float = field(default=DEFAULT_BEAT_LEADER_TIMEOUT_S, metadata=SECONDS)
    #: Port for the Prometheus endpoint served by beat (``/metrics``); ``None``: disabled.
    metrics_port: int | None = field(default=None, metadata=setting(tcp_port, optional=True))
    #: Address the metrics endpoint binds to.
    metrics_addr: str = field(default="0.0.0.0", metadata=setting(text("an address to bind to")))
    #: Serve the per-schedule families (a series or more per schedule); off, a
    #: scrape of a large fleet keeps the aggregate ones only. ``None``: while
    #: beat tracks at most ``PER_SCHEDULE_METRICS_MAX`` schedules.
    metrics_per_schedule: bool | None = field(default=None, metadata=setting(flag, optional=True))
    #: What beat does when demand exceeds capacity: ``"greedy"`` (lowest
    #: should_start_by first), ``"shed"`` or ``"restore"`` (late schedules
    #: shortest run first, with aging; see celery_dgs/core/overload.py).
    overload_policy: str = field(default=DEFAULT_OVERLOAD_POLICY, metadata=setting(policy_name))
    #: What beat gives up while the demand exceeds the live slots: ``"fair"``
    #: (every schedule served in turn, staleness bounded) or ``"fewest_errors"``
    #: (the schedules whose runs buy the least fresh time per slot-second wait,
    #: each served again once ``overload_floor`` periods stale; needs
    #: ``overload_policy = "restore"`` with a laxity floor: celery_dgs/core/fewest_errors.py).
    overload: str = field(default=DEFAULT_OVERLOAD_GOAL, metadata=setting(overload_goal))
    overload_floor: float = field(
        default=DEFAULT_FLOOR_PERIODS, metadata=setting(periods_at_least_one)
    )
    #: ``shed``: on-time schedules whose should_start_by is within this many
    #: seconds go before late ones.
    shed_horizon: float = field(default=DEFAULT_SHED_HORIZON_S, metadata=SECONDS)
    #: ``restore``: a late schedule's key is ``should_start_by + restore_aging *
    #: expected run time``: seconds of lateness per second of run time (>= 0).
    restore_aging: float = field(default=DEFAULT_RESTORE_AGING, metadata=setting(non_negative))
    #: ``restore``: on-time schedules go in relative-laxity order, least
    #: ``(error_at - now) / (margin + laxity_floor)`` first (seconds, >= 0;
    #: celery_dgs/core/laxity.py); ``None``: lowest should_start_by first.
    laxity_floor: float | None = field(
        default=DEFAULT_LAXITY_FLOOR_S, metadata=setting(seconds_or_zero, optional=True)
    )
    #: Seconds between two steps of the priority elevator: each due schedule
    #: moves up to the next class with due work (celery_dgs/core/priority.py);
    #: ``None``: no elevator (strict priority among due schedules).
    elevator_interval: float | None = field(
        default=DEFAULT_ELEVATOR_INTERVAL_S, metadata=setting(seconds, optional=True)
    )
    #: Deferred checks: beat holds the pending checks due within this many seconds
    #: (and the overdue), at most ``check_window_size``, read as the window moves.
    check_window: float = field(default=DEFAULT_CHECK_WINDOW_S, metadata=SECONDS)
    check_window_size: int = field(default=DEFAULT_CHECK_WINDOW_SIZE, metadata=POSITIVE_INT)
    #: Beat's window of schedules (core/window.py): it holds at most this many,
    #: those that can start within ``schedule_window`` s; ``None``: all of them.
    schedule_window: float = field(default=DEFAULT_SCHEDULE_WINDOW_S, metadata=SECONDS)
    schedule_window_size: int | None = field(default=None, metadata=OPTIONAL_POSITIVE_INT)
    #: How far, in window sizes, a full window reads on for the certainty rule
    #: (core/window_certainty.py); ``None``: as far as the rule needs.
    schedule_window_read_on: float | None = field(
        default=DEFAULT_WINDOW_READ_ON, metadata=setting(non_negative, optional=True)
    )
    #: Seconds the history of an ended deferred check is kept (beat prunes it).
    check_retention: float = field(default=DEFAULT_CHECK_RETENTION_S, metadata=SECONDS)
    #: Look-ahead admission: hold a long run back while it would leave the much
    #: shorter schedules too few slots during its run (celery_dgs/core/lookahead.py);
    #: False: every chosen schedule starts on a free slot (seed 000's greedy order).
    lookahead: bool = field(default=True, metadata=FLAG)
    #: Seed 001's revisit groups: the shares of the adaptive picks that go to
    #: never-visited sources, those modified since their last visit and the
    #: others, e.g. ``{"never_visited": 40, "modified_since_visit": 40,
    #: "other": 20}`` (celery_dgs/core/revisit_groups.py);
    #: ``None``: adaptive schedules in the overload policy's order.
    adaptive_group_shares: GroupShares | None = field(
        default=DEFAULT_GROUP_SHARES, metadata=setting(group_shares, optional=True)
    )
    #: Self-fencing, seconds: a run whose owner has had no successful ping for
    #: ``ping_timeout - self_fence_margin`` (its monotonic clock) stops on its own,
    #: and its process is gone by ``ping_timeout``, before anyone may steal
    #: (``ping_timeout + steal_delay``). ``None``: see DEFAULT_SELF_FENCE_MARGIN_FRACTION.
    self_fence_margin: float | None = field(default=None, metadata=setting(seconds, optional=True))
    #: A periodic schedule declared without a cooldown waits this fraction (a
    #: number in [0, 1)) of the time from its last good end to its should_start_by
    #: (at most fraction x period) before it may run again; 0: at once (seed 000's
    #: rule, which re-runs it whenever a slot is free). core/timing.py.
    default_cooldown_fraction: float = field(
        default=DEFAULT_COOLDOWN_FRACTION, metadata=setting(cooldown_fraction)
    )
    #: The most bytes a schedule's (or a check's) ``args`` and ``kwargs`` may take
    #: as JSON, together, where it is declared or added. ``None``: no limit.
    max_argument_bytes: int | None = field(
        default=DEFAULT_MAX_ARGUMENT_BYTES, metadata=OPTIONAL_POSITIVE_INT
    )
    #: The status page's operator token: actions (pause, resume, run, cancel)
    #: need it; ``None``: the page is read-only.
    web_token: str | None = field(default=None, metadata=setting(secret_token, optional=True))
    #: Host names (or IP addresses) the status page answers to besides
    #: ``localhost`` and loopback addresses; a request for another ``Host`` gets
    #: 421 (DNS rebinding). ``celery dgs web`` on a non-loopback address needs it.
    web_allowed_hosts: tuple[str, ...] = field(default=(), metadata=setting(host_names))
    #: Seconds a status page session lasts after signing in.
    web_session_lifetime: float = field(default=DEFAULT_WEB_SESSION_LIFETIME_S, metadata=SECONDS)
    #: Addresses (or networks) of reverse proxies whose ``X-Forwarded-For`` and
    #: ``X-Forwarded-Proto`` the status page believes; empty: nobody's.
    web_trusted_proxies: tuple[str, ...] = field(default=(), metadata=setting(proxy_addresses))
    #: Schedules declared in configuration: ``{name: {"kind": ..., fields}}``.
    schedules: Mapping[str, Mapping[str, Any]] = field(
        default_factory=dict, metadata=setting(schedule_table)
    )

    def __post_init__(self) -> None:
        for name, check in checked_fields(type(self)):
            object.__setattr__(self, name, check(f"dgs_{name}", getattr(self, name)))
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
        self._check_overload()
        self._check_cluster()
        self._check_sentinel()
        if self.redis_cluster_hash_tag and ("{" in self.key_prefix or "}" in self.key_prefix):
            raise SettingsError(
                f"dgs_key_prefix {self.key_prefix!r} must not contain braces when "
                "dgs_redis_cluster_hash_tag is on (the prefix becomes the hash tag)"
            )

    def _check_overload(self) -> None:
        if self.overload == "fewest_errors" and (
            self.overload_policy != "restore" or self.laxity_floor is None
        ):
            raise SettingsError(
                'dgs_overload = "fewest_errors" orders the schedules in ERROR of the '
                'default order: it needs dgs_overload_policy = "restore" (got '
                f"{self.overload_policy!r}) and a dgs_laxity_floor (got {self.laxity_floor!r})"
            )

    def _check_cluster(self) -> None:
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
        sentinel_settings(
            self.redis_url, self.redis_master_name, self.redis_sentinel_kwargs, self.redis_cluster
        )

    def _check_self_fence_margin(self) -> None:
        slack = self.ping_timeout - self.ping_interval
        if self.self_fence_margin is None:
            margin = min(self.ping_timeout * DEFAULT_SELF_FENCE_MARGIN_FRACTION, slack / 2)
        else:
            margin = self.self_fence_margin
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
            goal=self.overload,
            floor_periods=self.overload_floor,
            shed_horizon_s=self.shed_horizon,
            restore_aging=self.restore_aging,
            laxity_floor_s=self.laxity_floor,
            elevator_interval_s=self.elevator_interval,
            lookahead=self.lookahead,
            group_shares=self.adaptive_group_shares,
            window_size=self.schedule_window_size,
            window_s=self.schedule_window,
            window_read_on=self.schedule_window_read_on,
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
        """``dgs_retry_backoff`` as timedeltas: a
        :class:`~celery_dgs.core.timing.RetryLadder` carrying
        ``dgs_retry_duration_fraction`` (built once: beat reads it per re-index)."""
        return RetryLadder(
            (timedelta(seconds=s) for s in self.retry_backoff),
            float(self.retry_duration_fraction),
        )

    @classmethod
    def valid_keys(cls) -> list[str]:
        return sorted(f"dgs_{f.name}" for f in dataclasses.fields(cls))

    @classmethod
    def from_conf(cls, conf: Mapping[str, Any], namespace: str | None = None) -> DgsSettings:
        """Read every ``dgs_*`` key of a Celery ``app.conf`` (or a plain mapping);
        with the app's ``namespace`` (``config_from_object(..., namespace="CELERY")``),
        its ``CELERY_DGS_*`` keys too, as Celery reads its own settings there."""
        # None is a value (off) for an optional setting, else it means "the default".
        none_is_a_value = {name: check.optional for name, check in checked_fields(cls)}
        known = {f.name for f in dataclasses.fields(cls)}
        values: dict[str, Any] = {}
        spaced = f"{namespace}_dgs_".lower() if namespace else None
        for key in list(conf.keys()):
            lowered = str(key).lower()
            if lowered.startswith("dgs_"):
                short = lowered[4:]
            elif spaced is not None and lowered.startswith(spaced):
                short = lowered[len(spaced) :]
            else:
                continue
            if short not in known:
                close = difflib.get_close_matches(key.lower(), cls.valid_keys(), n=1)
                hint = f"did you mean {close[0]!r}? " if close else ""
                raise SettingsError(
                    f"unknown setting {key!r}; {hint}valid settings are: "
                    f"{', '.join(cls.valid_keys())}"
                )
            value = conf[key]
            if value is not None or none_is_a_value.get(short, False):
                values[short] = value
        return cls(**values)

    @property
    def redis_url_setting(self) -> str:
        """The setting celery-dgs's Redis URL comes from: ``dgs_redis_url``,
        else ``broker_url`` (what an error about that server names)."""
        return "dgs_redis_url" if self.redis_url else "broker_url"

    def resolved_redis_url(self, broker_url: str | None) -> str | None:
        """``dgs_redis_url``, else the broker URL when it is a Redis URL (not with
        ``dgs_redis_cluster``, which needs ``dgs_redis_url``)."""
        if self.redis_url or self.redis_cluster:
            return self.redis_url
        if broker_url and broker_url.split("://", 1)[0] in ("redis", "rediss"):
            return url_string("broker_url", broker_url)
        return None
