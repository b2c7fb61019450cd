"""The beat leader: which beat dispatches (node/pid), since when, under which
token, and whether its lease has expired (no renewal for
``dgs_beat_leader_timeout``: a standby takes over at its next check, or no
beat is running)."""

from __future__ import annotations

import math
from collections.abc import Sequence
from datetime import datetime, timedelta, timezone
from typing import Any

from ..beat_pace import PaceBoard
from ..core.durations import format_duration
from ..core.pace import BEAT_LIMITED_SHARE, MIN_JUDGED_WINDOW_S, PaceFigures, WindowFigures
from ..leases.leader import LeaderInfo, RedisLeader, foreign_leader
from ..overload_board import OverloadBoard, OverloadReport
from ..registry import WorkerInfo, foreign_workers_text, split_by_store
from .env import Env
from .timetext import counted, iso


def read_leader(env: Env) -> tuple[LeaderInfo | None, float]:
    """The stored beat leader lease and the leader timeout (seconds)."""
    timeout = env.settings.beat_leader_timeout
    rt = env.runtime
    return RedisLeader(rt.redis, rt.keys, timeout=timeout).current(), timeout


def beat_led_before(env: Env) -> bool:
    """Whether a beat has led on this Redis's data (so no leader now means
    the last one stopped, not that none was started yet)."""
    rt = env.runtime
    timeout = env.settings.beat_leader_timeout
    return RedisLeader(rt.redis, rt.keys, timeout=timeout).ever_granted()


def foreign_leader_of(env: Env, info: LeaderInfo | None) -> str | None:
    """Why the leading beat is another project's (:func:`foreign_leader`), or
    ``None``; reads this store's id only when the leader names a store."""
    if info is None or not info.store:
        return None
    store = env.runtime.store.stored_store_id()
    return foreign_leader(info, store, env.settings.key_prefix)


def split_foreign_workers(
    env: Env, workers: list[WorkerInfo]
) -> tuple[list[WorkerInfo], list[WorkerInfo]]:
    """``workers`` as this store's and another store's (two projects on one
    key prefix: beat places nothing on the others); reads this store's id
    only when a worker names a store."""
    if not any(w.store for w in workers):
        return workers, []
    return split_by_store(workers, env.runtime.store.stored_store_id())


def foreign_workers_note(env: Env, foreign: Sequence[WorkerInfo]) -> str | None:
    """What to tell about the live workers that serve another store, or ``None``."""
    return foreign_workers_text(list(foreign), env.settings.key_prefix) if foreign else None


def read_pace(env: Env) -> PaceFigures | None:
    """The leading beat's dispatch pace over the last minute (``None``: no
    beat wrote one in the last seconds)."""
    rt = env.runtime
    return PaceBoard(rt.redis, rt.keys).read()


def read_overload(env: Env) -> OverloadReport | None:
    """What the leading beat's ``fewest_errors`` order makes wait (``None``:
    the fair order, or no beat wrote a report in the last seconds)."""
    rt = env.runtime
    return OverloadBoard(rt.redis, rt.keys).read()


def overload_text(report: OverloadReport | None, *, shown: int = 5) -> str | None:
    """One line on what the ``fewest_errors`` order gives up, or ``None`` when
    there is nothing to say (no report, or the demand fits the slots)."""
    if report is None or not report.overloaded:
        return None
    pools = report.pools
    if len(pools) == 1:
        over = f"pool {pools[0]}'s demand exceeds its live slots"
    elif pools:
        over = f"the demand of pools {', '.join(pools)} exceeds their live slots"
    else:
        over = "the demand exceeds the live slots"
    if not report.waiting_count:
        return f"overload: {over}; fewest_errors has no schedule in ERROR waiting"
    names = ", ".join(
        f"{w.name} ({w.value:.2g} s per slot-second"
        + ("" if math.isinf(w.floor_at) else f", served by {_utc(w.floor_at):%H:%M:%S} UTC")
        + ")"
        for w in report.waiting[:shown]
    )
    more = report.waiting_count - min(shown, len(report.waiting))
    return (
        f"overload: {over}; fewest_errors makes "
        f"{report.waiting_count} schedule(s) in ERROR wait, whose runs buy the least "
        f"fresh time per slot-second: {names}" + (f" and {more} more" if more > 0 else "")
    )


def _utc(seconds: float) -> datetime:
    return datetime.fromtimestamp(seconds, timezone.utc)


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
        "store": info.store,
    }


def pace_text(pace: PaceFigures | None, *, stopped: bool = False) -> str | None:
    """The leader's dispatch pace, and whether beat, not the slots, limits the
    runs per second (``None``: no pace written lately). ``stopped``: the
    leader that wrote it stopped (its lease expired): said so."""
    if pace is None:
        return None
    head = "beat pace (the stopped leader's last):" if stopped else "beat pace:"
    if pace.window_s < MIN_JUDGED_WINDOW_S:  # a leader just elected: no rate yet
        line = (
            f"{head} {counted(pace.dispatches, 'dispatch', 'dispatches')} in the "
            f"{pace.window_s:.1f}s it has led ({counted(pace.rounds, 'round')}; "
            "too short for a rate)"
        )
    else:
        line = (
            f"{head} {pace.dispatches_per_s:.1f} dispatches/s over the last "
            f"{format_duration(timedelta(seconds=round(pace.window_s)))} "
            f"({pace.rounds} rounds, busy {pace.busy_share:.0%} of the time)"
        )
    if pace.window is not None:
        line += "; " + window_text(pace.window)
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


def window_text(window: WindowFigures) -> str:
    """What beat's window of schedules holds: every schedule that can start
    within its horizon, or (full) the most urgent, reading on for the
    certainty rule up to its room (at it, the default order's picks are the
    held ones' until dispatches or the next start-over make room), and past
    it the schedules due now that a round with free slots read (the
    eligible part)."""
    held = f"window: holds {window.held:,} schedules of {window.size:,}"
    if not window.full:
        return f"{held} (every one that can start within it)"
    if window.room is None:
        return f"{held} (full; reads on as far as the certainty rule needs)"
    room = max(window.room, window.size)
    past = "; the rest are due now" if window.held > room else ""
    if window.room <= window.size:
        return f"{held} (full{past})"
    if window.at_room:
        return f"{held} (full, read on to its room of {window.room:,}{past})"
    return f"{held} (full; reads on up to {window.room:,})"
