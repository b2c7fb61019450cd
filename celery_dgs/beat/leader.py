"""Beat leadership: which of several running beats dispatches (docs/beat-ha.md).

Every beat is a candidate. :meth:`BeatLeadership.check`, called at the start of
each tick, renews or takes the leader lease in Redis
(:class:`~celery_dgs.leases.leader.RedisLeader`):

- the leader renews every ``timeout / 3`` (monotonic clock) and otherwise
  trusts its lease; that is safe because every dispatch it writes is fenced by
  its :attr:`~BeatLeadership.fence` in the same Lua call
  (``dispatch_add.lua``): a beat that lost the lease while stopped between the
  check and the write is refused and publishes nothing;
- a standby asks at every check (every :attr:`~BeatLeadership.standby_interval`)
  and takes over once the leader has not renewed for ``timeout``; or sooner
  when the leader ran on this host and its process is gone (a beat killed
  and started again), once the leader has not renewed for a renew interval
  (two for a leader seen only by its pid: :meth:`BeatLeadership._gone_after`).

Gaining and losing leadership are logged (INFO / WARNING) with the token.
"""

from __future__ import annotations

import enum
import logging
import os
import time
import uuid
from collections.abc import Callable
from datetime import datetime

from ..clock_offset import OffsetWatch, beat_offset_text, measured_offset
from ..leases.leader import LeaderFence, LeaderInfo, RedisLeader, foreign_leader

logger = logging.getLogger("celery_dgs.beat")

#: The leader renews its lease this many times per timeout.
RENEWALS_PER_TIMEOUT = 3


class Role(enum.Enum):
    LEADER = "leader"  # leading, as at the previous check
    ELECTED = "elected"  # leading since this check (a new term: adopt the pending dispatches)
    STANDBY = "standby"  # another beat leads; do not dispatch


def process_gone(pid: int) -> bool:
    """True if no process ``pid`` runs on this host (a zombie counts as gone)."""
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return True
    except PermissionError:
        return False  # another user's process
    try:
        with open(f"/proc/{pid}/stat", "rb") as stat:
            return stat.read().rsplit(b")", 1)[1].split()[0] == b"Z"
    except (OSError, IndexError):
        return False


def process_scope() -> str:
    """This host's boot id and this process's pid namespace (Linux), within
    which a pid names one process; ``""`` where they cannot be read."""
    try:
        with open("/proc/sys/kernel/random/boot_id") as boot:
            boot_id = boot.read().strip()
        return f"{boot_id}/{os.stat('/proc/self/ns/pid').st_ino}"
    except OSError:
        return ""


def describe(info: LeaderInfo | None) -> str:
    if info is None:
        return "nobody"
    return f"{info.owner_node}/{info.owner_pid} (token {info.token})"


