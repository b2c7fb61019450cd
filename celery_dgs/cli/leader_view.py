"""The beat leader line of ``celery dgs status`` (its ``--json`` object:
:func:`celery_dgs.ops.leader.leader_json`).

Which beat dispatches (node/pid), since when, under which token, and whether
its lease has expired (no renewal for ``dgs_beat_leader_timeout``: a standby
takes over at its next check, or no beat is running).
"""

from __future__ import annotations

from datetime import datetime, timedelta

from ..core.durations import format_duration
from ..core.pace import BEAT_LIMITED_SHARE, PaceFigures
from ..leases.leader import LeaderInfo
from ..ops.leader import leader_expired
from ..ops.timetext import duration, short_time


def leader_text(info: LeaderInfo | None, now: datetime, timeout: float) -> str:
    if info is None:
        return "beat leader: none (no beat running, or the last one shut down cleanly)"
    age = duration(max(now - info.last_ping_at, now - now))
    line = (
        f"beat leader: {info.owner_node}/{info.owner_pid} since {short_time(info.since)} "
        f"(token {info.token}), renewed {age} ago"
    )
    if leader_expired(info, now, timeout):
        line += f"; EXPIRED (timeout {duration(timeout)}): no beat is dispatching"
    return line


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
