"""celery-dgs: a deadline greedy scheduler for Celery.

``DGS(app)`` declares schedules and installs the worker hooks;
``DeadlineScheduler`` is the beat scheduler class (``-S celery_dgs:DeadlineScheduler``);
``progress()``, ``current_token()``, ``eventful()``, ``report_items()`` and
``current_check()`` are for task code. The errors a caller catches
(:mod:`celery_dgs.errors`: ``DgsError`` and its kinds) are importable from here.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from .errors import (
    DgsError,
    OwnershipError,
    ScheduleConfigError,
    SettingsError,
    UnknownScheduleError,
)


def _installed_version() -> str:
    """The installed distribution's version (from git at its build), or
    ``0+unknown`` when the package runs from a folder never installed."""
    from importlib.metadata import PackageNotFoundError, version

    try:
        return version("celery-dgs")
    except PackageNotFoundError:
        return "0+unknown"


__version__ = _installed_version()

__all__ = [
    "DGS",
    "DeadlineScheduler",
    "DgsError",
    "OwnershipError",
    "ScheduleConfigError",
    "SettingsError",
    "UnknownScheduleError",
    "__version__",
    "current_check",
    "current_token",
    "eventful",
    "progress",
    "report_items",
]

if TYPE_CHECKING:
    from .beat.scheduler import DeadlineScheduler
    from .dgs import DGS
    from .worker.api import current_check, current_token, eventful, progress, report_items


def __getattr__(name: str) -> Any:
    # Lazy, so that importing the pure core does not import Celery or SQLAlchemy.
    if name == "DGS":
        from .dgs import DGS

        return DGS
    if name == "DeadlineScheduler":
        from .beat.scheduler import DeadlineScheduler

        return DeadlineScheduler
    if name in ("progress", "current_token", "eventful", "report_items", "current_check"):
        from .worker import api

        return getattr(api, name)
    raise AttributeError(f"module 'celery_dgs' has no attribute {name!r}")
