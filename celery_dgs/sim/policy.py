"""What the simulator's event loop asks of a scheduling policy (:class:`Policy`),
and how a caller builds one on the loop (:data:`PolicyFactory`)."""

from __future__ import annotations

from collections.abc import Callable

from .state import PolicyHost


class Policy:
    """What the event loop asks of a policy."""

    name = ""

    def __init__(self, sim: PolicyHost) -> None:
        self.sim = sim

    def idle(self, name: str, now: float) -> None:
        """``name`` is not running any more (or never ran): it may be scheduled."""

    def held(self, name: str) -> None:
        """``name`` ended a run and is held (a disabled adaptive schedule): it is
        not scheduled until it is idle again."""

    def dispatch(self, now: float) -> None:
        """Start runs on free slots (``sim.start_run``)."""

    def next_wakeup(self) -> float | None:
        """When a schedule that cannot start yet becomes eligible (None: never)."""
        return None

    def class_picks(self) -> int | None:
        """Dispatches after warm-up that the priority classes chose over the
        policy's own order (None: no classes)."""
        return None


#: Builds a policy on the loop (e.g. a benchmark's own order).
PolicyFactory = Callable[[PolicyHost], Policy]
