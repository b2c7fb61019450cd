"""Leases in Redis: one hash per schedule, every transition one Lua script.

See ``scripts/*.lua`` for each transition's exact rules. Time always comes from
the server's ``TIME`` (inside the scripts), never from this process's clock;
``clock_ms`` exists only so that tests and the simulator can pin the time.

Boundaries: a lease is *stale* when ``now - last_ping_at > ping_timeout`` and
*takeable* when ``now - steal_start_at > steal_delay``; at exactly the
boundary it is still the owner's.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from datetime import datetime
from typing import Any, cast

import redis

from ..errors import LeaseError, MalformedDataError
from ..keys import BEAT_WAKE_MAX_SIGNALS, BEAT_WAKE_TTL_MS, KeySpace
from .base import LeaseBackend
from .codec import hash_reply, ms_to_datetime, pairs, seconds_to_ms, text
from .lua import SCRIPTS, call_script
from .types import (
    DISPATCH_FORMAT_VERSION,
    LEASE_FORMAT_VERSION,
    AcquireResult,
    AcquireStatus,
    CancelResult,
    CancelStatus,
    LeaseInfo,
    LeaseScan,
    PingResult,
    PingStatus,
    ReclaimStatus,
    RestartGrace,
)
from .view import BeatViewReader

_FMT = str(LEASE_FORMAT_VERSION)


class RedisLeases(LeaseBackend):
    """The lease backend on Redis. Every method is one round trip unless it says otherwise.

    ``ping_timeout``: seconds without a ping after which a steal may be marked.
    ``steal_delay``: seconds after ``steal_start_at`` during which the owner may
    still ping and keep its lease.
    ``restart_grace``: seconds after Redis is seen with a new ``run_id`` (or
    without its data) during which no schedule that was granted before gets a
    new lease; ``None``: ``ping_timeout + steal_delay``.
    """

    def __init__(
        self,
        client: redis.Redis,
        keys: KeySpace,
        *,
        ping_timeout: float,
        steal_delay: float,
        clock_ms: Callable[[], int] | None = None,
        restart_grace: float | None = None,
    ) -> None:
        self.client = client
        self.keys = keys
        self.ping_timeout_ms = seconds_to_ms("ping_timeout", ping_timeout)
        self.steal_delay_ms = seconds_to_ms("steal_delay", steal_delay)
        if self.ping_timeout_ms <= 0:
            raise ValueError(f"ping_timeout must be > 0, got {ping_timeout!r}")
        self.restart_grace_ms = (
            self.ping_timeout_ms + self.steal_delay_ms
            if restart_grace is None
            else seconds_to_ms("restart_grace", restart_grace)
        )
        self._clock_ms = clock_ms
        #: Tests only: the server run_id the acquire script believes it sees
        #: (a failover to a replica that kept the data cannot be staged otherwise).
        self.run_id_override = ""

    # -- helpers --------------------------------------------------------------
    def _now_arg(self) -> str:
        return "" if self._clock_ms is None else str(int(self._clock_ms()))

    def _call(self, name: str, keys: list[str], args: list[str | int | bytes]) -> list[Any]:
        return call_script(SCRIPTS, self.client, name, keys, args)

    def _info(self, schedule: str, flat: list[Any]) -> LeaseInfo:
        return LeaseInfo.from_hash(self.keys.lease(schedule), schedule, pairs(flat))

    # -- transitions ----------------------------------------------------------
    def acquire(
        self,
        schedule: str,
        *,
        owner_node: str,
        owner_name: str,
        owner_tag: str,
        dispatch_id: str | None = None,
        min_token: int = 0,
    ) -> AcquireResult:
        """Take the lease of ``schedule`` if it is free or abandoned (see :class:`AcquireStatus`).

        ``dispatch_id``: the dispatch the message carries (``None`` for an ad-hoc
        ``task.delay()``, which skips the dispatch check). It is checked first:
        no record, or a record of another dispatch, is STALE_DISPATCH. A granted
        lease deletes the matching record in the same step; on HELD or
        STEAL_PENDING the record stays until beat takes it back.
        Calling again with the owner_tag that holds the lease is GRANTED with
        ``renewed=True`` and the same token (a safe retry).
        ``min_token``: a durable floor; the new token is larger than it. A
        schedule whose Redis counter is below it (Redis lost a recorded grant)
        gets RECOVERING during the restart grace (see ``scripts/acquire.lua``).
        """
        if not owner_tag:
            raise ValueError("owner_tag must be a non-empty string")
        if isinstance(min_token, bool) or not isinstance(min_token, int) or min_token < 0:
            raise ValueError(f"min_token must be an int >= 0, got {min_token!r}")
        k = self.keys
        reply = self._call(
            "acquire.lua",
            [
                k.lease(schedule),
                k.token(schedule),
                k.lease_index(),
                k.dispatch(schedule),
                k.dispatch_index(),
                k.epoch(),
            ],
            [
                self._now_arg(),
                _FMT,
                schedule,
                owner_node,
                owner_name,
                owner_tag,
                dispatch_id or "",
                min_token,
                self.ping_timeout_ms,
                self.steal_delay_ms,
                str(DISPATCH_FORMAT_VERSION),
                self.restart_grace_ms,
                self.run_id_override,
            ],
        )
        return self._acquire_result(schedule, reply)

    def _acquire_result(self, schedule: str, reply: Any) -> AcquireResult:
        """The :class:`AcquireResult` of ``acquire.lua``'s reply."""
        status = AcquireStatus(text(reply[0]))
        now = ms_to_datetime(int(reply[1]))
        if status is AcquireStatus.GRANTED:
            if int(reply[5]):
                mine = self._info(schedule, reply[4])
                return AcquireResult(
                    status=status,
                    now=now,
                    token=mine.token,
                    started_at=mine.started_at,
                    renewed=True,
                )
            previous = self._info(schedule, reply[4]) if reply[4] else None
            return AcquireResult(
                status=status,
                now=now,
                token=int(reply[2]),
                started_at=ms_to_datetime(int(reply[3])),
                took_over_from=previous,
            )
        if status is AcquireStatus.RECOVERING:
            return AcquireResult(
                status=status, now=now, grace_ends_at=ms_to_datetime(int(reply[2]))
            )
        if status is AcquireStatus.STALE_DISPATCH:
            return AcquireResult(status=status, now=now, current_dispatch_id=text(reply[2]) or None)
        return AcquireResult(status=status, now=now, holder=self._info(schedule, reply[2]))

    def ping(self, schedule: str, owner_tag: str, progress: float | None = None) -> PingResult:
        """Heartbeat of the owner ``owner_tag``; ``progress`` in [0, 1] is stored if given."""
        if progress is not None and not (0.0 <= progress <= 1.0):
            raise ValueError(f"progress must be within [0, 1], got {progress!r}")
        progress_arg = "" if progress is None else repr(float(progress))
        reply = self._call(
            "ping.lua",
            [self.keys.lease(schedule), self.keys.lease_index()],
            [self._now_arg(), _FMT, schedule, owner_tag, progress_arg],
        )
        status = PingStatus(text(reply[0]))
        now = ms_to_datetime(int(reply[1]))
        if status is PingStatus.NOT_OWNER:
            return PingResult(status=status, now=now, holder_tag=text(reply[2]) or None)
        return PingResult(status=status, now=now, token=int(reply[2]))

    def release(self, schedule: str, owner_tag: str) -> bool:
        """The run ended: delete the lease if ``owner_tag`` holds it, and signal
        the leading beat (``scripts/release.lua``). False if not the owner."""
        k = self.keys
        keys = [k.lease(schedule), k.lease_index(), k.beat_wake()]
        args: list[str | int | bytes] = [
            _FMT,
            schedule,
            owner_tag,
            BEAT_WAKE_MAX_SIGNALS,
            BEAT_WAKE_TTL_MS,
        ]
        return bool(int(self._call("release.lua", keys, args)[0]))

    def reclaim(self, schedule: str, owner_tag: str) -> ReclaimStatus:
        """``scripts/reclaim.lua``: steal-mark, then delete, the silent
        ``owner_tag``'s lease of ``schedule``."""
        if not owner_tag:
            raise ValueError("owner_tag must be a non-empty string")
        reply = self._call(
            "reclaim.lua",
            [self.keys.lease(schedule), self.keys.lease_index()],
            [
                self._now_arg(),
                _FMT,
                schedule,
                owner_tag,
                self.ping_timeout_ms,
                self.steal_delay_ms,
            ],
        )
        return ReclaimStatus(text(reply[0]))

    def request_cancel(
        self, schedule: str, *, owner_tag: str | None = None, token: int | None = None
    ) -> CancelResult:
        """Ask one run of ``schedule`` to stop; it sees CANCELLED at its next ping.

        The run is named by ``owner_tag`` (its run id) and/or ``token`` (at least
        one): a cancel aimed at a run that has ended never reaches the run that
        holds the lease now (OTHER_RUN, nothing changed). See ``scripts/cancel.lua``.
        """
        if owner_tag is None and token is None:
            raise ValueError("request_cancel needs the run's owner_tag or token")
        if owner_tag is not None and not owner_tag:
            raise ValueError("owner_tag must be a non-empty string")
        if token is not None and (isinstance(token, bool) or not isinstance(token, int)):
            raise ValueError(f"token must be an int, got {token!r}")
        reply = self._call(
            "cancel.lua",
            [self.keys.lease(schedule)],
            [_FMT, owner_tag or "", "" if token is None else str(token)],
        )
        status = CancelStatus(text(reply[0]))
        if status is CancelStatus.NO_LEASE:
            return CancelResult(status=status)
        return CancelResult(status=status, owner_tag=text(reply[1]), token=int(reply[2]))

    def beat_view_reader(self) -> BeatViewReader:
        """A reader of beat's compact per-round view (:mod:`celery_dgs.leases.view`):
        the sweep, running leases per worker, stale owners; one round trip a round.
        Its sweep also notes the restart epoch: after a Redis restart the restart
        grace starts at beat's first round, not at the first acquire."""
        reader = BeatViewReader(
            self.client,
            self.keys,
            ping_timeout_ms=self.ping_timeout_ms,
            steal_delay_ms=self.steal_delay_ms,
            now_arg=self._now_arg,
        )
        reader.run_id_override = self.run_id_override
        return reader

    # -- reads ----------------------------------------------------------------
    def now(self) -> datetime:
        """The Redis server's time (``TIME``), as an aware UTC datetime."""
        if self._clock_ms is not None:
            return ms_to_datetime(int(self._clock_ms()))
        try:
            seconds, micros = self.client.time()
        except redis.RedisError as exc:
            raise LeaseError(f"TIME failed: {exc}") from exc
        return ms_to_datetime(int(seconds) * 1000 + int(micros) // 1000)

    def restart_grace(self) -> RestartGrace | None:
        """From the epoch hash the grants and beat's rounds keep (``since``: when
        they first saw this server): a grace that ends ``restart_grace`` later.
        Two round trips (``HGET``, ``TIME``)."""
        key = self.keys.epoch()
        try:
            raw = self.client.hget(key, "since")
        except redis.RedisError as exc:
            raise LeaseError(f"reading {key!r} failed: {exc}") from exc
        if raw is None:
            return None
        try:
            since_ms = int(text(raw))
        except ValueError:
            raise MalformedDataError(
                f"Redis key {key!r}: field 'since' is not milliseconds: {raw!r}"
            ) from None
        now = self.now()
        ends_at = ms_to_datetime(since_ms + self.restart_grace_ms)
        if now >= ends_at:
            return None
        return RestartGrace(since=ms_to_datetime(since_ms), ends_at=ends_at, now=now)

    def lacks_tokens(self, tokens: Mapping[str, int]) -> bool:
        """One ``MGET`` of the schedules' token counters (on a cluster the
        hash tag keeps them in one slot)."""
        if not tokens:
            return False
        keys = [self.keys.token(name) for name in tokens]
        try:
            counters = self.client.mget(keys)
        except redis.RedisError as exc:
            raise LeaseError(f"reading token counters failed: {exc}") from exc
        for key, recorded, raw in zip(keys, tokens.values(), counters, strict=True):
            try:
                counter = int(text(raw)) if raw is not None else 0
            except ValueError:
                raise MalformedDataError(
                    f"Redis key {key!r}: not a token counter: {raw!r}"
                ) from None
            if counter < recorded:
                return True
        return False

    def get(self, schedule: str) -> LeaseInfo | None:
        key = self.keys.lease(schedule)
        try:
            data = cast("dict[bytes, bytes]", self.client.hgetall(key))
        except redis.ResponseError as exc:
            raise MalformedDataError(f"Redis key {key!r}: {exc}") from exc
        except redis.RedisError as exc:
            raise LeaseError(f"reading {key!r} failed: {exc}") from exc
        return LeaseInfo.from_hash(key, schedule, data) if data else None

    def get_many(
        self, schedules: Sequence[str]
    ) -> dict[str, LeaseInfo | MalformedDataError | None]:
        """:meth:`get` of each schedule in one round trip: ``None`` where there is
        no lease, the error (not raised) where the key holds foreign data."""
        if not schedules:
            return {}
        try:
            pipe = self.client.pipeline(transaction=False)
            for name in schedules:
                pipe.hgetall(self.keys.lease(name))
            replies = pipe.execute(raise_on_error=False)
        except redis.RedisError as exc:
            raise LeaseError(f"reading leases failed: {exc}") from exc
        out: dict[str, LeaseInfo | MalformedDataError | None] = {}
        for name, data in zip(schedules, replies, strict=True):
            key = self.keys.lease(name)
            try:
                out[name] = LeaseInfo.from_hash(key, name, hash_reply(key, data)) if data else None
            except MalformedDataError as exc:
                out[name] = exc
        return out

    def scan(self) -> LeaseScan:
        """Every lease in the index, and the keys that hold foreign data. Two round trips."""
        try:
            names = [text(n) for n in self.client.zrange(self.keys.lease_index(), 0, -1)]
        except redis.ResponseError as exc:
            raise MalformedDataError(f"Redis key {self.keys.lease_index()!r}: {exc}") from exc
        except redis.RedisError as exc:
            raise LeaseError(f"reading leases failed: {exc}") from exc
        found = self.get_many(names).values()  # None: released since the ZRANGE
        return LeaseScan(
            leases=[v for v in found if isinstance(v, LeaseInfo)],
            malformed=[v for v in found if isinstance(v, MalformedDataError)],
        )