class BeatLeadership:
    """This beat's view of the leader lease; one per beat process."""

    def __init__(
        self,
        leader: RedisLeader,
        *,
        node: str,
        pid: int,
        store_poll_interval: float,
        store: str = "",
        prefix: str = "",
        monotonic: Callable[[], float] = time.monotonic,
        gone: Callable[[int], bool] = process_gone,
        wall: Callable[[], float] | None = None,
        scope: str | None = None,
    ) -> None:
        self.leader = leader
        #: Whether a pid names no process on this host (the leader's, when it
        #: ran on this node).
        self.gone = gone
        #: This process's scope: the host's boot and its pid namespace, within
        #: which pids name processes (``""``: unknown).
        self.scope = process_scope() if scope is None else scope
        #: This host's wall clock, read around each check to measure its
        #: offset from Redis's (``None``: not measured).
        self.wall = wall
        self.clock = OffsetWatch(logger)
        self.node = node
        self.pid = pid
        #: The id of the schedule store this beat serves, and the key prefix:
        #: a leader serving another store is another project's (logged once).
        self.store, self.prefix = store, prefix
        self._foreign_logged: str | None = None
        self.monotonic = monotonic
        self.owner_tag = f"{node}:{pid}:{uuid.uuid4().hex[:12]}"
        timeout = leader.timeout_ms / 1000.0
        #: The leader renews at least this often (seconds).
        self.renew_interval = timeout / RENEWALS_PER_TIMEOUT
        #: A standby checks this often: a take-over happens within
        #: timeout + standby_interval of the leader's last renewal.
        self.standby_interval = min(self.renew_interval, store_poll_interval)
        self.leading = False
        self.token = 0
        self.since: datetime | None = None
        #: The other beat that leads, as seen at the last check (standby only).
        self.holder: LeaderInfo | None = None
        self._renewed_at = float("-inf")
        self._max_token = 0
        self._standby_logged = False

    @property
    def fence(self) -> LeaderFence:
        """What this beat's dispatch writes carry. Always a fence, never "unfenced":
        Redis accepts it only while this beat's tag and token hold the lease
        (token 0, before any term, never does)."""
        return LeaderFence(owner_tag=self.owner_tag, token=self.token)

    def check(self) -> Role:
        """Renew (when due) or try to take the lease; raises ``LeaseError`` when
        Redis cannot answer (the caller then does not dispatch)."""
        mono = self.monotonic()
        if self.leading and mono - self._renewed_at < self.renew_interval:
            return Role.LEADER
        before = None if self.wall is None else self.wall()
        result = self.leader.elect(
            owner_tag=self.owner_tag,
            owner_node=self.node,
            owner_pid=self.pid,
            min_token=self._max_token,
            store=self.store,
            scope=self.scope,
        )
        if self.wall is not None and before is not None:
            offset = measured_offset(before, result.now, self.wall())
            self.clock.measured(offset, beat_offset_text(offset))
        gone_after = None if result.leading else self._gone_after(result.holder)
        if gone_after is not None:
            assert result.holder is not None
            result = self.leader.elect(
                owner_tag=self.owner_tag,
                owner_node=self.node,
                owner_pid=self.pid,
                min_token=max(self._max_token, result.holder.token),
                store=self.store,
                scope=self.scope,
                gone_tag=result.holder.owner_tag,
                gone_after=gone_after,
            )
        if not result.leading:
            self.holder = result.holder
            self._log_foreign(result.holder)
            if result.holder is not None:
                self._max_token = max(self._max_token, result.holder.token)
            if self.leading:
                logger.warning(
                    "celery-dgs beat: lost leadership (token %d) to %s; standing by",
                    self.token,
                    describe(result.holder),
                )
            elif not self._standby_logged:
                logger.info("celery-dgs beat: standing by; %s leads", describe(result.holder))
            self._standby_logged = True
            self.leading = False
            return Role.STANDBY
        self._renewed_at = mono  # measured before the call: errs on the early side
        self._max_token = max(self._max_token, result.token)
        new_term = not self.leading or result.token != self.token
        self.leading, self.token, self.since, self.holder = True, result.token, result.since, None
        self._standby_logged = False
        if not new_term:
            return Role.LEADER
        replaced = ""
        if result.previous is not None:
            silent = (result.now - result.previous.last_ping_at).total_seconds()
            replaced = f"; replaced {describe(result.previous)}, silent for {silent:.1f}s" + (
                ", its process gone from this host"
                if silent * 1000 <= self.leader.timeout_ms
                else ""
            )
        logger.info(
            "celery-dgs beat: leading as %s/%d (token %d)%s",
            self.node,
            self.pid,
            self.token,
            replaced,
        )
        return Role.ELECTED

    def _gone_after(self, holder: LeaderInfo | None) -> float | None:
        """How long the leader must have been silent to be taken over before
        the timeout, when it ran on this host and its process is gone (this
        beat's own predecessor, killed without resigning); ``None``: the
        timeout. Within this beat's process scope (boot and pid namespace),
        a pid that names no process is gone: a renew interval. A leader of
        another scope under this host name with this beat's pid (a
        container's beat restarted as pid 1 in a new namespace) is taken for
        gone after two renew intervals, longer than a live leader's renewal
        gap; any other is left to the timeout (beats on one host name in
        pid namespaces of their own, or hosts of one name, cannot see each
        other's processes)."""
        if holder is None or holder.owner_node != self.node:
            return None
        if self.scope and holder.scope == self.scope:
            gone = holder.owner_pid == self.pid or self.gone(holder.owner_pid)
            return self.renew_interval if gone else None
        if holder.owner_pid == self.pid:
            return 2 * self.renew_interval
        return None

    def _log_foreign(self, holder: LeaderInfo | None) -> None:
        """An error, once per leader, when the leader serves another store."""
        why = foreign_leader(holder, self.store, self.prefix)
        if why is None or holder is None or self._foreign_logged == holder.owner_tag:
            return
        self._foreign_logged = holder.owner_tag
        logger.error("celery-dgs beat: %s", why)

    def lost(self, why: str) -> None:
        """A fenced write was refused: stop leading at once (the next check asks Redis)."""
        if self.leading:
            logger.warning(
                "celery-dgs beat: lost leadership (token %d): %s; standing by", self.token, why
            )
        self.leading = False

    def resign(self) -> None:
        """Step down on a clean shutdown so a standby takes over at its next check."""
        if not self.leading:
            return
        self.leading = False
        if self.leader.resign(self.owner_tag):
            logger.info("celery-dgs beat: resigned leadership (token %d)", self.token)
