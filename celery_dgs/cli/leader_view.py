"""The beat leader line of ``celery dgs status`` (its ``--json`` object:
:func:`celery_dgs.ops.leader.leader_json`).

Which beat dispatches (node/pid), since when, under which token, and whether
its lease has expired (no renewal for ``dgs_beat_leader_timeout``: a standby
takes over at its next check, or no beat is running).
"""

from __future__ import annotations

from datetime import datetime

from ..leases.leader import LeaderInfo
from ..ops.leader import leader_expired
from ..ops.timetext import duration, short_time


def leader_text(
    info: LeaderInfo | None, now: datetime, timeout: float, *, led_before: bool = False
) -> str:
    """``led_before``: a beat has led on this Redis's data (with no leader
    now, the last one shut down cleanly and none took over)."""
    if info is None and led_before:
        return (
            "beat leader: none: the last beat shut down cleanly (resigned) and no other "
            "took over; no beat is dispatching"
        )
    if info is None:
        return "beat leader: none (no beat has led on this Redis yet)"
    age = duration(max(now - info.last_ping_at, now - now))
    line = (
        f"beat leader: {info.owner_node}/{info.owner_pid} since {short_time(info.since)} "
        f"(token {info.token}), renewed {age} ago"
    )
    if leader_expired(info, now, timeout):
        line += f"; EXPIRED (timeout {duration(timeout)}): no beat is dispatching"
    return line
