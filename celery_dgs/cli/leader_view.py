"""The beat leader line of ``celery dgs status`` (text and ``--json``).

Which beat dispatches (node/pid), since when, under which token, and whether
its lease has expired (no renewal for ``dgs_beat_leader_timeout``: a standby
takes over at its next check, or no beat is running).
"""

from __future__ import annotations

from datetime import datetime
from typing import Any

from ..leases.leader import LeaderInfo, RedisLeader
from .context import Env
from .output import duration, iso, short_time


def read_leader(env: Env) -> tuple[LeaderInfo | None, float]:
    """The stored beat leader lease and the leader timeout (seconds)."""
    timeout = env.settings.beat_leader_timeout
    rt = env.runtime
    return RedisLeader(rt.redis, rt.keys, timeout=timeout).current(), timeout


def _expired(info: LeaderInfo, now: datetime, timeout: float) -> bool:
    return (now - info.last_ping_at).total_seconds() > timeout


def leader_json(info: LeaderInfo | None, now: datetime, timeout: float) -> dict[str, Any] | None:
    if info is None:
        return None
    return {
        "node": info.owner_node,
        "pid": info.owner_pid,
        "since": iso(info.since),
        "token": info.token,
        "last_renewal_at": iso(info.last_ping_at),
        "expired": _expired(info, now, timeout),
    }


def leader_text(info: LeaderInfo | None, now: datetime, timeout: float) -> str:
    if info is None:
        return "beat leader: none (no beat running, or the last one shut down cleanly)"
    age = duration(max(now - info.last_ping_at, now - now))
    line = (
        f"beat leader: {info.owner_node}/{info.owner_pid} since {short_time(info.since)} "
        f"(token {info.token}), renewed {age} ago"
    )
    if _expired(info, now, timeout):
        line += f"; EXPIRED (timeout {duration(timeout)}): no beat is dispatching"
    return line
