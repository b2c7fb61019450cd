"""End to end: the look-ahead admission caps the long runs, with default
settings (no ``dgs_lookahead`` in the app's configuration: it is on).

Real Redis, SQLite store, two one-slot workers and a real beat
(tests/e2e/proj.py). Two long jobs run 4 s every 10 s, a short one 0.2 s every
2 s. The long ones need 0.8 of a slot and the short one a tenth, so one long
run at a time is allowed (2 - 0.1 / 0.95 slots, rounded down by the count).
Run one after the other, each long job falls due (10 s after its last start,
less its 4 s margin) while the other still runs: without the cap it then
starts beside it and the short job has no slot for up to 2 s; with it, it
waits for the other to end. Neither has a cooldown: the one whose run just
ended is eligible again at once, and the cap's queue gives the slot to the
one waiting for it, so they take turns. ``celery dgs status`` meanwhile
projects beat's order with the admission, and so does not call the short job
late, and shows the waiting long job held by the look-ahead.
"""

from __future__ import annotations

import itertools
from typing import Any

import pytest

from tests.e2e.harness import Cluster, wait_for
from tests.e2e.test_cli_e2e import status

pytestmark = [pytest.mark.e2e, pytest.mark.timeout(120)]

LONG = ("la_long1", "la_long2")


def runs_of(cluster: Cluster, name: str) -> list[tuple[float, float]]:
    """(start, end) of each ended run of ``name``, from the workers' own clocks."""
    ends = cluster.ends(name)
    out = []
    for start in (e for e in cluster.starts() if e["name"] == name):
        end = next((e for e in ends if e["pid"] == start["pid"] and e["t"] >= start["t"]), None)
        if end is not None:
            out.append((start["t"], end["t"]))
    return out


def overlaps(a: list[tuple[float, float]], b: list[tuple[float, float]]) -> list[Any]:
    return [(x, y) for x in a for y in b if max(x[0], y[0]) < min(x[1], y[1])]


def test_two_long_jobs_never_run_at_once_and_the_short_one_keeps_a_slot(
    cluster_factory,
) -> None:
    cluster = cluster_factory([*LONG, "la_short"])
    cluster.start_worker("w1", "node1")
    cluster.start_worker("w2", "node2")
    cluster.start_beat()
    wait_for(
        lambda: all(len(runs_of(cluster, n)) >= 2 for n in LONG), 90, "two runs of each long job"
    )
    # `status --project` projects beat's order with the admission: the long job waiting
    # for the other leaves the short one its slot, so it is not projected late.
    # The long job waiting for the other shows why it does not start.
    reasons, long_holds = [], []
    for _ in range(5):
        _, rows = status(cluster, "--project")
        reasons.append(rows["e2e.la_short"]["reason"])
        long_holds += [h["reason"] for n in LONG for h in rows[f"e2e.{n}"]["holds"]]
    assert "projected_late" not in reasons, reasons
    assert "lookahead" in long_holds, long_holds
    wait_for(
        lambda: all(len(runs_of(cluster, n)) >= 3 for n in LONG), 60, "three runs of each long job"
    )
    first, second = (runs_of(cluster, n) for n in LONG)
    logs = cluster.logs()
    print(
        "long runs (start, end mod 100 s):",
        [[(round(a % 100, 1), round(b % 100, 1)) for a, b in runs] for runs in (first, second)],
    )
    assert overlaps(first, second) == [], logs
    # Neither is starved: they take turns (the one that just ended does not take
    # the slot back from the one waiting for it).
    starts = sorted([(s, 1) for s, _ in first] + [(s, 2) for s, _ in second])
    assert all(a[1] != b[1] for a, b in itertools.pairwise(starts)), starts
    # The short job ran all along beside them, on the slot the cap kept.
    window = (starts[0][0], max(e for _, e in first + second))
    short = [s for s, _ in runs_of(cluster, "la_short") if window[0] <= s <= window[1]]
    assert len(short) >= (window[1] - window[0]) / 2.0 - 2, (short, window)
    gaps = [b - a for a, b in itertools.pairwise(short)]
    assert max(gaps) < 2.0 + 1.0, gaps
