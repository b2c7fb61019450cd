"""What the metrics see of beat: a frozen :class:`BeatSnapshot` of its state,
published by beat's thread on demand.

Copying a million tracked schedules every round would cost more than the round,
so beat builds a snapshot only when asked: the metrics' thread asks
(:meth:`SnapshotSlot.request`), beat builds and publishes one at the end of
its next round (:meth:`SnapshotSlot.publish`), and the metrics wait for it a
short while and otherwise serve the latest one. The tracked values it holds are
shared with beat's state, which replaces them and never changes them.
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field

from .state import BeatState
from .types import Tracked


@dataclass(frozen=True)
class BeatSnapshot:
    """Beat's state at the end of one round."""

    #: The tracked schedules (held ones too; deferred checks among them).
    tracked: Mapping[str, Tracked] = field(default_factory=dict)
    #: Held because paused or disabled (not those no live worker may run:
    #: the metrics find those from the workers).
    held: frozenset[str] = frozenset()
    #: The deferred checks beat holds (its window): not schedules in the metrics.
    checks: frozenset[str] = frozenset()
    #: Active schedules beat cannot schedule: name -> why.
    unschedulable: Mapping[str, str] = field(default_factory=dict)
    #: How many dispatches are not started yet.
    pending: int = 0
    #: ``should_start_by`` of the most urgent eligible schedule (``None``: none,
    #: or standing by).
    most_urgent_should_start_by: float | None = None
    #: When the last tick completed (beat's monotonic clock).
    last_tick: float | None = None
    dispatched_total: int = 0
    live_slots: int | None = None
    #: Eligible schedules waiting for a slot of their busy workers, out of the
    #: index (:class:`~celery_dgs.core.slot_wait.SlotWait`).
    waiting_for_slot: int = 0

    @classmethod
    def of(cls, state: BeatState, *, waiting_for_slot: int = 0) -> BeatSnapshot:
        """A copy of ``state`` (on beat's thread: nothing changes it meanwhile)."""
        return cls(
            waiting_for_slot=waiting_for_slot,
            tracked=dict(state.tracked),
            held=frozenset(state.held - state.unserved),
            checks=frozenset(state.checks),
            unschedulable=dict(state.unschedulable),
            pending=len(state.pending),
            most_urgent_should_start_by=state.most_urgent_should_start_by,
            last_tick=state.last_tick,
            dispatched_total=state.dispatched_total,
            live_slots=state.live_slots,
        )


class SnapshotSlot:
    """The latest published snapshot, and whether a newer one is asked for."""

    def __init__(self, wake: Callable[[], None] | None = None) -> None:
        #: Called when a reader asks: wakes beat from its wait between rounds.
        self.wake = wake
        self._changed = threading.Condition()
        self._latest = BeatSnapshot()
        self._serial = 0
        #: Whether a reader waits for a new snapshot (read by beat each round).
        self.asked = False

    def publish(self, snapshot: BeatSnapshot) -> None:
        """Beat's thread: make ``snapshot`` the latest; wake the readers."""
        with self._changed:
            self._latest = snapshot
            self._serial += 1
            self.asked = False
            self._changed.notify_all()

    def latest(self) -> BeatSnapshot:
        with self._changed:
            return self._latest

    def request(self, timeout_s: float) -> BeatSnapshot:
        """Ask beat for a new snapshot (waking it, so a beat waiting for
        its next round answers at once) and wait up to ``timeout_s`` for it;
        then the latest one (the new one, or the one before it)."""
        with self._changed:
            serial = self._serial
            self.asked = True
        if self.wake is not None:
            self.wake()
        with self._changed:
            self._changed.wait_for(lambda: self._serial != serial, timeout_s)
            return self._latest
