"""The beat leader: which beat dispatches (node/pid), since when, under which
token, and whether its lease has expired (no renewal for
``dgs_beat_leader_timeout``: a standby takes over at its next check, or no
beat is running)."""

from __future__ import annotations

from datetime import datetime, timedelta
from typing import Any

from ..beat_pace import PaceBoard
from ..core.durations import format_duration
from ..core.pace import BEAT_LIMITED_SHARE, PaceFigures
from ..leases.leader import LeaderInfo, RedisLeader
from .env import Env
from .timetext import iso


def read_leader(env: Env) -> tuple[LeaderInfo | None, float]:
    """The stored beat leader lease and the leader timeout (seconds)."""
    timeout = env.settings.beat_leader_timeout
    rt = env.runtime
    return RedisLeader(rt.redis, rt.keys, timeout=timeout).current(), timeout


def read_pace(env: Env) -> PaceFigures | None:
    """The leading beat's dispatch pace over the last minute (``None``: no
    beat wrote one in the last seconds)."""
    rt = env.runtime
    return PaceBoard(rt.redis, rt.keys).read()


def leader_expired(info: LeaderInfo, now: datetime, timeout: float) -> bool:
    """Whether the leader has not renewed its lease for ``timeout`` seconds."""
    return (now - info.last_ping_at).total_seconds() > timeout


def leader_json(info: LeaderInfo | None, now: datetime, timeout: float) -> dict[str, Any] | None:
    """The leader as a JSON object (``None``: no leader)."""
    if info is None:
        return None
    return {
        "node": info.owner_node,
        "pid": info.owner_pid,
        "since": iso(info.since),
        "token": info.token,
        "last_renewal_at": iso(info.last_ping_at),
        "expired": leader_expired(info, now, timeout),
    }


def pace_text(pace: PaceFigures | None) -> str | None:
    """The leader's dispatch pace, and whether beat, not the slots, limits the
    runs per second (``None``: no pace written lately)."""
    if pace is None:
        return None
    line = (
        f"beat pace: {pace.dispatches_per_s:.1f} dispatches/s over the last "
        f"{format_duration(timedelta(seconds=round(pace.window_s)))} "
        f"({pace.rounds} rounds, busy {pace.busy_share:.0%} of the time)"
    )
    if not pace.beat_limited:
        return line
    if pace.busy_share >= BEAT_LIMITED_SHARE:
        why = f"its rounds take {pace.busy_share:.0%} of its time"
    else:
        why = (
            f"{pace.capped_rounds} of {pace.rounds} rounds stopped at "
            "dgs_max_dispatches_per_tick with more due"
        )
    return f"{line}; WARNING: beat, not the slots, limits the runs per second: {why}"
