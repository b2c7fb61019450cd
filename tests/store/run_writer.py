"""A separate process that records runs: ``python -m tests.store.run_writer URL OWN SHARED N``.

For each of N rounds it records a failed run of its own schedule ``OWN`` (a new
token each time) and a failed run of ``SHARED`` (token 1, shared by every
writer, so every end counts). Prints ``done`` on success.
"""

from __future__ import annotations

import sys
from datetime import datetime, timedelta, timezone

from celery_dgs.store import SqlScheduleStore


def main(url: str, own: str, shared: str, rounds: int) -> None:
    store = SqlScheduleStore(url)
    t0 = datetime(2026, 3, 1, tzinfo=timezone.utc)
    for i in range(rounds):
        at = t0 + timedelta(minutes=i)
        for schedule, token in ((own, i + 1), (shared, 1)):
            run_id = f"{own}-{schedule}-{i}"
            store.record_run_start(
                schedule=schedule, run_id=run_id, dispatch_id=None, owner_node=own,
                owner_name=own, owner_tag=run_id, token=token, started_at=at,
            )  # fmt: skip
            store.record_run_end(run_id=run_id, outcome="failure", ended_at=at + timedelta(1))
    store.close()
    print("done")


if __name__ == "__main__":
    main(sys.argv[1], sys.argv[2], sys.argv[3], int(sys.argv[4]))
