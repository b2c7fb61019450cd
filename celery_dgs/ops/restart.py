"""The restart grace as operators see it: after Redis restarted (or failed
over, or is first used), the schedules whose lease data the new server lacks
get no new lease for ``ping_timeout + steal_delay``, so that a run still live
from before cannot overlap a new one (docs/guarantees.md). Workers hold such
dispatches meanwhile, so ``status`` says why nothing starts."""

from __future__ import annotations

from typing import Any

from ..leases.types import RestartGrace
from .env import Env
from .timetext import iso, relative

#: Schedules with a recorded token whose Redis counters are compared: after a
#: loss of data every counter is gone, after a first use or a restart that
#: kept the data none is below.
PROBED_SCHEDULES = 10


def read_restart_grace(env: Env) -> RestartGrace | None:
    """The grace in force, or ``None``; ``None`` too when the server holds
    nothing back (a first use, or a restart that kept its data: the counters
    of the probed schedules are not below their recorded tokens)."""
    rt = env.runtime
    grace = rt.leases.restart_grace()
    if grace is None:
        return None
    # Schedules that ran before the new server: the ones the grace holds back
    # (those of the runs since, never run before, are granted at once).
    ran_before = rt.store.granted_tokens(PROBED_SCHEDULES, started_before=grace.since)
    if not rt.leases.lacks_tokens(ran_before):
        return None
    return grace


def restart_text(grace: RestartGrace | None) -> str | None:
    """One line on the grace in force (``None``: none)."""
    if grace is None:
        return None
    return (
        f"Redis restart grace: the server is new since {grace.since:%H:%M:%S} UTC "
        "(restarted, failed over or first used); schedules that ran before and whose "
        f"lease data it lacks get no new lease until {grace.ends_at:%H:%M:%S} UTC "
        f"({relative(grace.ends_at, grace.now)}: ping_timeout + steal_delay), so a run "
        "from before cannot overlap a new one; workers hold their dispatches until then"
    )


def restart_json(grace: RestartGrace | None) -> dict[str, Any] | None:
    """The grace as ``status --json``'s ``redis_restart_grace``."""
    if grace is None:
        return None
    return {
        "since": iso(grace.since),
        "ends_at": iso(grace.ends_at),
        "seconds_left": (grace.ends_at - grace.now).total_seconds(),
    }
