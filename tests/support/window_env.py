"""Beat's window of schedules for the test projects' processes, from the
environment: ``E2E_SCHEDULE_WINDOW_SIZE`` (unset: beat holds every active
schedule), ``E2E_SCHEDULE_WINDOW`` (seconds, 3600 by default) and
``E2E_SCHEDULE_WINDOW_READ_ON`` (window sizes; ``none``: as far as needed)."""

from __future__ import annotations

import os
from typing import Any


def apply_window_env(app: Any) -> None:
    """Set ``dgs_schedule_window_size`` / ``dgs_schedule_window`` on ``app``'s
    configuration if the environment asks for a window."""
    if "E2E_SCHEDULE_WINDOW_SIZE" in os.environ:
        app.conf.dgs_schedule_window_size = int(os.environ["E2E_SCHEDULE_WINDOW_SIZE"])
        app.conf.dgs_schedule_window = float(os.environ.get("E2E_SCHEDULE_WINDOW", "3600"))
    read_on = os.environ.get("E2E_SCHEDULE_WINDOW_READ_ON")
    if read_on is not None:
        app.conf.dgs_schedule_window_read_on = None if read_on == "none" else float(read_on)
