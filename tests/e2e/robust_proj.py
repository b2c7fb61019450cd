"""The end-to-end project (tests/e2e/proj.py) with what the start-up tests need:
extra ``app.conf`` from ``E2E_EXTRA_CONF`` (JSON; e.g. an unknown ``dgs_`` key)
and a scheduled task whose body leaves a marker file."""

from __future__ import annotations

import json
import os
from datetime import timedelta
from pathlib import Path

from tests.e2e.proj import app, dgs, work

__all__ = ["app", "marker"]

app.conf.update(json.loads(os.environ.get("E2E_EXTRA_CONF", "{}")))


@dgs.periodic(timedelta(seconds=float(os.environ.get("E2E_MARKER_PERIOD", "3600"))))
@app.task(name="e2e.marker")
def marker() -> str:
    """Its body ran: the marker file exists (and the run is in the event list)."""
    Path(os.environ["E2E_MARKER"]).write_text("ran\n")
    return work("marker", float(os.environ.get("E2E_MARKER_SECONDS", "0.1")))
