"""End to end: with a full window of schedules, beat's default order still
dispatches the whole fleet's pick (the certainty rule reads on).

A real beat with a window of 5 (relative laxity, the default 60 s floor; no
look-ahead, so the planned run times hold nothing back), one real worker with
one slot, and 31 never-run runtime schedules registered together (``reg``).
A never-run periodic schedule can start at ``reg``, has ``error_at = reg +
period`` and a margin of its ``duration_override``:

==========  ======  ========  ===============  ================================
schedule    period  override  should_start_by  laxity at reg, (error_at - now) /
                                               (margin + 60 s)
==========  ======  ========  ===============  ================================
s00...s29   600+i   1 s       reg + 599 + i    (600 + i) / 61 >= 9.8
far         7200    3000 s    reg + 4200       7200 / 3060 = 2.35
==========  ======  ========  ===============  ================================

The window holds the 5 most urgent by ``should_start_by`` (s00...s04); ``far``
comes last in that order but has the lowest laxity, so the whole fleet's
first pick is ``far`` (its laxity stays the lowest for minutes). With the
window reading on as far as the rule needs, beat's first dispatch is
``far``. So it is with reading on bounded to one window size (10 held):
``far`` is 31st by ``should_start_by``, out of reach, but it is the only
schedule of its margin bucket, whose slice the rule reads when it refuses
``s00``. With no reading on (``dgs_schedule_window_read_on = 0``) it is
``s00``, the held schedules' pick.
"""

from __future__ import annotations

import pytest

from celery_dgs.runtime_schedules import RuntimeSchedules
from tests.e2e.harness import wait_for

pytestmark = [pytest.mark.e2e, pytest.mark.timeout(120)]


def fleet() -> list[dict[str, object]]:
    rows: list[dict[str, object]] = [
        {
            "name": f"e2e.scrape@s{i:02d}",
            "period": 600 + i,
            "duration_override": 1,
            "args": [f"s{i:02d}"],
        }
        for i in range(30)
    ]
    rows.append(
        {"name": "e2e.scrape@far", "period": 7200, "duration_override": 3000, "args": ["far"]}
    )
    return rows


@pytest.mark.parametrize(
    ("read_on", "first"),
    [("none", "scrape@far"), ("1", "scrape@far"), ("0", "scrape@s00")],
    ids=["read-on", "read-on-bounded", "held"],
)
def test_a_full_window_dispatches_the_fleets_pick(
    cluster_factory, read_on: str, first: str
) -> None:
    cluster = cluster_factory(
        ["scrape"],
        E2E_LOOKAHEAD="0",
        E2E_SCHEDULE_WINDOW_SIZE="5",
        E2E_SCHEDULE_WINDOW_READ_ON=read_on,
    )
    store = cluster.store()
    try:
        report = RuntimeSchedules(store).upsert_many(fleet())
        assert report.ok, report.errors
    finally:
        store.close()
    cluster.start_worker("w1", "node1")
    cluster.start_beat()
    wait_for(lambda: len(cluster.starts()) >= 3, 60, "three runs to start")
    starts = [e["name"] for e in cluster.starts()]
    assert starts[0] == first, cluster.logs()
    logs = cluster.logs()
    assert "the schedule window is full" in logs
    registered = cluster.schedule("e2e.scrape@far").stats.registered_at
    # decided while far's laxity is the lowest (for minutes after registration)
    assert cluster.starts()[0]["t"] - registered.timestamp() < 60, logs
