"""A leader lease in Redis: which one of several candidates (beats) may act.

One hash per role at ``KeySpace.leader(role)`` (owner tag, node, pid, since,
last ping, token) and a token counter at ``KeySpace.leader_token(role)``.
Every transition is one Lua script (``scripts/leader_*.lua``) on the server's
``TIME``; ``clock_ms`` exists only so that tests can pin the time.

Boundary, as for schedule leases: a leader whose last ping is exactly
``timeout`` old still leads; a millisecond later another candidate may take
over. A take-over increments the token, so the token names one leadership
term; :class:`LeaderFence` (owner tag + token) is what fenced writes check
(``dispatch_add.lua``).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass
from datetime import datetime
from typing import cast

import redis

from ..errors import LeaseError, MalformedDataError
from ..keys import KeySpace
from .codec import HashReader, ms_to_datetime, pairs, seconds_to_ms, text
from .lua import SCRIPTS, call_script

#: Written as ``format`` in the leader hash; bump it when the layout changes.
LEADER_FORMAT_VERSION = 1
#: The role of the dispatching beat.
BEAT_ROLE = "beat"


@dataclass(frozen=True, kw_only=True)
class LeaderFence:
    """What a fenced write carries: the leadership it was decided under."""

    owner_tag: str
    token: int


@dataclass(frozen=True, kw_only=True)
class LeaderInfo:
    """The stored leader lease. Times are aware UTC datetimes from Redis ``TIME``."""

    owner_tag: str
    owner_node: str
    owner_pid: int
    since: datetime
    last_ping_at: datetime
    token: int
    #: The id of the schedule store the leader serves (``None``: not written,
    #: by an older version).
    store: str | None = None
    #: The leader's process scope (host boot and pid namespace) within which
    #: its pid names it (``None``: not written, or unknown).
    scope: str | None = None

    @classmethod
    def from_hash(cls, key: str, data: Mapping[bytes, bytes]) -> LeaderInfo:
        r = HashReader(key, data, format_version=LEADER_FORMAT_VERSION)
        return cls(
            owner_tag=r.get_str("owner_tag"),
            owner_node=r.get_str("owner_node"),
            owner_pid=r.get_int("owner_pid"),
            since=r.get_time("since"),
            last_ping_at=r.get_time("last_ping_at"),
            token=r.get_int("token"),
            store=r.opt_str("store"),
            scope=r.opt_str("scope") or None,
        )


def foreign_leader(info: LeaderInfo | None, store: str | None, prefix: str) -> str | None:
    """Why ``info``, the leading beat, is not this project's (it serves another
    store than ``store``; ``None``: this store has no id yet, so no beat of
    this version served it), or ``None`` when it is, or cannot be told."""
    if info is None or not info.store or info.store == store:
        return None
    return (
        f"the leading beat ({info.owner_node}/{info.owner_pid}) serves another schedule "
        f"store: two projects share this Redis database and key prefix {prefix!r}, so "
        "their beats, workers and leases mix (this project's beat stands by, and its "
        "workers may be sent the other's runs), or it opens another database than this "
        "process (a relative SQLite path in dgs_database_url is read from each process's "
        "working directory); give each project its own dgs_key_prefix or Redis "
        "database, and every process of a project the same dgs_database_url"
    )


@dataclass(frozen=True, kw_only=True)
class ElectResult:
    """One :meth:`RedisLeader.elect` call.

    ``leading``: the caller holds the lease (``token``, ``since`` are its own).
    ``renewed``: it already held it (False: it was just granted).
    ``holder``: the other leader when not ``leading``.
    ``previous``: the expired leader a grant replaced, if any.
    """

    leading: bool
    now: datetime
    token: int = 0
    since: datetime | None = None
    renewed: bool = False
    holder: LeaderInfo | None = None
    previous: LeaderInfo | None = None


class RedisLeader:
    """The leader lease of one ``role``; every method is one round trip."""

    def __init__(
        self,
        client: redis.Redis,
        keys: KeySpace,
        *,
        timeout: float,
        role: str = BEAT_ROLE,
        clock_ms: Callable[[], int] | None = None,
    ) -> None:
        self.client = client
        self.keys = keys
        self.role = role
        self.timeout_ms = seconds_to_ms("leader timeout", timeout)
        if self.timeout_ms <= 0:
            raise ValueError(f"leader timeout must be > 0, got {timeout!r}")
        self.key = keys.leader(role)
        self._clock_ms = clock_ms

    def _now_arg(self) -> str:
        return "" if self._clock_ms is None else str(int(self._clock_ms()))

    def _info(self, flat: list[object]) -> LeaderInfo | None:
        data = pairs(flat)
        return LeaderInfo.from_hash(self.key, data) if data else None

    def elect(
        self,
        *,
        owner_tag: str,
        owner_node: str,
        owner_pid: int,
        min_token: int = 0,
        store: str = "",
        scope: str = "",
        gone_tag: str = "",
        gone_after: float = 0.0,
    ) -> ElectResult:
        """Renew the lease if ``owner_tag`` holds it, take it if it is free or
        expired, else report the holder (see ``scripts/leader_elect.lua``).
        ``store``: the id of the schedule store the candidate serves, kept in
        the lease it is granted, as is ``scope`` (its process scope:
        :func:`celery_dgs.beat.leader.process_scope`). ``gone_tag``: a holder the caller knows has
        no process any more; its lease is taken once its last ping is more
        than ``gone_after`` seconds old, before the timeout."""
        if not owner_tag:
            raise ValueError("owner_tag must be a non-empty string")
        reply = call_script(
            SCRIPTS,
            self.client,
            "leader_elect.lua",
            [self.key, self.keys.leader_token(self.role)],
            [
                self._now_arg(),
                str(LEADER_FORMAT_VERSION),
                owner_tag,
                owner_node,
                str(int(owner_pid)),
                str(self.timeout_ms),
                str(int(min_token)),
                store,
                gone_tag,
                str(seconds_to_ms("gone_after", gone_after)),
                scope,
            ],
        )
        status, now = text(reply[0]), ms_to_datetime(int(reply[1]))
        if status == "LEADER":
            return ElectResult(
                leading=True,
                now=now,
                token=int(reply[2]),
                since=ms_to_datetime(int(reply[3])),
                renewed=bool(int(reply[4])),
                previous=self._info(reply[5]),
            )
        if status == "FOLLOWER":
            return ElectResult(leading=False, now=now, holder=self._info(reply[2]))
        raise LeaseError(f"leader_elect.lua returned {status!r}")

    def resign(self, owner_tag: str) -> bool:
        """Step down if ``owner_tag`` leads; True if it did."""
        reply = call_script(
            SCRIPTS,
            self.client,
            "leader_resign.lua",
            [self.key],
            [str(LEADER_FORMAT_VERSION), owner_tag],
        )
        return bool(int(reply[0]))

    def current(self) -> LeaderInfo | None:
        """The stored leader lease (it may have expired: compare ``last_ping_at``)."""
        try:
            data = cast("dict[bytes, bytes]", self.client.hgetall(self.key))
        except redis.ResponseError as exc:
            raise MalformedDataError(f"Redis key {self.key!r}: {exc}") from exc
        except redis.RedisError as exc:
            raise LeaseError(f"reading {self.key!r} failed: {exc}") from exc
        return LeaderInfo.from_hash(self.key, data) if data else None

    def ever_granted(self) -> bool:
        """Whether a candidate was ever granted this lease on this Redis's data
        (the token counter, never deleted, exists)."""
        try:
            return bool(self.client.exists(self.keys.leader_token(self.role)))
        except redis.RedisError as exc:
            raise LeaseError(
                f"reading {self.keys.leader_token(self.role)!r} failed: {exc}"
            ) from exc

    def expired(self, info: LeaderInfo, now: datetime) -> bool:
        """True if ``info``'s last ping is more than the timeout before ``now``."""
        return (now - info.last_ping_at).total_seconds() * 1000 > self.timeout_ms
