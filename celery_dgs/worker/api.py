"""What task code may call while it runs under celery-dgs."""

from __future__ import annotations

from .supervisor import current_supervisor


def progress(fraction: float) -> bool:
    """Report progress 0..1 of the current run; sent with the next ping and shown
    by ``celery dgs leases``. Returns False when not inside a supervised run."""
    sup = current_supervisor()
    if sup is None:
        return False
    sup.set_progress(float(fraction))
    return True


def current_token() -> int | None:
    """The fencing token of the current run (strictly increasing per schedule),
    for fencing the task's own writes; None outside a supervised run."""
    sup = current_supervisor()
    return sup.token if sup is not None else None
