"""End to end: beat's relative-laxity order against plain deadline order.

Real Redis, SQLite store, one real worker with one slot and a real beat. Two
never-run periodic schedules (tests/e2e/proj.py), both eligible at their
registration ``reg`` with ``error_at = reg + period`` and a margin of exactly
their ``duration_override``:

========  ======  ========  ===============  =====================================
schedule  period  override  should_start_by  laxity at reg, (error_at - now) /
                                             (margin + floor), floor = 1 s
========  ======  ========  ===============  =====================================
lax_a     40 s    10 s      reg + 30         40 / (10 + 1) = 3.64
lax_b     20 s    1 s       reg + 19         20 / (1 + 1)  = 10
========  ======  ========  ===============  =====================================

Deadline order (``dgs_laxity_floor = None``) runs lax_b first (19 < 30);
relative laxity with a 1 s floor runs lax_a first. lax_a keeps the lower
laxity while ``(40 - d) / 11 < (20 - d) / 2``, i.e. for ``d < 15.5`` s after
registration, far more than beat needs for its first dispatch. (With the
default 60 s floor lax_b would go first again: 20 / 61 < 40 / 70.)
"""

from __future__ import annotations

import pytest

from tests.e2e.harness import wait_for

pytestmark = [pytest.mark.e2e, pytest.mark.timeout(120)]


@pytest.mark.parametrize(
    ("floor", "expected"),
    [("1", ["lax_a", "lax_b"]), ("none", ["lax_b", "lax_a"])],
    ids=["laxity-floor-1s", "deadline-order"],
)
def test_one_slot_dispatch_order_follows_the_laxity_floor(
    cluster_factory, floor: str, expected: list[str]
) -> None:
    cluster = cluster_factory(["lax_a", "lax_b"], E2E_LAXITY_FLOOR=floor)
    cluster.start_worker("w1", "node1")
    cluster.start_beat()
    wait_for(lambda: len(cluster.starts()) >= 2, 60, "both schedules to start")
    starts = cluster.starts()
    order = [e["name"] for e in starts[:2]]
    assert order == expected, cluster.logs()
    # The decision was taken well inside the window where the two orders differ
    # (lax_a's laxity is the lower one until 15.5 s after registration).
    registered = cluster.schedule("e2e.lax_a").stats.registered_at
    assert registered == cluster.schedule("e2e.lax_b").stats.registered_at
    assert starts[0]["t"] - registered.timestamp() < 15.5 - 5, cluster.logs()
    # One slot: the second run started only after the first one ended.
    first_end = wait_for(lambda: cluster.ends(order[0]), 30, "the first run to end")[0]
    assert starts[1]["t"] >= first_end["t"]
