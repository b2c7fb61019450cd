"""libfaketime (LD_PRELOAD, from the ``libfaketime`` wheel) for a process of a
fault scenario: its wall clock (``time()``, ``gettimeofday``,
``clock_gettime(CLOCK_REALTIME)``) is offset by what a file says, read again on
every call, so the test steps the clock at run time by rewriting the file. The
monotonic clock is left alone (``DONT_FAKE_MONOTONIC=1``), so the history's
times stay one clock for every process."""

from __future__ import annotations

from pathlib import Path

import libfaketime


def faketime_env(offset_file: Path) -> dict[str, str]:
    """The environment that runs a process under libfaketime with the offset in
    ``offset_file`` (libfaketime's syntax, e.g. ``+3600`` or ``+4.5``)."""
    _, env = libfaketime.get_reload_information()
    return {
        **env,
        "FAKETIME_TIMESTAMP_FILE": str(offset_file),
        "FAKETIME_NO_CACHE": "1",
        "DONT_FAKE_MONOTONIC": "1",
    }
