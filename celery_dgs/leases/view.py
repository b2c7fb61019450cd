"""Beat's view of the leases and dispatch records for one dispatch round.

:func:`read_beat_view` is one call of ``scripts/beat_view.lua``: the steal
sweep plus, instead of every lease hash, the compact facts placement needs
(which schedules run, runs per worker, workers with a stale lease) and the
dispatch index's members only when its size is not what the caller expects.
With 10,000 live runs that is one round trip of a few milliseconds where
reading every lease hash took over a second (``make bench``).
"""

from __future__ import annotations

import logging
from dataclasses import dataclass
from datetime import datetime
from typing import Any

import redis

from ..connection import call_script
from ..keys import KeySpace
from .codec import ms_to_datetime, text
from .lua import SCRIPTS
from .types import LEASE_FORMAT_VERSION

log = logging.getLogger(__name__)


@dataclass(frozen=True, kw_only=True)
class BeatView:
    """One snapshot (Redis ``TIME`` ``now``); see ``beat_view.lua`` for each field's rules."""

    now: datetime
    #: Leases whose steal delay has passed: the schedule is not running any more.
    takeable: frozenset[str]
    #: Schedules holding a lease that is not takeable (foreign data included).
    running: frozenset[str]
    #: Running leases per worker (``owner_name``).
    running_by_worker: dict[str, int]
    #: Workers (``owner_name``) owning a lease not pinged within ``ping_timeout``.
    stale_workers: frozenset[str]
    #: Schedule -> what is wrong with the data under its lease key.
    malformed: dict[str, str]
    dispatch_count: int
    #: The dispatch index's members; ``None`` when not read because
    #: ``dispatch_count`` was the expected one.
    dispatch_names: frozenset[str] | None


def read_beat_view(
    client: redis.Redis,
    keys: KeySpace,
    *,
    now_arg: str,
    ping_timeout_ms: int,
    steal_delay_ms: int,
    expected_dispatches: int | None = None,
) -> BeatView:
    """Sweep and read the round's state in one round trip (use
    :meth:`RedisLeases.beat_view <celery_dgs.leases.redis.RedisLeases.beat_view>`).

    ``expected_dispatches``: the number of records the caller believes are in
    the dispatch index; when ``ZCARD`` equals it the names are not sent back
    (``dispatch_names`` is ``None``). ``None``: always read them.
    """
    if expected_dispatches is not None and expected_dispatches < 0:
        raise ValueError(f"expected_dispatches must be >= 0, got {expected_dispatches!r}")
    k = keys
    reply: list[Any] = call_script(
        SCRIPTS, client, "beat_view.lua",
        [k.lease_index(), k.dispatch_index()],
        [now_arg, str(LEASE_FORMAT_VERSION), k.lease_prefix(), ping_timeout_ms, steal_delay_ms,
         "" if expected_dispatches is None else str(expected_dispatches)],
    )  # fmt: skip
    bad = reply[3]
    malformed = {text(bad[i]): text(bad[i + 1]) for i in range(0, len(bad) - 1, 2)}
    for schedule, reason in malformed.items():
        log.error("lease of %r: Redis key %r: %s (counted as running until removed)",
                  schedule, k.lease(schedule), reason)  # fmt: skip
    owners = reply[5]
    count = int(reply[7])
    names = None
    if expected_dispatches is None or count != expected_dispatches:
        names = frozenset(text(n) for n in reply[8])
    return BeatView(
        now=ms_to_datetime(int(reply[0])),
        takeable=frozenset(text(n) for n in reply[1]),
        running=frozenset(text(n) for n in reply[4]),
        running_by_worker={text(owners[i]): int(owners[i + 1])
                           for i in range(0, len(owners) - 1, 2)},
        stale_workers=frozenset(text(n) for n in reply[6]),
        malformed=malformed,
        dispatch_count=count,
        dispatch_names=names,
    )  # fmt: skip
