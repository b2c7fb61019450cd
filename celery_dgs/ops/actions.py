"""The operator actions: run now, pause, resume, cancel a run.

Each returns what it changed, or that nothing changed and why, as an
:class:`ActionResult`. An unknown schedule is :class:`~.errors.UnknownTarget`.
"""

from __future__ import annotations

from dataclasses import dataclass

import redis

from ..core.spec_values import AD_HOC_PRIORITY
from ..errors import DgsError
from ..leases.types import CancelStatus, LeaseInfo
from .env import Env, utcnow
from .errors import ActionRefused
from .lookup import resolve_schedule
from .timetext import duration, short_time


@dataclass(frozen=True)
class ActionResult:
    """What an operator action did: whether it changed anything, and the lines
    that say what (or why nothing changed)."""

    changed: bool
    lines: tuple[str, ...]


def request_run(env: Env, name: str, priority: int | None = None) -> ActionResult:
    """Ask beat to run ``name`` at its next free slot (``celery dgs run``).
    Raises :class:`~.errors.ActionRefused` for an inactive schedule."""
    rt = env.runtime
    schedule = resolve_schedule(env, name)
    if not schedule.active:
        raise ActionRefused(
            f"{schedule.name} is inactive (removed, or no longer declared): beat does not "
            "schedule it; nothing changed"
        )
    if schedule.run_requested_at is not None and schedule.run_requested_priority != priority:
        rt.store.request_run(schedule.name, schedule.run_requested_at, priority=priority)
        return ActionResult(
            True,
            (
                f"the run of {schedule.name} requested at "
                f"{short_time(schedule.run_requested_at)} is now served in priority class "
                f"{AD_HOC_PRIORITY if priority is None else priority}",
            ),
        )
    if schedule.run_requested_at is not None:
        return ActionResult(
            False,
            (
                f"a run of {schedule.name} was already requested at "
                f"{short_time(schedule.run_requested_at)} and is not dispatched yet; "
                "nothing changed",
            ),
        )
    now = utcnow()
    rt.store.request_run(schedule.name, now, priority=priority)
    if priority is None or priority == AD_HOC_PRIORITY:
        ahead = "ahead of scheduled work"
    else:
        ahead = f"in priority class {priority} (due work of classes below {priority} goes first)"
    lines = [
        f"requested a run of {schedule.name} at {short_time(now)}: beat dispatches it {ahead} "
        "at the next free worker slot"
    ]
    lease, unread = live_lease(env, schedule.name)
    if lease is not None:
        lines.append(
            f"note: {schedule.name} is running on {lease.owner_name}; the requested run "
            "starts after that run ends"
        )
    if unread is not None:
        lines.append(unread)
    if schedule.paused:
        lines.append(
            f"note: {schedule.name} is paused; the requested run starts once it is resumed "
            f"(celery dgs resume {schedule.name})"
        )
    return ActionResult(True, tuple(lines))


def set_paused(env: Env, name: str, paused: bool) -> ActionResult:
    """Pause or resume ``name`` (``celery dgs pause`` / ``resume``). Raises
    :class:`~.errors.ActionRefused` for an inactive schedule (an ended
    deferred check, or a schedule removed or no longer declared)."""
    rt = env.runtime
    schedule = resolve_schedule(env, name)
    if not schedule.active:
        what = "pause" if paused else "resume"
        if schedule.kind == "check":
            why = "the deferred check has ended: beat never dispatches it again"
        else:
            why = "it is inactive (removed, or no longer declared): beat does not schedule it"
        raise ActionRefused(f"cannot {what} {schedule.name}: {why}; nothing changed")
    if not rt.store.set_paused(schedule.name, paused):
        state = "was already paused" if paused else "was not paused"
        return ActionResult(False, (f"{schedule.name} {state}; nothing changed",))
    if not paused:
        requested = (
            "; its requested run starts at the next free slot"
            if schedule.run_requested_at is not None
            else ""
        )
        return ActionResult(True, (f"resumed {schedule.name}: beat schedules it again{requested}",))
    lease, unread = live_lease(env, schedule.name)
    if unread is not None:
        running = "whether it was running is unknown"
    elif lease is not None:
        running = f"was running: {lease.owner_name} keeps its current run"
    else:
        running = "was not running"
    done = f"paused {schedule.name} ({running}); beat dispatches no new run until resumed"
    return ActionResult(True, (done,) if unread is None else (done, unread))


def live_lease(env: Env, name: str) -> tuple[LeaseInfo | None, str | None]:
    """The schedule's live lease, read after a change made in the store:
    ``(lease or None, None)``, or ``(None, a note line)`` when Redis cannot
    be read (the change is made whatever Redis's state)."""
    try:
        return env.runtime.leases.get(name), None
    except (redis.RedisError, DgsError) as exc:
        return None, f"note: its live run could not be read (Redis: {exc}); the change is made"


def cancel_run(
    env: Env, name: str, *, token: int | None = None, run_id: str | None = None
) -> ActionResult:
    """Ask the worker running ``name`` to stop that run (``celery dgs cancel``):
    the run holding the lease now, or only the one with ``token`` / ``run_id``."""
    rt = env.runtime
    schedule = resolve_schedule(env, name)
    lease = rt.leases.get(schedule.name)
    if lease is None:
        return ActionResult(False, (f"{schedule.name} has no live run; nothing to cancel",))
    if (token is not None and lease.token != token) or (
        run_id is not None and lease.owner_tag != run_id
    ):
        asked = " ".join(f"{k} {v}" for k, v in (("run", run_id), ("token", token)) if v)
        return ActionResult(
            False,
            (
                f"{schedule.name}'s {asked} is not running (the live run is {lease.owner_tag} "
                f"on {lease.owner_name}, token {lease.token}); nothing cancelled",
            ),
        )
    who = f"{schedule.name}'s run {lease.owner_tag} on {lease.owner_name} (token {lease.token})"
    if lease.cancel_requested:
        return ActionResult(False, (f"cancel of {who} was already requested; nothing changed",))
    result = rt.leases.request_cancel(schedule.name, owner_tag=lease.owner_tag, token=lease.token)
    if result.status is CancelStatus.NO_LEASE:
        return ActionResult(False, (f"{who} ended meanwhile; nothing to cancel",))
    if result.status is CancelStatus.OTHER_RUN:
        return ActionResult(
            False,
            (
                f"{who} ended meanwhile and run {result.owner_tag} (token {result.token}) started; "
                "nothing cancelled (run the command again to cancel the new run)",
            ),
        )
    if result.status is CancelStatus.ALREADY:
        return ActionResult(False, (f"cancel of {who} was already requested; nothing changed",))
    age = duration(rt.leases.now() - lease.started_at)
    again = (
        ""
        if schedule.paused
        else f"; the schedule is not paused: beat dispatches it again when it is due "
        f"(at once, if it is due now: celery dgs pause {schedule.name} keeps it from running)"
    )
    return ActionResult(
        True,
        (
            f"requested cancel of {who}, started {age} ago: the worker stops it at its "
            f"next ping (every {duration(env.settings.ping_interval)}) and records it "
            f"cancelled; a run that ends before that ping is recorded as it ends{again}",
        ),
    )
