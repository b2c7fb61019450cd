"""The live runs' leases, as Redis holds them now."""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from datetime import datetime, timedelta

from ..leases.types import LeaseInfo
from ..registry import WorkerInfo
from ..status import ping_age
from .env import Env
from .timetext import duration, relative, short_time


@dataclass(frozen=True)
class LiveLeases:
    """Every readable lease (the oldest run first), Redis' ``now``, and what
    could not be read (one sentence each)."""

    leases: list[LeaseInfo]
    now: datetime
    malformed: list[str]


def read_leases(env: Env) -> LiveLeases:
    leases = env.runtime.leases
    scan = leases.scan()
    now = leases.now()
    ordered = sorted(scan.leases, key=lambda lease: (lease.started_at, lease.schedule))
    return LiveLeases(ordered, now, [str(exc) for exc in scan.malformed])


def owner_restarted(lease: LeaseInfo, workers: Iterable[WorkerInfo]) -> datetime | None:
    """When the live worker of the lease's owner name registered, if that was
    after the lease's last ping: the worker restarted under the same name
    (``kill -9`` and a process manager), so the run died with its earlier
    instance; ``None`` otherwise."""
    for worker in workers:
        registered = worker.registered_at
        if worker.name == lease.owner_name and registered and registered > lease.last_ping_at:
            return registered
    return None


def other_server(lease: LeaseInfo, pool: str, workers: Iterable[WorkerInfo]) -> bool | None:
    """Whether a live worker other than the lease's owner consumes ``pool``
    (``None``: no worker registered, as with ``dgs_capacity``: unknown)."""
    workers = list(workers)
    if not workers:
        return None
    return any(w.name != lease.owner_name and pool in w.pools for w in workers)


def silent_owner_note(
    name: str,
    lease: LeaseInfo,
    now: datetime,
    *,
    ping_timeout: float,
    steal_delay: float,
    can_start_by: datetime | None = None,
    restarted_at: datetime | None = None,
    pool: str | None = None,
    workers: Iterable[WorkerInfo] = (),
) -> str | None:
    """Why a run whose owner stopped pinging, or restarted since its last ping
    (``restarted_at``: :func:`owner_restarted`), still shows as running, and
    when its schedule can run again (``None`` while the owner pings): once its
    lease can be taken over, and not before ``can_start_by`` (its cooldown
    after the run's start, or a retry step: a takeable lease frees the slot,
    not the schedule's rules). With the live ``workers`` and the schedule's
    ``pool``: when no other live worker consumes it (:func:`other_server`),
    it runs again only once one does."""
    age = ping_age(lease, now)
    if age <= ping_timeout and restarted_at is None:
        return None
    marked = lease.steal_start_at
    if marked is not None:
        free_at, rule = marked + timedelta(seconds=steal_delay), "steal_delay after beat marked it"
    else:
        free_at = lease.last_ping_at + timedelta(seconds=ping_timeout + steal_delay)
        rule = "ping_timeout + steal_delay after its last ping"
    when = "at beat's next round" if free_at <= now else relative(free_at, now)
    if restarted_at is not None:
        why = (
            f"its owner {lease.owner_name} restarted {relative(restarted_at, now)}, after the "
            f"run's last ping: the run ended with its earlier process"
        )
    else:
        why = (
            f"its owner {lease.owner_name} has not pinged for {duration(age)} "
            f"(dgs_ping_timeout {duration(ping_timeout)}): it may have died"
        )
    head = f"{name}: {why}; its lease can be taken over {when} ({rule})"
    if pool is not None and restarted_at is None and other_server(lease, pool, workers) is False:
        return (
            f"{head}, but no other live worker consumes its pool {pool!r}: the schedule "
            "may run again once one does (its owner restarted, or another started)"
        )
    if can_start_by is not None and can_start_by > max(free_at, now):
        return (
            f"{head}; the schedule may run again from when it can start, "
            f"{relative(can_start_by, now)} ({short_time(can_start_by)}), when beat's order "
            "reaches it, and the run is recorded stolen then"
        )
    return f"{head}; the schedule may run again from then, when beat's order reaches it"
