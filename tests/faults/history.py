"""The fault suite's history: an append-only JSON-lines file the test owns.

It lives outside the system under test (no Redis, no SQL store): every run of
a fault task appends its start (schedule, token, run id, pid, host) and its end
(outcome), and the test appends every fault it injects (which processes it
killed, paused, resumed, cut off). The checker (``checker.py``) reads it back.

Times are ``time.monotonic()``: CLOCK_MONOTONIC is one clock for every process
on the machine, and it does not jump when a process's wall clock is faked
(libfaketime is run with ``DONT_FAKE_MONOTONIC=1``).

Each event is one ``write`` of one line on a descriptor opened with
``O_APPEND``, so lines written by concurrent processes never interleave.
"""

from __future__ import annotations

import json
import os
import time
from collections.abc import Iterable
from pathlib import Path
from typing import Any

#: Fault kinds after which the affected runs must be taken over (their owner
#: died or cannot reach Redis); the checker's recovery rule applies to these.
FAILING_FAULTS = frozenset(
    {
        "sigkill",
        "sigstop",
        "partition",
        "warm_shutdown",
        "cold_shutdown",
        "redis_restart",
        "redis_failover",
    }
)


class History:
    def __init__(self, path: Path | str) -> None:
        self.path = Path(path)

    def append(self, kind: str, **fields: Any) -> dict[str, Any]:
        event = {"kind": kind, "t": time.monotonic(), "wall": time.time(), **fields}
        line = (json.dumps(event, sort_keys=True) + "\n").encode()
        fd = os.open(self.path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)
        try:
            os.write(fd, line)
        finally:
            os.close(fd)
        return event

    # -- what runs write ---------------------------------------------------------------
    def run_start(
        self,
        schedule: str,
        *,
        token: int | None,
        run_id: str | None,
        host: str,
        dispatch_id: str | None = None,
    ) -> dict[str, Any]:
        return self.append(
            "start",
            schedule=schedule,
            token=token,
            run_id=run_id,
            pid=os.getpid(),
            host=host,
            dispatch_id=dispatch_id,
        )

    def run_end(self, schedule: str, *, run_id: str | None, outcome: str) -> dict[str, Any]:
        return self.append(
            "end", schedule=schedule, run_id=run_id, pid=os.getpid(), outcome=outcome
        )

    # -- what the test writes ---------------------------------------------------------
    def fault(
        self, fault: str, *, pids: Iterable[int] = (), hosts: Iterable[str] = (), **extra: Any
    ) -> dict[str, Any]:
        """A fault injected now. ``pids``/``hosts``: the processes it hits."""
        return self.append("fault", fault=fault, pids=list(pids), hosts=list(hosts), **extra)

    def exited(self, pids: Iterable[int]) -> dict[str, Any]:
        """These processes are gone (killed, or seen to exit): an un-ended run of
        theirs ends here."""
        return self.append("exited", pids=list(pids))

    def resumed(self, pids: Iterable[int] = (), hosts: Iterable[str] = ()) -> dict[str, Any]:
        """Paused processes continue, or a cut-off host reaches Redis again."""
        return self.append("resumed", pids=list(pids), hosts=list(hosts))

    def events(self) -> list[dict[str, Any]]:
        if not self.path.exists():
            return []
        with self.path.open(encoding="utf-8") as fh:
            return [json.loads(line) for line in fh if line.strip()]
