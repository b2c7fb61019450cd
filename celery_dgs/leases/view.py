"""Beat's view of the leases and dispatch records for one dispatch round.

:class:`BeatViewReader` calls ``scripts/beat_view.lua`` once per round: the
steal sweep plus, instead of every lease hash, the compact facts placement
needs. The owner of every lease is sent only when the lease generation
(bumped by the acquire, release and sweep scripts) changed since the reader
last got them, and the dispatch index's members only when its size is not
what the caller expects. A round with 10,000 live runs and no change is then
one small round trip instead of reading 10,000 hashes (``make bench``).
"""

from __future__ import annotations

import logging
import time
from collections import Counter
from collections.abc import Callable
from typing import Any

import redis

from ..keys import KeySpace
from .base import BeatViewSource
from .codec import ms_to_datetime, text
from .lua import SCRIPTS, call_script
from .types import LEASE_FORMAT_VERSION, BeatView

__all__ = ["FULL_READ_EVERY_S", "BeatView", "BeatViewReader"]

log = logging.getLogger(__name__)

#: Seconds after which the reader asks for every owner even if the lease
#: generation did not change: a safety net against changes made outside the
#: lease scripts (an operator editing a lease hash).
FULL_READ_EVERY_S = 60.0


class BeatViewReader(BeatViewSource):
    """Reads :class:`BeatView` s; keeps the owners of the last lease generation it read."""

    def __init__(
        self,
        client: redis.Redis,
        keys: KeySpace,
        *,
        ping_timeout_ms: int,
        steal_delay_ms: int,
        now_arg: Callable[[], str],
        full_read_every_s: float = FULL_READ_EVERY_S,
        monotonic: Callable[[], float] = time.monotonic,
    ) -> None:
        self.client, self.keys = client, keys
        self.ping_timeout_ms, self.steal_delay_ms = ping_timeout_ms, steal_delay_ms
        self._now_arg = now_arg
        self.full_read_every_s = full_read_every_s
        self._monotonic = monotonic
        self._generation = ""
        self._read_at = float("-inf")
        self._owners: dict[str, str] = {}  # schedule -> owner_name ("" for foreign data)
        self._pings: dict[str, int] = {}  # schedule -> last ping (ms) when the owners were read
        self._owner_pings: dict[str, list[int]] = {}  # owner_name -> sorted last pings
        self._counts: Counter[str] = Counter()
        #: Tests only: the server run_id the restart epoch believes it sees.
        self.run_id_override = ""

    def _read_owners(self, flat: list[Any]) -> None:
        """Keep the owners' reply: {schedule, owner_name, last ping ms, ...}."""
        owners, pings = {}, {}
        by_owner: dict[str, list[int]] = {}
        for i in range(0, len(flat) - 2, 3):
            schedule, owner, ping = text(flat[i]), text(flat[i + 1]), int(float(flat[i + 2]))
            owners[schedule], pings[schedule] = owner, ping
            if owner:
                by_owner.setdefault(owner, []).append(ping)
        for owned in by_owner.values():
            owned.sort()
        self._owners, self._pings, self._owner_pings = owners, pings, by_owner
        self._counts = Counter({o: len(p) for o, p in by_owner.items()})

    def read(self, *, expected_dispatches: int | None = None) -> BeatView:
        """Sweep and read the round's state in one round trip.

        ``expected_dispatches``: the number of records the caller believes are in
        the dispatch index; when ``ZCARD`` equals it the names are not sent back
        (``dispatch_names`` is ``None``). ``None``: always read them.
        """
        if expected_dispatches is not None and expected_dispatches < 0:
            raise ValueError(f"expected_dispatches must be >= 0, got {expected_dispatches!r}")
        mono = self._monotonic()
        known = self._generation if mono - self._read_at < self.full_read_every_s else ""
        k = self.keys
        reply: list[Any] = call_script(
            SCRIPTS,
            self.client,
            "beat_view.lua",
            [
                k.lease_index(),
                k.dispatch_index(),
                k.lease_generation(),
                k.epoch(),
                k.worker_generation(),
            ],
            [
                self._now_arg(),
                str(LEASE_FORMAT_VERSION),
                k.lease_prefix(),
                self.ping_timeout_ms,
                self.steal_delay_ms,
                "" if expected_dispatches is None else str(expected_dispatches),
                known,
                self.run_id_override,
            ],
        )
        bad = reply[3]
        malformed = {text(bad[i]): text(bad[i + 1]) for i in range(0, len(bad) - 1, 2)}
        for schedule, reason in malformed.items():
            log.error(
                "lease of %r: Redis key %r: %s (counted as running until removed)",
                schedule,
                k.lease(schedule),
                reason,
            )
        generation = text(reply[5])
        owners_read = not known or generation != known
        if owners_read:
            self._read_owners(reply[6])
            self._generation = generation
            self._read_at = mono
        takeable = frozenset(text(n) for n in reply[1])
        stale = reply[4]
        last_ping: dict[str, int] = {}
        for i in range(0, len(stale) - 3, 4):
            worker, ping = text(stale[i + 1]), int(stale[i + 3])
            last_ping[worker] = max(ping, last_ping.get(worker, ping))
        stale_workers = {worker: ms_to_datetime(ms) for worker, ms in last_ping.items()}
        counts = self._counts
        takeable_pings: dict[str, list[int]] = {}
        for name in takeable:
            owner = self._owners.get(name)
            if owner:
                if counts is self._counts:
                    counts = Counter(self._counts)
                counts[owner] -= 1
                takeable_pings.setdefault(owner, []).append(self._pings[name])
        running = self._owners.keys() - takeable if takeable else self._owners.keys()
        count = int(reply[7])
        names = None
        if expected_dispatches is None or count != expected_dispatches:
            names = frozenset(text(n) for n in reply[8])
        return BeatView(
            now=ms_to_datetime(int(reply[0])),
            takeable=takeable,
            marked=frozenset(text(n) for n in reply[2]),
            running=running,
            running_by_worker={w: c for w, c in counts.items() if c > 0},
            stale_workers=stale_workers,
            owner_pings=self._owner_pings,
            takeable_pings=takeable_pings,
            malformed=malformed,
            dispatch_count=count,
            dispatch_names=names,
            owners_read=owners_read,
            worker_generation=text(reply[9]),
        )
