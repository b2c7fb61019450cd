"""The scheduling policies the simulator offers (:data:`POLICIES`), built by
:func:`make_policy`.

``dgs`` is beat's decision under an
:class:`~celery_dgs.core.ranking.OrderPolicy`, ``fifo`` the same machinery
keyed by ``can_start_by`` (:mod:`.deadline_policy`); ``beat`` is what Celery
beat does (:mod:`.celery_beat_policy`).
"""

from __future__ import annotations

from ..core.ranking import OrderPolicy
from .celery_beat_policy import BeatPolicy
from .deadline_policy import DEFAULT_ORDER, FIFO_ORDER, DeadlinePolicy
from .policy import Policy
from .state import PolicyHost

#: What a user chooses between: beat's order (with its settings), FIFO and
#: Celery beat.
POLICIES = ("dgs", "fifo", "beat")


def make_policy(name: str, sim: PolicyHost, order: OrderPolicy = DEFAULT_ORDER) -> Policy:
    """The policy ``name`` of :data:`POLICIES`; ``order`` orders ``dgs``."""
    if name == "dgs":
        return DeadlinePolicy(sim, order)
    if name == "fifo":
        return DeadlinePolicy(sim, FIFO_ORDER, fifo=True)
    if name == "beat":
        return BeatPolicy(sim)
    raise ValueError(f"policy must be one of {list(POLICIES)}, got {name!r}")
