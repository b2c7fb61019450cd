"""A separate process that records runs: ``python -m tests.store.run_writer URL OWN SHARED N``.

For each of N rounds it records a failed run of its own schedule ``OWN`` (a new
token each time) and a failed run of ``SHARED``, shared by every writer: its
token is the stored floor + 1, so writers race; a start refused as stale (another
writer recorded that token first) is tried again with a new token, and an end
fenced by a newer start is kept but not counted. Prints ``done`` on success.
"""

from __future__ import annotations

import contextlib
import subprocess
import sys
from datetime import datetime, timedelta, timezone
from pathlib import Path

from celery_dgs.errors import StaleTokenError
from celery_dgs.store import SqlScheduleStore

ROOT = Path(__file__).resolve().parents[2]


def spawn(url: str, writers: list[str], shared: str, rounds: int) -> list[subprocess.Popen[str]]:
    """One writer process per name in ``writers``, each racing on ``shared``."""
    command = [sys.executable, "-m", "tests.store.run_writer", url]
    return [
        subprocess.Popen(
            [*command, name, shared, str(rounds)],
            cwd=ROOT,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
        for name in writers
    ]


def main(url: str, own: str, shared: str, rounds: int) -> None:
    store = SqlScheduleStore(url)
    t0 = datetime(2026, 3, 1, tzinfo=timezone.utc)
    for i in range(rounds):
        at = t0 + timedelta(minutes=i)
        for schedule in (own, shared):
            for attempt in range(1000):
                run_id = f"{own}-{schedule}-{i}-{attempt}"
                token = i + 1 if schedule == own else store.token_floor(schedule) + 1
                try:
                    store.record_run_start(
                        schedule=schedule,
                        run_id=run_id,
                        dispatch_id=None,
                        owner_node=own,
                        owner_name=own,
                        owner_tag=run_id,
                        token=token,
                        started_at=at,
                    )
                    break
                except StaleTokenError:
                    assert schedule == shared, "own tokens always rise"
            with contextlib.suppress(StaleTokenError):  # fenced: kept, not counted
                store.record_run_end(run_id=run_id, outcome="failure", ended_at=at + timedelta(1))
    store.close()
    print("done")


if __name__ == "__main__":
    main(sys.argv[1], sys.argv[2], sys.argv[3], int(sys.argv[4]))
