"""A lease as ``celery dgs leases`` shows it: its owner's ping age and its
steal state."""

from __future__ import annotations

from datetime import datetime

from ..leases.types import LeaseInfo

#: Steal states of a lease (``celery dgs leases``).
STEAL_NONE = "none"  # pinged within ping_timeout
STEAL_STALE = "stale"  # no ping for ping_timeout; no sweep has marked a steal yet
STEAL_PENDING = "pending"  # steal marked; the owner may still ping within steal_delay
STEAL_TAKEABLE = "takeable"  # steal delay over: beat treats it as not running


def ping_age(lease: LeaseInfo, now: datetime) -> float:
    """Seconds since the owner's last ping (never negative)."""
    return max(0.0, (now - lease.last_ping_at).total_seconds())


def steal_state(lease: LeaseInfo, now: datetime, *, ping_timeout: float, steal_delay: float) -> str:
    """One of :data:`STEAL_NONE`, :data:`STEAL_STALE`, :data:`STEAL_PENDING`,
    :data:`STEAL_TAKEABLE`, with the lease backend's boundaries (at exactly the
    limit the lease is still the owner's)."""
    if lease.steal_start_at is not None:
        if (now - lease.steal_start_at).total_seconds() > steal_delay:
            return STEAL_TAKEABLE
        return STEAL_PENDING
    return STEAL_STALE if ping_age(lease, now) > ping_timeout else STEAL_NONE
